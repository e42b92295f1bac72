"""The course's ``MultiHeadAttention`` and PyTorch's ``nn.MultiheadAttention``: the same weights both ways.

``to_torch_mha`` / ``from_torch_mha`` copy the four projections (PyTorch keeps q, k, v in one
``in_proj_weight``; ``batch_first=True`` is the course's layout); ``torch_attn_mask`` turns a
course mask (True = may attend) into PyTorch's ``attn_mask`` (True = may NOT attend).
Chapter 04 uses them to show that the two layers compute the same thing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..references.multihead import MultiHeadAttention

__all__ = ["to_torch_mha", "from_torch_mha", "torch_attn_mask"]


def _linear_parts(
    mha: nn.Module,
) -> tuple[nn.Linear, nn.Linear, nn.Linear, nn.Linear]:
    parts = []
    for name in ("w_q", "w_k", "w_v", "w_o"):
        layer = getattr(mha, name, None)
        if not isinstance(layer, nn.Linear):
            raise TypeError(
                f"to_torch_mha: expected a module with nn.Linear submodules w_q, w_k, w_v, w_o; "
                f"{name} is {type(layer).__name__}"
            )
        parts.append(layer)
    d = parts[0].in_features
    for name, layer in zip(("w_q", "w_k", "w_v", "w_o"), parts):
        if (layer.in_features, layer.out_features) != (d, d):
            raise ValueError(
                f"to_torch_mha: {name} maps {layer.in_features} -> {layer.out_features} features; "
                f"nn.MultiheadAttention needs d_model -> d_model ({d} -> {d})"
            )
    if len({layer.bias is None for layer in parts}) != 1:
        raise ValueError(
            "to_torch_mha: either all four projections have a bias or none does"
        )
    return tuple(parts)  # type: ignore[return-value]


def to_torch_mha(
    mha: nn.Module,
    *,
    num_heads: int | None = None,
    dropout: float | None = None,
) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention(batch_first=True)`` computing what ``mha`` computes.

    ``mha`` is any module with ``nn.Linear`` submodules ``w_q``, ``w_k``, ``w_v``, ``w_o``
    (the course's ``MultiHeadAttention`` or a learner's); ``num_heads`` and ``dropout``
    default to its ``num_heads`` attribute and the ``p`` of its ``dropout`` submodule.

    PyTorch stores the three input projections stacked in one ``(3 d, d)`` matrix
    ``in_proj_weight`` (rows: queries, then keys, then values) and ``w_o`` as ``out_proj``.
    Both use ``nn.Linear``'s layout, ``y = x W^T + b``, so the weights copy over unchanged.
    Call it with ``average_attn_weights=False`` to get per-head weights ``(B, H, m, n)``, and
    convert masks with ``torch_attn_mask`` (PyTorch's bool masks mean the opposite).
    """
    w_q, w_k, w_v, w_o = _linear_parts(mha)
    if num_heads is None:
        num_heads = getattr(mha, "num_heads", None)
        if num_heads is None:
            raise ValueError(
                "to_torch_mha: the module has no num_heads attribute; pass num_heads=..."
            )
    if dropout is None:
        drop = getattr(mha, "dropout", None)
        dropout = (
            drop.p
            if isinstance(drop, nn.Dropout)
            else float(drop)
            if isinstance(drop, (int, float))
            else 0.0
        )
    d = w_q.in_features
    bias = w_q.bias is not None
    weight = w_q.weight
    torch_mha = nn.MultiheadAttention(
        d,
        num_heads,
        dropout=dropout,
        bias=bias,
        batch_first=True,
        device=weight.device,
        dtype=weight.dtype,
    )
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(
            torch.cat([w_q.weight, w_k.weight, w_v.weight], dim=0)
        )
        torch_mha.out_proj.weight.copy_(w_o.weight)
        if bias:
            torch_mha.in_proj_bias.copy_(
                torch.cat([w_q.bias, w_k.bias, w_v.bias], dim=0)
            )
            torch_mha.out_proj.bias.copy_(w_o.bias)
    torch_mha.train(mha.training)
    return torch_mha


def from_torch_mha(torch_mha: nn.MultiheadAttention) -> MultiHeadAttention:
    """The course's ``MultiHeadAttention`` with the weights of ``torch_mha`` (the inverse of ``to_torch_mha``).

    Only the common configuration converts: one ``embed_dim`` for queries, keys and values
    (``kdim = vdim = embed_dim``), no ``add_bias_kv`` and no ``add_zero_attn``.  To load the
    weights into another module with the same submodule names, use ``.state_dict()`` of the result.
    """
    if not isinstance(torch_mha, nn.MultiheadAttention):
        raise TypeError(
            f"from_torch_mha: expected torch.nn.MultiheadAttention, got {type(torch_mha).__name__}"
        )
    if not torch_mha._qkv_same_embed_dim:
        raise ValueError(
            "from_torch_mha: kdim/vdim differ from embed_dim; the course's module has one d_model"
        )
    if torch_mha.bias_k is not None or torch_mha.add_zero_attn:
        raise ValueError(
            "from_torch_mha: add_bias_kv/add_zero_attn have no counterpart in the course's module"
        )
    d, h = torch_mha.embed_dim, torch_mha.num_heads
    bias = torch_mha.in_proj_bias is not None
    weight = torch_mha.in_proj_weight
    mha = MultiHeadAttention(d, h, dropout=torch_mha.dropout, bias=bias).to(
        device=weight.device, dtype=weight.dtype
    )
    with torch.no_grad():
        for layer, w in zip(
            (mha.w_q, mha.w_k, mha.w_v), weight.chunk(3, dim=0)
        ):
            layer.weight.copy_(w)
        mha.w_o.weight.copy_(torch_mha.out_proj.weight)
        if bias:
            for layer, b in zip(
                (mha.w_q, mha.w_k, mha.w_v),
                torch_mha.in_proj_bias.chunk(3, dim=0),
            ):
                layer.bias.copy_(b)
            mha.w_o.bias.copy_(torch_mha.out_proj.bias)
    mha.train(torch_mha.training)
    return mha


def torch_attn_mask(
    mask: Tensor, batch_size: int, num_heads: int, m: int, n: int
) -> Tensor:
    """A course mask (bool, True = may attend) as ``nn.MultiheadAttention``'s ``attn_mask``.

    PyTorch's bool ``attn_mask`` means the opposite (True = NOT allowed) and must be ``(m, n)``
    or ``(B*H, m, n)``; the course's masks broadcast against ``(B, H, m, n)``.  A ``(m, n)``
    mask is only inverted; any other shape is expanded to ``(B, H, m, n)``, inverted and
    flattened to ``(B*H, m, n)`` (batch-major, as PyTorch expects).
    """
    if mask.dtype != torch.bool:
        raise TypeError(
            f"torch_attn_mask: expected a bool mask (True = may attend), got {mask.dtype}"
        )
    if mask.dim() == 2:
        return ~mask
    # (B, m, n) or (B, 1, n): one mask per sequence, shared by its heads
    if mask.dim() == 3:
        mask = mask.unsqueeze(-3)
    return ~mask.expand(batch_size, num_heads, m, n).reshape(
        batch_size * num_heads, m, n
    )
