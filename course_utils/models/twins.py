"""PyTorch-built twins of the course's graded layers: what the class edition builds instead.

The class edition (``tools/class_edition.py``) holds no source of a graded reference, yet some
cells that are not exercises build the course's layer: a model to train, a layer whose weights
a test copies into the learner's.  There the class edition's
``references.multihead.MultiHeadAttention`` is this module's twin:

- the same constructor, and the same parameters created in the same order, so the same seed
  gives the same weights and ``checks.transplant`` moves them either way;
- the same call, ``forward(query, key, value, mask)`` with the course's masks (bool, True = may
  attend, a query that may attend to nothing gets zero weights), and the same returns;
- computed by PyTorch's own ``F.multi_head_attention_forward``, which the hidden tests forbid
  in a learner's answer: the twin answers no exercise (a test pastes it and sees it lose).

In eval mode it equals the reference up to rounding.  In training mode with dropout the
weights it returns are those after dropout (PyTorch's), and its dropout draws differ.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """H heads on d_model/H features each; ``forward(query (B, m, d), key (B, n, d), value (B, n, d),
    mask)`` -> out ``(B, m, d)``, weights ``(B, H, m, n)``; unbatched ``(m, d)`` inputs too."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 qkv_bias: bool | None = None):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        qkv_bias = bias if qkv_bias is None else qkv_bias
        # in the reference's order: the same seed gives the same weights
        self.w_q = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.shape[-1] != self.d_model:
                raise ValueError(f"MultiHeadAttention: {name} has {t.shape[-1]} features, expected d_model={self.d_model}")
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query[None], key[None], value[None]
            mask = None if mask is None else (mask[None] if mask.dim() == 3 else mask)
        B, m, n, H = query.shape[0], query.shape[1], key.shape[1], self.num_heads
        attn_mask = blocked = None
        if mask is not None:
            keep = mask.unsqueeze(-3) if mask.dim() == 3 else mask  # (B, m, n): shared by the heads
            keep = keep.expand(B, H, m, n)
            blocked = ~keep.any(-1)  # (B, H, m): queries that may attend to nothing
            # PyTorch's softmax over no key is NaN: let such a query see every key, zero it below
            attn_mask = ~(keep | blocked[..., None]).reshape(B * H, m, n)  # PyTorch: True = may NOT
        biases = None if self.w_q.bias is None else torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias])
        # w_o is applied after the zeroing, so PyTorch's output projection is the identity here
        identity = torch.eye(self.d_model, dtype=query.dtype, device=query.device)
        heads, weights = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), self.d_model, H,
            None, biases, None, None, False, self.dropout.p, identity, None, training=self.training,
            need_weights=True, attn_mask=attn_mask, use_separate_proj_weight=True,
            q_proj_weight=self.w_q.weight, k_proj_weight=self.w_k.weight, v_proj_weight=self.w_v.weight,
            average_attn_weights=False)
        heads = heads.transpose(0, 1)  # (B, m, H * D), head h in features h*D:(h+1)*D
        if blocked is not None:
            weights = weights.masked_fill(blocked[..., None], 0.0)
            per_head = heads.unflatten(-1, (H, self.head_dim))  # (B, m, H, D)
            heads = per_head.masked_fill(blocked.transpose(1, 2)[..., None], 0.0).flatten(-2)
        out = self.w_o(heads)
        return (out[0], weights[0]) if unbatched else (out, weights)
