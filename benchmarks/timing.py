"""Training steps timed side by side, shared by the benchmarks that compare step speeds.

``train_step`` times one full step (forward, backward, optimiser); ``in_rotation`` takes the
variants in turn, one step each per round, so that a busy moment of the machine slows all of them
alike instead of one.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               bf16: bool) -> float:
    """Seconds for one training step on ``x (B, 3, H, W)``, ``y (B,)``, under bf16 autocast if asked."""
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(model(x).float(), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def in_rotation(steps: dict[str, Callable[[], float]], rounds: int, *, alternate: bool = False) -> dict[str, list[float]]:
    """Two warm-up steps each (first steps allocate and pick kernels), then ``rounds`` rounds of one
    step per variant; ``alternate`` reverses the order every other round.  Returns the seconds per step."""
    for step in steps.values():
        step(), step()
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(rounds):
        order = list(steps) if not alternate or r % 2 == 0 else list(reversed(steps))
        for name in order:
            seconds[name].append(steps[name]())
    return seconds
