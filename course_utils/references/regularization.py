"""Regularisers on labels and inputs (chapter 08 references; used by the trainer)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "label_smoothing_cross_entropy",
    "mixup_batch",
    "cutmix_batch",
    "soft_cross_entropy",
]


def label_smoothing_cross_entropy(
    logits: Tensor, targets: Tensor, epsilon: float
) -> Tensor:
    """Mean cross-entropy against ``(1 - epsilon) * one_hot + epsilon / K`` (K classes).

    Equals ``F.cross_entropy(logits, targets, label_smoothing=epsilon)``: the epsilon mass is
    spread over all K classes, the true one included (not epsilon / (K - 1)).
    """
    k = logits.shape[-1]
    target = (
        F.one_hot(targets, k).to(logits.dtype) * (1 - epsilon) + epsilon / k
    )
    return soft_cross_entropy(logits, target)


def soft_cross_entropy(logits: Tensor, target: Tensor) -> Tensor:
    """Mean cross-entropy against a target distribution ``(B, K)`` (mixed or smoothed labels)."""
    return -(target * logits.log_softmax(dim=-1)).sum(dim=-1).mean()


def mixup_batch(
    x: Tensor, y_onehot: Tensor, lam: float, perm: Tensor
) -> tuple[Tensor, Tensor]:
    """MixUp: ``lam * x + (1 - lam) * x[perm]``, and the same for the one-hot labels."""
    return lam * x + (1 - lam) * x[perm], lam * y_onehot + (
        1 - lam
    ) * y_onehot[perm]


def cutmix_batch(
    x: Tensor,
    y_onehot: Tensor,
    lam: float,
    perm: Tensor,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """CutMix: paste a box of area ~(1 - lam) from ``x[perm]``; labels mix by the true box area."""
    h, w = x.shape[-2:]
    cut = (1 - lam) ** 0.5
    bh, bw = int(h * cut), int(w * cut)
    cy = int(torch.randint(0, h, (1,), generator=generator))
    cx = int(torch.randint(0, w, (1,), generator=generator))
    y0, y1 = max(cy - bh // 2, 0), min(cy + bh // 2, h)
    x0, x1 = max(cx - bw // 2, 0), min(cx + bw // 2, w)
    mixed = x.clone()
    mixed[..., y0:y1, x0:x1] = x[perm][..., y0:y1, x0:x1]
    kept = 1 - (y1 - y0) * (x1 - x0) / (h * w)
    return mixed, kept * y_onehot + (1 - kept) * y_onehot[perm]
