"""Reference masks and the masked softmax (chapter 06; used by every attention reference).

Boolean masks mean "may attend": True = this key takes part, False = blocked.  They
broadcast against scores of shape ``(..., m, n)``.  ``nn.MultiheadAttention``'s
``key_padding_mask`` uses the opposite convention (True = ignore).
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["padding_mask", "causal_mask", "masked_softmax", "check_mask"]


def padding_mask(lengths: Tensor, max_len: int) -> Tensor:
    """bool ``(B, max_len)``: True at positions ``< lengths[b]`` (the real tokens)."""
    if not isinstance(lengths, Tensor) or lengths.dim() != 1:
        raise ValueError(f"padding_mask: lengths must be a 1-D tensor of sequence lengths, got {lengths!r:.60}")
    if lengths.is_floating_point():
        raise TypeError(f"padding_mask: lengths must be integers, got {lengths.dtype}")
    if (lengths < 0).any() or (lengths > max_len).any():
        raise ValueError(f"padding_mask: lengths must lie in [0, max_len={max_len}], got {lengths.tolist()}")
    positions = torch.arange(max_len, device=lengths.device)
    return positions[None, :] < lengths[:, None]


def causal_mask(n: int, *, device: torch.device | str | None = None) -> Tensor:
    """bool ``(n, n)``: True where key index <= query index (a token sees itself and the past)."""
    if n < 0:
        raise ValueError(f"causal_mask: n must be >= 0, got {n}")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def check_mask(mask: Tensor, scores_shape: torch.Size, fn: str) -> None:
    """Raise a clear error unless ``mask`` is bool and broadcasts against ``scores_shape``."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{fn}: mask must be a bool tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{fn}: mask has dtype {mask.dtype}; the course's masks are bool with True = may attend "
            "(convert a 0/1 mask with mask.bool(), or an additive -inf mask with mask == 0)"
        )
    try:
        torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        raise ValueError(
            f"{fn}: mask of shape {tuple(mask.shape)} does not broadcast against scores of shape "
            f"{tuple(scores_shape)} (queries x keys in the last two dims)"
        ) from None


def masked_softmax(scores: Tensor, mask: Tensor | None, dim: int = -1) -> Tensor:
    """Softmax of ``scores`` over the entries where ``mask`` is True.

    Blocked entries get weight exactly 0; a row with no allowed entry is all zeros (never
    NaN).  Blocked entries are set to -inf rather than a large negative number, which
    overflows in float16 (-1e9) or is not even representable there (-1e10).
    """
    if mask is None:
        from .attention import softmax

        return softmax(scores, dim=dim)
    check_mask(mask, scores.shape, "masked_softmax")
    filled = scores.masked_fill(~mask, float("-inf"))
    top = filled.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # empty rows: any finite shift
    e = (filled - top).exp()  # exp(-inf) = 0 for blocked entries
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))
