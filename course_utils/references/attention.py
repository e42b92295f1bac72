"""Reference attention functions: the readable versions the chapters build and test against.

Conventions (see book/course_spec.md, the exercise contract): row vectors, batch-first, queries ``(..., m, d_k)``,
keys ``(..., n, d_k)``, values ``(..., n, d_v)``; functions return ``(output, weights)``
with ``weights`` of shape ``(..., m, n)``, each row summing to 1.

Chapter 01: ``softmax``, ``attention_pool``, ``attend``; the additive score of Bahdanau et al.
(2015), ``additive_scores`` and ``additive_attention`` (queries and keys may differ in size).
Chapter 02: ``self_attention`` (unparameterised), ``SelfAttentionHead`` (learned W_q, W_k, W_v).
Chapter 03: ``scaled_dot_product_attention`` (masks follow ``references.masking``; with
``need_weights=False`` it runs PyTorch's fused kernel), ``chunked_attention`` (online softmax
over blocks of keys: never holds the ``(m, n)`` score matrix) and ``topk_attention``
(each query keeps its ``top_k`` best keys, as in the Explicit Sparse Transformer).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masking import check_mask, masked_softmax

__all__ = [
    "attention_backward",
    "nadaraya_watson",
    "choose_bandwidth",
    "cached_attention_step",
    "softmax",
    "attention_pool",
    "attend",
    "additive_scores",
    "additive_attention",
    "self_attention",
    "SelfAttentionHead",
    "scaled_dot_product_attention",
    "chunked_attention",
    "topk_attention",
]


def _require_float(name: str, fn: str, t: Tensor) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(
            f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}"
        )
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


def attention_pool(
    query: Tensor, keys: Tensor, values: Tensor
) -> tuple[Tensor, Tensor]:
    """Soft lookup of one query in a memory of (key, value) pairs.

    query ``(d,)``, keys ``(n, d)``, values ``(n, d_v)`` -> context ``(d_v,)``, weights ``(n,)``.
    score e_i = q . k_i,  alignment a = softmax(e),  context c = sum_i a_i v_i.
    """
    for name, t, ndim in (
        ("query", query, 1),
        ("keys", keys, 2),
        ("values", values, 2),
    ):
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


def check_qkv(
    fn: str, queries: Tensor, keys: Tensor, values: Tensor
) -> None:
    """Raise a clear error unless queries/keys/values have compatible attention shapes."""
    for name, t in (
        ("queries", queries),
        ("keys", keys),
        ("values", values),
    ):
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


def attend(
    queries: Tensor, keys: Tensor, values: Tensor
) -> tuple[Tensor, Tensor]:
    """Batched soft lookup with unscaled dot-product scores.

    queries ``(..., m, d)``, keys ``(..., n, d)``, values ``(..., n, d_v)``
    -> context ``(..., m, d_v)``, weights ``(..., m, n)``.  Leading dims broadcast.
    """
    check_qkv("attend", queries, keys, values)
    # (..., m, n): row i scores query i
    scores = queries @ keys.transpose(-2, -1)
    weights = softmax(scores, dim=-1)  # normalise over the keys
    return weights @ values, weights


def _check_additive(
    fn: str,
    queries: Tensor,
    keys: Tensor,
    W_q: Tensor,
    W_k: Tensor,
    w_v: Tensor,
) -> None:
    """Raise a clear error unless the inputs of an additive score have compatible shapes."""
    for name, t in (
        ("queries", queries),
        ("keys", keys),
        ("W_q", W_q),
        ("W_k", W_k),
        ("w_v", w_v),
    ):
        _require_float(name, fn, t)
    for name, t in (("queries", queries), ("keys", keys)):
        if t.dim() < 2:
            raise ValueError(
                f"{fn}: {name} must have shape (..., tokens, features), got {tuple(t.shape)}"
            )
    if W_q.dim() != 2 or W_k.dim() != 2 or w_v.dim() != 1:
        raise ValueError(
            f"{fn}: W_q must be (h, d_q), W_k (h, d_k) and w_v (h,); got {tuple(W_q.shape)}, "
            f"{tuple(W_k.shape)}, {tuple(w_v.shape)}"
        )
    h = w_v.shape[0]
    if W_q.shape != (h, queries.shape[-1]):
        raise ValueError(
            f"{fn}: W_q has shape {tuple(W_q.shape)}, expected (h, d_q) = ({h}, {queries.shape[-1]}): "
            "one row per hidden unit, one column per query feature (the layout of nn.Linear(d_q, h).weight)"
        )
    if W_k.shape != (h, keys.shape[-1]):
        raise ValueError(
            f"{fn}: W_k has shape {tuple(W_k.shape)}, expected (h, d_k) = ({h}, {keys.shape[-1]}): "
            "one row per hidden unit, one column per key feature (the layout of nn.Linear(d_k, h).weight)"
        )
    if len({t.dtype for t in (queries, keys, W_q, W_k, w_v)}) != 1:
        raise TypeError(
            f"{fn}: mixed dtypes {queries.dtype}, {keys.dtype}, {W_q.dtype}, {W_k.dtype}, "
            f"{w_v.dtype}; convert all of them to one dtype"
        )


def additive_scores(
    queries: Tensor, keys: Tensor, W_q: Tensor, W_k: Tensor, w_v: Tensor
) -> Tensor:
    """The additive score of Bahdanau et al. (2015) for every (query, key) pair.

    queries ``(..., m, d_q)``, keys ``(..., n, d_k)``, W_q ``(h, d_q)``, W_k ``(h, d_k)``, w_v ``(h,)``
    -> scores ``(..., m, n)`` with ``e_ij = w_v . tanh(W_q q_i + W_k k_j)``.  Leading dims broadcast.

    The papers write column vectors, ``W_q q``; with rows of queries that is ``queries @ W_q.T``,
    which is what ``nn.Linear(d_q, h, bias=False)`` computes with ``weight = W_q``.  Every pair
    needs its own sum, so the projections get a size-1 axis each, ``(..., m, 1, h)`` and
    ``(..., 1, n, h)``, and broadcasting builds all ``m * n`` sums: an ``(..., m, n, h)`` tensor,
    which is what makes this score cost more memory and time than a dot product.
    """
    _check_additive("additive_scores", queries, keys, W_q, W_k, w_v)
    # (..., m, h): W_q q_i for every query
    q = queries @ W_q.transpose(-2, -1)
    k = keys @ W_k.transpose(-2, -1)  # (..., n, h): W_k k_j for every key
    # (..., m, 1, h) + (..., 1, n, h) -> (..., m, n, h)
    features = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))
    # (..., m, n): the weighted sum over the h hidden units
    return features @ w_v


def additive_attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    W_q: Tensor,
    W_k: Tensor,
    w_v: Tensor,
) -> tuple[Tensor, Tensor]:
    """Soft lookup with the additive score ``e_ij = w_v . tanh(W_q q_i + W_k k_j)``.

    queries ``(..., m, d_q)``, keys ``(..., n, d_k)``, values ``(..., n, d_v)``, W_q ``(h, d_q)``,
    W_k ``(h, d_k)``, w_v ``(h,)`` -> context ``(..., m, d_v)``, weights ``(..., m, n)``.
    Queries and keys may have different sizes (``d_q != d_k``): each is projected to ``h`` first.
    Leading dims broadcast.
    """
    if not isinstance(values, Tensor) or values.dim() < 2:
        raise ValueError(
            f"additive_attention: values must have shape (..., n, d_v), got {_shape_of(values)}"
        )
    if (
        isinstance(keys, Tensor)
        and keys.dim() >= 2
        and keys.shape[-2] != values.shape[-2]
    ):
        raise ValueError(
            f"additive_attention: {keys.shape[-2]} keys but {values.shape[-2]} values "
            f"(keys {tuple(keys.shape)}, values {tuple(values.shape)}); one value per key"
        )
    scores = additive_scores(queries, keys, W_q, W_k, w_v)  # (..., m, n)
    if values.dtype != scores.dtype:
        raise TypeError(
            f"additive_attention: values have dtype {values.dtype}, the scores {scores.dtype}; "
            "convert all inputs to one dtype"
        )
    weights = softmax(scores, dim=-1)  # normalise over the keys
    return weights @ values, weights


def _shape_of(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__


def _require_positive_int(fn: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{fn}: {name} must be a positive int, got {value!r}"
        )


# --------------------------------------------------------------------------- chapter 02
def self_attention(x: Tensor) -> tuple[Tensor, Tensor]:
    """Unparameterised self-attention ``softmax(X X^T) X``: every token is query, key and value.

    x ``(..., n, d)`` -> out ``(..., n, d)``, weights ``(..., n, n)``.  Unscaled scores (the
    scale is chapter 03's subject).  Row i of the weights is token i's softmax over all tokens.
    """
    _require_float("x", "self_attention", x)
    if x.dim() < 2:
        raise ValueError(
            f"self_attention: x must have shape (..., tokens, features), got {tuple(x.shape)}"
        )
    # (..., n, n): w'_ij = x_i . x_j, a symmetric matrix
    scores = x @ x.transpose(-2, -1)
    # normalise each token's row over the tokens it reads
    weights = softmax(scores, dim=-1)
    return weights @ x, weights


class SelfAttentionHead(nn.Module):
    """One self-attention head with learned projections (row vectors: ``Q = X W_q``).

    ``W_q``, ``W_k``: ``nn.Linear(d_model, d_k, bias=False)``; ``W_v``: ``nn.Linear(d_model, d_v,
    bias=False)``.  ``forward(x (..., n, d_model))`` -> out ``(..., n, d_v)``, weights
    ``(..., n, n)`` from the unscaled scores ``Q K^T`` (chapter 03 adds the scale).
    """

    def __init__(self, d_model: int, d_k: int, d_v: int):
        super().__init__()
        for name, value in (
            ("d_model", d_model),
            ("d_k", d_k),
            ("d_v", d_v),
        ):
            _require_positive_int("SelfAttentionHead", name, value)
        self.d_model, self.d_k, self.d_v = d_model, d_k, d_v
        # Separate query and key maps: with one shared map the scores would be symmetric and
        # each token's score with itself, |x W|^2, would tend to dominate its row.
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        _require_float("x", "SelfAttentionHead", x)
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"SelfAttentionHead: x must have shape (..., tokens, d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        # nn.Linear computes x @ weight.T
        q, k, v = (
            self.W_q(x),
            self.W_k(x),
            self.W_v(x),
        )
        return attend(q, k, v)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}"


# --------------------------------------------------------------------------- chapter 03
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    need_weights: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q K^T / sqrt(d_k)) V with an optional bool mask (True = may attend).

    q ``(..., m, d_k)``, k ``(..., n, d_k)``, v ``(..., n, d_v)``, mask broadcasting to
    ``(..., m, n)`` -> out ``(..., m, d_v)``, weights ``(..., m, n)``.  A query whose keys are
    all blocked gets zero weights and a zero output.  The scale is sqrt(d_k), the size of
    the vectors in the dot product, not d_v.

    ``need_weights=False`` returns ``(out, None)`` from PyTorch's fused kernel
    (``torch.nn.functional.scaled_dot_product_attention``), which never hands back the
    ``(m, n)`` weights and so may avoid storing them (FlashAttention-style kernels).
    """
    check_qkv("scaled_dot_product_attention", q, k, v)
    if not need_weights:
        return _fused_attention(q, k, v, mask), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = masked_softmax(scores, mask, dim=-1)
    return weights @ v, weights


def attention_backward(
    q: Tensor, k: Tensor, v: Tensor, grad_out: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients of scaled dot-product attention (no mask), written out by hand.

    With ``s = q k^T / sqrt(d_k)``, ``a = softmax(s)`` over the keys and ``out = a v``, and
    ``grad_out = dL/d out`` ``(..., m, d_v)``: ``dL/dv = a^T grad_out``; ``dL/da = grad_out v^T``;
    through the softmax's Jacobian ``diag(a) - a a^T`` (one per query row),
    ``dL/ds = a * (dL/da - sum_j a_j dL/da_j)``; then ``dL/dq = dL/ds k / sqrt(d_k)`` and
    ``dL/dk = (dL/ds)^T q / sqrt(d_k)``.  Returns ``(grad_q, grad_k, grad_v)`` with the shapes of
    ``q (..., m, d_k)``, ``k (..., n, d_k)``, ``v (..., n, d_v)``.
    """
    check_qkv("attention_backward", q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1])
    a = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)  # (..., m, n)
    grad_v = a.transpose(-2, -1) @ grad_out  # (..., n, d_v)
    grad_a = grad_out @ v.transpose(-2, -1)  # (..., m, n)
    # J^T grad_a, row by row
    grad_s = a * (grad_a - (grad_a * a).sum(dim=-1, keepdim=True))
    return grad_s @ k * scale, grad_s.transpose(-2, -1) @ q * scale, grad_v


def cached_attention_step(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cache: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """One step of causal self-attention with a key-value cache (chapter 06).

    ``q``, ``k`` ``(..., 1, d_k)`` and ``v`` ``(..., 1, d_v)`` are the newest position's; ``cache`` is
    None at the first step, then the ``(keys (..., t, d_k), values (..., t, d_v))`` returned by the
    step before.  Returns ``out (..., 1, d_v)``, the newest query's attention over all t + 1 keys
    (its own included), and the cache with this position appended.  Fed positions 0 .. n-1 one at
    a time, the outputs are the rows of causal self-attention over the whole sequence.
    """
    keys = k if cache is None else torch.cat([cache[0], k], dim=-2)
    values = v if cache is None else torch.cat([cache[1], v], dim=-2)
    out, _ = scaled_dot_product_attention(q, keys, values)
    return out, (keys, values)


def nadaraya_watson(
    x_query: Tensor, x_keys: Tensor, y_values: Tensor, sigma: float
) -> Tensor:
    """Kernel regression as attention (chapter 01): ``(m,)`` predictions at ``x_query (m,)`` from
    ``(x_keys (n,), y_values (n,))``, each a softmax-weighted mean of ``y_values`` with scores
    ``-(x_query_i - x_keys_j)^2 / (2 sigma^2)`` (a Gaussian kernel of bandwidth ``sigma``)."""
    # (m, n)
    scores = -((x_query[:, None] - x_keys[None, :]) ** 2) / (2 * sigma**2)
    return torch.softmax(scores, dim=-1) @ y_values


def choose_bandwidth(
    x_train: Tensor, y_train: Tensor, x_val: Tensor, y_val: Tensor, sigmas
) -> tuple[float, Tensor]:
    """The bandwidth with the lowest validation error (chapter 01).

    For each ``sigma`` in ``sigmas``: predict ``y_val`` at ``x_val`` from the training pairs with
    ``nadaraya_watson`` and take the mean squared error.  Returns ``(best_sigma, val_mse)``:
    ``val_mse`` a float tensor ``(len(sigmas),)``, ``best_sigma`` the first sigma with the lowest.
    """
    val_mse = torch.stack(
        [
            (
                (nadaraya_watson(x_val, x_train, y_train, float(s)) - y_val)
                ** 2
            ).mean()
            for s in sigmas
        ]
    )
    return float(sigmas[int(val_mse.argmin())]), val_mse


def _fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None
) -> Tensor:
    """The fast path: PyTorch's fused attention, with the course's semantics kept exactly."""
    if mask is None and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        # the common case: nothing to adapt
        return F.scaled_dot_product_attention(q, k, v)
    leading = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    if mask is not None:
        check_mask(
            mask,
            torch.Size(
                [*torch.broadcast_shapes(*leading), q.shape[-2], k.shape[-2]]
            ),
            "scaled_dot_product_attention",
        )
        # e.g. one (n,) row for every query; the fused kernel wants (..., m, n)
        if mask.dim() < 2:
            mask = mask.reshape(*[1] * (2 - mask.dim()), *mask.shape)
        leading.append(mask.shape[:-2])
    batch = torch.broadcast_shapes(*leading)
    # Some fused kernels want equal batch dims; expand() makes views, it copies nothing.
    q, k, v = (
        t if t.shape[:-2] == batch else t.expand(*batch, *t.shape[-2:])
        for t in (q, k, v)
    )
    # A bool attn_mask has the course's meaning (True = may attend), so it passes unchanged.
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if mask is not None:
        # A query with nothing to attend to gives zeros, as in the readable path (some
        # PyTorch versions and backends return NaN there).  masked_fill also replaces NaN.
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out


def chunked_attention(
    q: Tensor, k: Tensor, v: Tensor, chunk_size: int = 128
) -> Tensor:
    """Scaled dot-product attention (no mask) over blocks of keys, with an online softmax.

    q ``(..., m, d_k)``, k ``(..., n, d_k)``, v ``(..., n, d_v)`` -> out ``(..., m, d_v)``, equal to
    ``scaled_dot_product_attention(q, k, v)[0]``.  Only ``(..., m, chunk_size)`` scores exist at
    any time: memory grows as m * (chunk_size + d_v), not m * n.

    Per query it keeps a running max ``M``, a running sum ``L = sum_j exp(s_j - M)`` and a running
    output ``O = sum_j exp(s_j - M) v_j``.  When a block raises the max to ``M'``, every term
    summed so far must be multiplied by ``exp(M - M')``; the answer is ``O / L``.
    """
    check_qkv("chunked_attention", q, k, v)
    _require_positive_int("chunked_attention", "chunk_size", chunk_size)
    n = k.shape[-2]
    if n == 0:
        raise ValueError(
            "chunked_attention: there are no keys (n = 0), so there is nothing to attend to"
        )
    # scale once: m * d_k multiplications instead of m * n
    q = q / math.sqrt(q.shape[-1])
    run_max = run_sum = out = None
    for start in range(0, n, chunk_size):
        k_blk = k[..., start : start + chunk_size, :]  # views: no copy
        v_blk = v[..., start : start + chunk_size, :]
        # (..., m, c): the only scores held at any time
        s = q @ k_blk.transpose(-2, -1)
        blk_max = s.amax(dim=-1, keepdim=True)
        if run_max is None:  # first block: nothing to rescale yet
            new_max = blk_max
            p = (s - new_max).exp()
            run_sum = p.sum(dim=-1, keepdim=True)
            out = p @ v_blk
        else:
            new_max = torch.maximum(run_max, blk_max)
            correction = (
                run_max - new_max
            ).exp()  # in (0, 1]: old terms were measured from run_max
            p = (s - new_max).exp()
            run_sum = run_sum * correction + p.sum(dim=-1, keepdim=True)
            out = out * correction + p @ v_blk
        run_max = new_max
    # run_sum >= 1: the maximal term contributes exp(0) = 1
    return out / run_sum


def topk_attention(
    q: Tensor, k: Tensor, v: Tensor, top_k: int
) -> tuple[Tensor, Tensor]:
    """Scaled attention where each query keeps only its ``top_k`` highest scores.

    As in the Explicit Sparse Transformer (Zhao et al., 2019): the other scores are set to
    -inf before the softmax, so they get weight exactly 0 and the kept weights sum to 1.
    Exactly ``min(top_k, n)`` keys are kept per query (ties are broken by ``torch.topk``);
    ``top_k >= n`` is full scaled attention.  Shapes as ``scaled_dot_product_attention``.
    This selects, it does not save work: all ``m * n`` scores are still computed.
    """
    check_qkv("topk_attention", q, k, v)
    _require_positive_int("topk_attention", "top_k", top_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if top_k >= scores.shape[-1]:
        # every key is among the top_k: full attention
        weights = softmax(scores, dim=-1)
    else:
        best = scores.topk(top_k, dim=-1).indices  # (..., m, top_k)
        keep = torch.zeros(
            scores.shape, dtype=torch.bool, device=scores.device
        ).scatter_(-1, best, True)
        weights = masked_softmax(scores, keep, dim=-1)
    return weights @ v, weights
