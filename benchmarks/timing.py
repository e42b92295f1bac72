"""Training steps timed side by side, shared by the benchmarks that compare step speeds.

``train_step`` times one full step (forward, backward, optimiser); ``in_rotation`` (whose home is
``course_utils.training.precision``, where the trainer's precision probe uses it too) takes the
variants in turn, one step each per round, so that a busy moment of the machine slows all of them
alike instead of one.  ``seeded_model`` and ``synthetic_batch`` give every variant the same start;
``ratio_spread`` summarises the per-round ratios and ``epochs_in_half_hour`` turns a speed into
chapter 07's unit.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F

from course_utils.training.precision import in_rotation
from course_utils.training.recipes import Recipe, build_model

__all__ = [
    "train_step",
    "in_rotation",
    "seeded_model",
    "synthetic_batch",
    "ratio_spread",
    "epochs_in_half_hour",
    "TRAIN_IMAGES",
    "BUDGET_S",
]

# chapter 07's half hour, and the training images an epoch reads (CIFAR-10 less validation)
TRAIN_IMAGES, BUDGET_S = 45_000, 30 * 60


def seeded_model(recipe: Recipe, channels_last: bool) -> torch.nn.Module:
    """The recipe's network with the same initial weights every call, in the given memory format."""
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return build_model(recipe).to(memory_format=fmt)


def synthetic_batch(
    batch_size: int, channels_last: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same random batch every call: images ``(B, 3, 32, 32)`` in the given memory format, labels
    ``(B,)`` in 0..9."""
    gen = torch.Generator().manual_seed(1)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(batch_size, 3, 32, 32, generator=gen).contiguous(
        memory_format=fmt
    )
    return x, torch.randint(0, 10, (batch_size,), generator=gen)


def ratio_spread(
    numerators: list[float],
    denominators: list[float],
    digits: int | None = 3,
) -> dict:
    """``{"median", "min", "max"}`` of the per-round ratios ``numerators[i] / denominators[i]``
    (rounded to ``digits``; None: not rounded)."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    spread = {
        "median": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
    }
    return (
        spread
        if digits is None
        else {k: round(v, digits) for k, v in spread.items()}
    )


def epochs_in_half_hour(images_per_s: float) -> float:
    """Epochs of training steps (no validation) in ``BUDGET_S`` at ``images_per_s``."""
    return round(BUDGET_S * images_per_s / TRAIN_IMAGES, 1)


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
