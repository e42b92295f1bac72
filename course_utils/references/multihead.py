"""Reference multi-head attention (chapter 04): split heads, attend per head, merge, project.

Shapes: ``(B, N, H*D)`` <-> ``(B, H, N, D)``; head h owns features ``h*D:(h+1)*D``.
Chapter 04's graded references: ``split_heads``, ``merge_heads``, ``MultiHeadAttention``.
Around them, elsewhere: ``models.torch_interop`` (the same weights in
``torch.nn.MultiheadAttention``), ``grading.isolation.reference_heads`` (a learner's module run
with these ``split_heads``/``merge_heads``) and ``training.toy_task`` (chapter 04's toy task).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from .masking import masked_softmax

__all__ = ["split_heads", "merge_heads", "MultiHeadAttention"]


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """``(..., N, H*D) -> (..., H, N, D)``.

    The transpose matters: viewing ``(B, N, H*D)`` straight as ``(B, H, N, D)`` would give
    "head" h a slice of the flattened token-feature matrix that mixes different tokens.
    """
    if x.shape[-1] % num_heads:
        raise ValueError(
            f"split_heads: feature size {x.shape[-1]} is not divisible by num_heads={num_heads}"
        )
    return x.unflatten(-1, (num_heads, x.shape[-1] // num_heads)).transpose(
        -3, -2
    )


def merge_heads(x: Tensor) -> Tensor:
    """``(..., H, N, D) -> (..., N, H*D)``, the exact inverse of ``split_heads``."""
    if x.dim() < 3:
        raise ValueError(
            f"merge_heads: expected (..., H, N, D), got shape {tuple(x.shape)}"
        )
    return x.transpose(-3, -2).flatten(-2)


def _heads_mask(mask: Tensor | None) -> Tensor | None:
    # A (B, m, n) mask (one per sequence) must broadcast over the heads of (B, H, m, n);
    # (m, n) and (B, 1, 1, n)-style masks already do.
    if mask is not None and mask.dim() == 3:
        return mask.unsqueeze(-3)
    return mask


class MultiHeadAttention(nn.Module):
    """H heads of scaled dot-product attention on d_model/H features each, then ``w_o``.

    ``forward(query (B, m, d_model), key (B, n, d_model), value (B, n, d_model), mask)``
    -> out ``(B, m, d_model)``, weights ``(B, H, m, n)`` (before dropout).  ``mask`` is bool,
    True = may attend, shaped ``(m, n)``, ``(B, m, n)``, ``(B, 1, n)`` or ``(B, H, m, n)``.
    ``bias`` is for all four projections; ``qkv_bias`` (if given) overrides it for ``w_q, w_k, w_v``
    (vit-pytorch, for one, has no query/key/value bias but an output bias).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        qkv_bias: bool | None = None,
    ):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(
                f"MultiHeadAttention: d_model={d_model} is not divisible by num_heads={num_heads}"
            )
        self.d_model, self.num_heads, self.head_dim = (
            d_model,
            num_heads,
            d_model // num_heads,
        )
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.w_q = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"MultiHeadAttention: {name} has {t.shape[-1]} features, expected d_model={self.d_model}"
                )
        q = split_heads(self.w_q(query), self.num_heads)  # (B, H, m, D)
        k = split_heads(self.w_k(key), self.num_heads)  # (B, H, n, D)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, H, n, D)
        # scale by the head's size
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        # (B, H, m, n)
        weights = masked_softmax(scores, _heads_mask(mask), dim=-1)
        out = self.dropout(weights) @ v
        return self.w_o(merge_heads(out)), weights
