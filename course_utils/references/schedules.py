"""Learning-rate schedules (chapter 08 references; used by the trainer)."""

from __future__ import annotations

import math

__all__ = ["warmup_cosine_lr", "noam_lr"]


def warmup_cosine_lr(
    step: int, total_steps: int, warmup_steps: int, base_lr: float
) -> float:
    """Linear warmup from 0 to ``base_lr`` over ``warmup_steps``, then cosine decay to 0 at ``total_steps``.

    ``base_lr * step / warmup_steps`` while ``step < warmup_steps``, then
    ``base_lr * 0.5 * (1 + cos(pi * (step - warmup_steps) / (total_steps - warmup_steps)))``.
    """
    if total_steps <= warmup_steps:
        raise ValueError(
            f"warmup_cosine_lr: total_steps={total_steps} must exceed warmup_steps={warmup_steps}"
        )
    if step < warmup_steps:
        return base_lr * step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return base_lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """The Transformer paper's schedule: ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``, step >= 1."""
    if step < 1:
        raise ValueError(f"noam_lr: step counts from 1, got {step}")
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
