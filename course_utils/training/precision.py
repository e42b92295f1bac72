"""Which precision a run trains in, and the timing that decides it on a CPU.

``choose_amp(recipe, model, device, log)`` turns the recipe's ``amp`` into an autocast dtype (or
``None`` for float32); for ``amp="auto"`` on a CPU it times a few forward/backward passes in
float32 and in bf16 and keeps bf16 only where it is clearly faster (a CPU without native bf16
emulates it, slower than float32).

``in_rotation`` is the one way the course times variants against each other: the variants take
turns, one step each per round, so that a busy moment of the machine slows all of them alike
instead of one.  The benchmarks that compare step speeds (``benchmarks/timing.py``) time with it too.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .recipes import Recipe

__all__ = ["choose_amp", "in_rotation"]

K = TypeVar("K", bound=Hashable)


def in_rotation(
    steps: dict[K, Callable[[], float]],
    rounds: int,
    *,
    alternate: bool = False,
    warmup: int = 2,
) -> dict[K, list[float]]:
    """``warmup`` untimed calls of each step (first steps allocate and pick kernels), then ``rounds``
    rounds of one call per step, in the dict's order; ``alternate`` reverses the order every other
    round.  Each step returns the seconds it took; returns those seconds per step, in call order."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    seconds: dict[K, list[float]] = {name: [] for name in steps}
    for r in range(rounds):
        order = (
            list(steps)
            if not alternate or r % 2 == 0
            else list(reversed(steps))
        )
        for name in order:
            seconds[name].append(steps[name]())
    return seconds


def choose_amp(
    recipe: Recipe, model: nn.Module, device: torch.device, log: Callable
) -> torch.dtype | None:
    """The autocast dtype: measured on the CPU for "auto" (bf16 only when it is faster)."""
    if recipe.amp == "none":
        return None
    if recipe.amp == "bf16":
        return torch.bfloat16
    if recipe.amp == "fp16":
        return torch.float16
    if device.type == "cuda":
        return (
            torch.bfloat16
            if torch.cuda.is_bf16_supported()
            else torch.float16
        )
    if device.type != "cpu":
        return None
    # the probe must not move the (restored) RNG stream
    with torch.random.fork_rng(devices=[]):
        # (B, 3, 32, 32) images
        x = torch.randn(min(recipe.batch_size, 64), 3, 32, 32, device=device)
        if recipe.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        # Three rounds in alternating order, the fastest of each kept: a moment when the machine is
        # busy slows one round of one dtype, and must not decide the precision of a long run.
        # (_time_steps warms up itself, so the rotation adds no warm-up calls.)
        timings = in_rotation(
            {
                None: lambda: _time_steps(model, x, None),
                torch.bfloat16: lambda: _time_steps(
                    model, x, torch.bfloat16
                ),
            },
            rounds=3,
            alternate=True,
            warmup=0,
        )
    fp32, bf16 = min(timings[None]), min(timings[torch.bfloat16])
    chosen = torch.bfloat16 if bf16 < 0.9 * fp32 else None
    log(
        f"amp=auto on CPU: float32 {fp32:.2f}s vs bf16 {bf16:.2f}s for 3 steps (fastest of 3 rounds) "
        f"-> {'bf16' if chosen else 'float32'}"
    )
    # its epochs fill half an hour in bf16, not in float32
    if chosen is None and recipe.name == "cpu":
        log(
            "this CPU trains faster in float32: the cpu recipe's epochs are set for native bf16; "
            "--recipe cpu_float32 fits the same half hour in float32"
        )
    return chosen


def _time_steps(
    model: nn.Module, x: Tensor, dtype: torch.dtype | None
) -> float:
    """Seconds for 3 forward/backward passes of ``model`` on ``x (B, 3, H, W)`` under CPU autocast to
    ``dtype`` (``None``: float32), after one untimed warm-up pass; the model is left unchanged.

    The gradients come from ``torch.autograd.grad``, which returns them instead of storing them in
    ``.grad``: this is a measurement, not a training step (``Trainer`` is the one place that runs
    ``backward`` into a model's gradients), and nothing is left on the parameters afterwards.
    """
    # the forward pass moves norm statistics
    state = {k: v.clone() for k, v in model.state_dict().items()}
    params = [p for p in model.parameters() if p.requires_grad]
    for i in range(4):
        if i == 1:
            start = time.perf_counter()
        with torch.autocast(
            "cpu", dtype=torch.bfloat16, enabled=dtype is not None
        ):
            logits = model(x)  # (B, classes)
        y = torch.arange(len(x)) % logits.shape[-1]
        torch.autograd.grad(
            F.cross_entropy(logits.float(), y), params, allow_unused=True
        )
    elapsed = time.perf_counter() - start
    model.load_state_dict(state)
    return elapsed
