"""Reference attention functions: the readable versions the chapters build and test against.

Conventions (see COURSE_SPEC.md): row vectors, batch-first, queries ``(..., m, d_k)``,
keys ``(..., n, d_k)``, values ``(..., n, d_v)``; functions return ``(output, weights)``
with ``weights`` of shape ``(..., m, n)``, each row summing to 1.

Chapter 01: ``softmax``, ``attention_pool``, ``attend``.
Chapter 03: ``scaled_dot_product_attention`` (masks follow ``course_utils.masking``).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["softmax", "attention_pool", "attend", "scaled_dot_product_attention"]


def _require_float(name: str, fn: str, t: Tensor) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(
            f"{fn}: {name} has dtype {t.dtype}; attention needs floating point "
            f"(use {name}.float() or {name}.double())"
        )


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax of ``x`` along ``dim`` (same shape as ``x``).

    Subtracting the maximum first leaves the result unchanged (the factor e^-max cancels
    between numerator and denominator) but keeps ``exp`` from overflowing: every
    exponent is <= 0, so every term is in (0, 1] and the sum is at least 1.
    """
    _require_float("x", "softmax", x)
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def attention_pool(query: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """Soft lookup of one query in a memory of (key, value) pairs.

    query ``(d,)``, keys ``(n, d)``, values ``(n, d_v)`` -> context ``(d_v,)``, weights ``(n,)``.
    score e_i = q . k_i,  alignment a = softmax(e),  context c = sum_i a_i v_i.
    """
    for name, t, ndim in (("query", query, 1), ("keys", keys, 2), ("values", values, 2)):
        _require_float(name, "attention_pool", t)
        if t.dim() != ndim:
            raise ValueError(
                f"attention_pool: {name} must have {ndim} dim(s), got shape {tuple(t.shape)}"
            )
    if keys.shape[1] != query.shape[0]:
        raise ValueError(
            f"attention_pool: query has size {query.shape[0]} but keys have size "
            f"{keys.shape[1]}; a query is compared with keys, so their last dims must match"
        )
    if keys.shape[0] != values.shape[0]:
        raise ValueError(
            f"attention_pool: {keys.shape[0]} keys but {values.shape[0]} values; "
            "the memory holds one value per key"
        )
    scores = keys @ query  # (n,)
    weights = softmax(scores, dim=-1)
    return weights @ values, weights


def check_qkv(fn: str, queries: Tensor, keys: Tensor, values: Tensor) -> None:
    """Raise a clear error unless queries/keys/values have compatible attention shapes."""
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        _require_float(name, fn, t)
        if t.dim() < 2:
            raise ValueError(
                f"{fn}: {name} must have shape (..., tokens, features), got {tuple(t.shape)}"
            )
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"{fn}: queries have d_k={queries.shape[-1]} but keys have d_k={keys.shape[-1]}; "
            "scores are dot products, so the last dims must match"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"{fn}: {keys.shape[-2]} keys but {values.shape[-2]} values "
            f"(keys {tuple(keys.shape)}, values {tuple(values.shape)}); one value per key"
        )
    if not (queries.dtype == keys.dtype == values.dtype):
        raise TypeError(
            f"{fn}: mixed dtypes {queries.dtype}, {keys.dtype}, {values.dtype}; "
            "convert all three to one dtype"
        )


def attend(queries: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """Batched soft lookup with unscaled dot-product scores.

    queries ``(..., m, d)``, keys ``(..., n, d)``, values ``(..., n, d_v)``
    -> context ``(..., m, d_v)``, weights ``(..., m, n)``.  Leading dims broadcast.
    """
    check_qkv("attend", queries, keys, values)
    scores = queries @ keys.transpose(-2, -1)  # (..., m, n): row i scores query i
    weights = softmax(scores, dim=-1)  # normalise over the keys
    return weights @ values, weights


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V with an optional bool mask (True = may attend).

    q ``(..., m, d_k)``, k ``(..., n, d_k)``, v ``(..., n, d_v)``, mask broadcasting to
    ``(..., m, n)`` -> out ``(..., m, d_v)``, weights ``(..., m, n)``.  A query whose keys are
    all blocked gets zero weights and a zero output.  The scale is sqrt(d_k), the size of
    the vectors in the dot product, not d_v.
    """
    from .masking import masked_softmax

    check_qkv("scaled_dot_product_attention", q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = masked_softmax(scores, mask, dim=-1)
    return weights @ v, weights
