"""Training steps timed side by side, shared by the benchmarks that compare step speeds.

``train_step`` times one full step (forward, backward, optimiser); ``in_rotation`` (whose home is
``course_utils.training.precision``, where the trainer's precision probe uses it too) takes the
variants in turn, one step each per round, so that a busy moment of the machine slows all of them
alike instead of one.
"""

from __future__ import annotations

import time
import torch
import torch.nn.functional as F

from course_utils.training.precision import in_rotation

__all__ = ["train_step", "in_rotation"]


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    bf16: bool,
) -> float:
    """Seconds for one training step on ``x (B, 3, H, W)``, ``y (B,)``, under bf16 autocast if asked."""
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(model(x).float(), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start
