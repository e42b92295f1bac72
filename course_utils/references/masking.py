"""Reference masks and the masked softmax (chapter 06; used by every attention reference).

Boolean masks mean "may attend": True = this key takes part, False = blocked.  They
broadcast against scores of shape ``(..., m, n)``.  ``nn.MultiheadAttention``'s
``key_padding_mask`` uses the opposite convention (True = ignore).

Chapter 06's graded references: ``padding_mask``, ``causal_mask``, ``masked_softmax`` and
``combined_mask`` (padding and causality in one mask that broadcasts over the heads).
Around them: ``key_mask`` (a per-key mask shaped for ``(B, H, m, n)`` scores) and
``to_additive_mask`` (the float form PyTorch also accepts).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "padding_mask",
    "causal_mask",
    "masked_softmax",
    "check_mask",
    "combined_mask",
    "key_mask",
    "to_additive_mask",
]


def _keep_from_lengths(lengths: Tensor, max_len: int, fn: str) -> Tensor:
    if not isinstance(lengths, Tensor) or lengths.dim() != 1:
        raise ValueError(
            f"{fn}: lengths must be a 1-D tensor of sequence lengths, got {lengths!r:.60}"
        )
    if lengths.is_floating_point():
        raise TypeError(
            f"{fn}: lengths must be integers, got {lengths.dtype}"
        )
    if (lengths < 0).any() or (lengths > max_len).any():
        raise ValueError(
            f"{fn}: lengths must lie in [0, max_len={max_len}], got {lengths.tolist()}"
        )
    positions = torch.arange(max_len, device=lengths.device)
    # Position p of sequence b is a real token iff p < lengths[b]: a sequence of length L
    # occupies positions 0 .. L-1, so `<=` would let one padding token through.
    return positions[None, :] < lengths[:, None]


def padding_mask(lengths: Tensor, max_len: int) -> Tensor:
    """bool ``(B, max_len)``: True at positions ``< lengths[b]`` (the real tokens)."""
    return _keep_from_lengths(lengths, max_len, "padding_mask")


def causal_mask(
    n: int, *, device: torch.device | str | None = None
) -> Tensor:
    """bool ``(n, n)``: True where key index <= query index (a token sees itself and the past)."""
    if n < 0:
        raise ValueError(f"causal_mask: n must be >= 0, got {n}")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def key_mask(keep: Tensor) -> Tensor:
    """A per-key mask ``(B, n)`` (True = real token) as ``(B, 1, 1, n)``.

    Scores of multi-head attention are ``(B, H, m, n)``: the two inserted dims let one mask per
    sequence broadcast over the H heads and the m queries.  (Broadcasting aligns shapes from the
    right, so a ``(B, n)`` mask used as it is would pair its batch dim with the queries.)
    """
    if (
        not isinstance(keep, Tensor)
        or keep.dtype != torch.bool
        or keep.dim() != 2
    ):
        raise ValueError(
            f"key_mask: expected a bool (B, n) mask, got {getattr(keep, 'dtype', type(keep))} "
            f"{tuple(getattr(keep, 'shape', ()))}"
        )
    return keep[:, None, None, :]


def combined_mask(lengths: Tensor, max_len: int) -> Tensor:
    """bool ``(B, 1, max_len, max_len)`` for a decoder's self-attention on padded sequences.

    ``mask[b, 0, i, j]`` is True iff key j is a real token of sequence b (``j < lengths[b]``)
    and is not in query i's future (``j <= i``).  The size-1 dim broadcasts over the heads of
    ``(B, H, n, n)`` scores.
    """
    # The private helper rather than `padding_mask`: a notebook may rebind the public name, and
    # this reference must not change with it.
    keep = _keep_from_lengths(lengths, max_len, "combined_mask")  # (B, n)
    # (B,1,1,n) & (n,n)
    return keep[:, None, None, :] & causal_mask(
        max_len, device=lengths.device
    )


def check_mask(mask: Tensor, scores_shape: torch.Size, fn: str) -> None:
    """Raise a clear error unless ``mask`` is bool and broadcasts against ``scores_shape``."""
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"{fn}: mask must be a bool tensor, got {type(mask).__name__}"
        )
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


def masked_softmax(
    scores: Tensor, mask: Tensor | None, dim: int = -1
) -> Tensor:
    """Softmax of ``scores`` over the entries where ``mask`` is True.

    Blocked entries get weight exactly 0; a row with no allowed entry is all zeros (never
    NaN).  Blocked entries are set to -inf rather than a large negative number, which
    overflows in float16 (-1e9) or is not even representable there (-1e10).
    """
    if mask is None:
        filled = scores  # the plain softmax, with the same max shift
    else:
        check_mask(mask, scores.shape, "masked_softmax")
        filled = scores.masked_fill(~mask, float("-inf"))
    top = filled.amax(dim=dim, keepdim=True)
    # empty rows: any finite shift
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = (filled - top).exp()  # exp(-inf) = 0 for blocked entries
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def to_additive_mask(
    mask: Tensor, dtype: torch.dtype = torch.float32
) -> Tensor:
    """A bool mask (True = may attend) as an additive float mask: 0 where allowed, -inf where blocked.

    This is the form of ``nn.Transformer.generate_square_subsequent_mask``; adding it to the
    scores before a plain softmax gives the masked softmax, except for rows with nothing
    allowed, which become NaN (all -inf) -- one reason the course prefers bool masks.
    """
    if mask.dtype != torch.bool:
        raise TypeError(
            f"to_additive_mask: expected a bool mask (True = may attend), got {mask.dtype}"
        )
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))
