"""The chapter 02/03 references in course_utils.references.attention against PyTorch and against the formulas.

- ``self_attention`` and ``SelfAttentionHead`` against a per-token loop and against
  ``torch.nn.functional.scaled_dot_product_attention`` with ``scale=1``;
- ``scaled_dot_product_attention`` (readable path and ``need_weights=False`` fast path)
  against PyTorch's fused attention: random shapes, bool masks, float32/float64, batch dims;
- ``chunked_attention`` against the naive version, and proof that it never creates an
  ``(m, n)`` tensor;
- ``topk_attention``: exactly ``top_k`` non-zero weights per row, rows sum to 1, ``top_k >= n``
  is full attention, and a sort-based loop gives the same result.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode

from course_utils.references import attention
from course_utils.grading import checks

DTYPES = [torch.float32, torch.float64]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _tol(dtype):
    return (
        {"atol": 1e-5, "rtol": 1e-5}
        if dtype == torch.float32
        else {"atol": 1e-12, "rtol": 1e-10}
    )


def _tol_scaled(dtype, scale):
    """``_tol`` for two kernels that sum in different orders: in float32 the scores grow like
    ``scale**2``, and so do their rounding errors and the softmax's differences that follow."""
    tol = _tol(dtype)
    if dtype != torch.float32:
        return tol
    factor = max(1.0, scale**2 / 100)
    return {k: v * factor for k, v in tol.items()}


def _qkv(
    batch, m, n, d, dv, dtype=torch.float32, seed=0, scale=1.0, device="cpu"
):
    return (
        checks.random_tensor(
            *batch, m, d, dtype=dtype, seed=seed, scale=scale, device=device
        ),
        checks.random_tensor(
            *batch,
            n,
            d,
            dtype=dtype,
            seed=seed + 1,
            scale=scale,
            device=device,
        ),
        checks.random_tensor(
            *batch, n, dv, dtype=dtype, seed=seed + 2, device=device
        ),
    )


shapes = st.tuples(
    st.lists(st.integers(1, 3), max_size=2).map(tuple),  # batch dims
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(1, 8),
    st.integers(1, 8),
)


# ------------------------------------------------------------------ chapter 02
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_self_attention_is_softmax_x_xT_x(dtype, batch):
    x = checks.random_tensor(*batch, 5, 4, dtype=dtype, seed=7)
    out, weights = attention.self_attention(x)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(x, x, x, scale=1.0),
        **_tol(dtype),
    )
    flat_x, flat_w, flat_out = (
        x.reshape(-1, 5, 4),
        weights.reshape(-1, 5, 5),
        out.reshape(-1, 5, 4),
    )
    # the per-token form: y_i = sum_j softmax_j(x_i . x_j) x_j
    for b in range(flat_x.shape[0]):
        for i in range(5):
            s = torch.stack([flat_x[b, i] @ flat_x[b, j] for j in range(5)])
            w = s.exp() / s.exp().sum()
            torch.testing.assert_close(flat_w[b, i], w, **_tol(dtype))
            torch.testing.assert_close(
                flat_out[b, i],
                sum(w[j] * flat_x[b, j] for j in range(5)),
                **_tol(dtype),
            )


def test_self_attention_head_contract_and_formula():
    torch.manual_seed(0)
    head = attention.SelfAttentionHead(6, 4, 3)
    assert {n: tuple(p.shape) for n, p in head.named_parameters()} == {
        "W_q.weight": (4, 6),
        "W_k.weight": (4, 6),
        "W_v.weight": (3, 6),
    }
    x = torch.randn(2, 5, 6)
    out, weights = head(x)
    # row vectors: Q = X W_q
    q, k, v = (
        x @ head.W_q.weight.T,
        x @ head.W_k.weight.T,
        x @ head.W_v.weight.T,
    )
    torch.testing.assert_close(
        weights, torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    )
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, scale=1.0)
    )
    assert out.shape == (2, 5, 3) and weights.shape == (2, 5, 5)
    out64, _ = head.double()(x.double())
    assert out64.dtype == torch.float64
    with pytest.raises(ValueError, match="d_model=6"):
        head(torch.randn(5, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="d_k must be a positive int"):
        attention.SelfAttentionHead(6, 0, 3)


@pytest.mark.parametrize("fn", ["self_attention", "head"])
def test_self_attention_is_permutation_equivariant(fn):
    torch.manual_seed(1)
    head = attention.SelfAttentionHead(4, 3, 2)
    call = attention.self_attention if fn == "self_attention" else head
    x = torch.randn(2, 7, 4, dtype=torch.float64)
    head.double()
    perm = torch.randperm(7)
    out, weights = call(x)
    out_p, weights_p = call(x[:, perm])
    torch.testing.assert_close(out_p, out[:, perm])
    # A(PX) = P A(X) P^T
    torch.testing.assert_close(weights_p, weights[:, perm][:, :, perm])


# ------------------------------------------------------------------ scaled dot-product attention
@settings(max_examples=80, deadline=None)
@given(
    shape=shapes,
    double=st.booleans(),
    seed=st.integers(0, 10_000),
    use_mask=st.booleans(),
    mask_kind=st.sampled_from(["full", "keys", "2d"]),
)
def test_scaled_attention_matches_pytorch(
    shape, double, seed, use_mask, mask_kind
):
    batch, m, n, d, dv = shape
    dtype = torch.float64 if double else torch.float32
    q, k, v = _qkv(batch, m, n, d, dv, dtype=dtype, seed=seed)
    mask = None
    if use_mask:
        g = torch.Generator().manual_seed(seed)
        mshape = {
            "full": (*batch, m, n),
            "keys": (*batch, 1, n),
            "2d": (m, n),
        }[mask_kind]
        mask = torch.rand(mshape, generator=g) < 0.7
        # PyTorch's older kernels give NaN for empty rows: tested separately
        mask[..., 0] = True
    out, weights = attention.scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, **_tol(dtype))
    assert weights.shape == (*batch, m, n)
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(*batch, m, dtype=dtype), **_tol(dtype)
    )
    if mask is not None:
        assert not weights.masked_select(~mask.expand_as(weights)).any(), (
            "a blocked key got weight"
        )
    fast, none = attention.scaled_dot_product_attention(
        q, k, v, mask, need_weights=False
    )
    assert none is None
    torch.testing.assert_close(fast, out, **_tol(dtype))


def test_scale_is_sqrt_dk_not_dv():
    # d_k = 9, d_v = 2
    q, k, v = _qkv((2,), 4, 6, 9, 2, dtype=torch.float64, seed=3)
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(
        weights, torch.softmax(q @ k.transpose(-2, -1) / 3.0, dim=-1)
    )


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_query_with_nothing_to_attend_to_gets_zeros(need_weights, dtype):
    q, k, v = _qkv((2, 3), 4, 5, 8, 6, dtype=dtype, seed=11)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of sequence 0 may attend to nothing
    mask[1, :, :, 2:] = False
    out, weights = attention.scaled_dot_product_attention(
        q, k, v, mask, need_weights=need_weights
    )
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[0, :, 1], torch.zeros(3, 6, dtype=dtype))
    ref, ref_w = attention.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, ref, **_tol(dtype))
    torch.testing.assert_close(
        ref_w[0, :, 1], torch.zeros(3, 5, dtype=dtype)
    )
    # the rest agrees with PyTorch restricted to the rows that have something to attend to
    torch.testing.assert_close(
        ref[1],
        F.scaled_dot_product_attention(q[1], k[1], v[1], attn_mask=mask[1]),
        **_tol(dtype),
    )


@pytest.mark.parametrize(
    "mask_shape", [(5,), (4, 1), (3, 4, 5), (2, 3, 4, 5), (7, 2, 3, 4, 5)]
)
def test_fast_path_broadcasts_like_the_readable_path(mask_shape):
    q, k, v = (
        checks.random_tensor(2, 1, 4, 8, seed=1),
        checks.random_tensor(1, 3, 5, 8, seed=2),
        checks.random_tensor(5, 6, seed=3),
    )
    mask = (
        torch.rand(mask_shape, generator=torch.Generator().manual_seed(4))
        < 0.6
    )
    ref, _ = attention.scaled_dot_product_attention(q, k, v, mask)
    fast, _ = attention.scaled_dot_product_attention(
        q, k, v, mask, need_weights=False
    )
    assert fast.shape == ref.shape
    torch.testing.assert_close(fast, ref)


def test_default_still_returns_weights_and_validates():
    q, k, v = _qkv((), 3, 4, 5, 2)
    out, weights = attention.scaled_dot_product_attention(q, k, v)
    assert weights is not None and weights.shape == (3, 4)
    with pytest.raises(TypeError, match="bool"):
        attention.scaled_dot_product_attention(
            q, k, v, torch.ones(3, 4), need_weights=False
        )
    with pytest.raises(ValueError, match="does not broadcast"):
        attention.scaled_dot_product_attention(
            q, k, v, torch.ones(3, 3, dtype=torch.bool), need_weights=False
        )
    with pytest.raises(ValueError, match="d_k=5 but keys have d_k=4"):
        attention.scaled_dot_product_attention(
            q, k[..., :4], v, need_weights=False
        )


# ------------------------------------------------------------------ chunked attention
@settings(max_examples=60, deadline=None)
@given(
    shape=shapes,
    double=st.booleans(),
    seed=st.integers(0, 10_000),
    chunk=st.integers(1, 12),
    scale=st.sampled_from([1.0, 5.0, 40.0]),
)
def test_chunked_matches_naive(shape, double, seed, chunk, scale):
    batch, m, n, d, dv = shape
    dtype = torch.float64 if double else torch.float32
    q, k, v = _qkv(batch, m, n, d, dv, dtype=dtype, seed=seed, scale=scale)
    expected, _ = attention.scaled_dot_product_attention(q, k, v)
    got = attention.chunked_attention(q, k, v, chunk_size=chunk)
    torch.testing.assert_close(got, expected, **_tol_scaled(dtype, scale))
    torch.testing.assert_close(
        got,
        F.scaled_dot_product_attention(q, k, v),
        **_tol_scaled(dtype, scale),
    )


def test_chunked_survives_scores_that_overflow_exp():
    # scores of order 30 * 30 * sqrt(8) / sqrt(8)
    q, k, v = _qkv((), 4, 50, 8, 3, seed=5, scale=30.0)
    assert (
        q @ k.T / math.sqrt(8)
    ).abs().max() > 200  # exp would overflow float32 without the max
    got = attention.chunked_attention(q, k, v, chunk_size=7)
    torch.testing.assert_close(
        got, attention.scaled_dot_product_attention(q, k, v)[0]
    )


def test_chunked_when_the_max_grows_in_every_block():
    # keys grow along the sequence, so every new block raises the running max: a version that
    # forgets the rescaling is far off here
    k = torch.linspace(0.1, 3.0, 40)[:, None] * torch.ones(40, 4)
    q, v = torch.ones(3, 4), checks.random_tensor(40, 2, seed=2)
    got = attention.chunked_attention(q, k, v, chunk_size=5)
    torch.testing.assert_close(
        got, attention.scaled_dot_product_attention(q, k, v)[0]
    )


class _LargestTensor(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.shapes.append(tuple(t.shape))
        return out


def test_chunked_never_creates_an_m_by_n_tensor():
    m = n = 300
    q, k, v = _qkv((2,), m, n, 16, 8, seed=9)
    with _LargestTensor() as watch:
        attention.chunked_attention(q, k, v, chunk_size=32)
    largest = max(math.prod(s) for s in watch.shapes)
    assert largest <= 2 * m * 32, (
        f"largest intermediate {max(watch.shapes, key=math.prod)}"
    )
    # the naive version does (sanity check of the watcher)
    with _LargestTensor() as watch:
        attention.scaled_dot_product_attention(q, k, v)
    assert max(math.prod(s) for s in watch.shapes) >= 2 * m * n


def test_chunked_is_differentiable():
    q, k, v = (
        t.requires_grad_()
        for t in _qkv((2,), 5, 9, 4, 3, dtype=torch.float64, seed=4)
    )
    torch.autograd.gradcheck(
        lambda a, b, c: attention.chunked_attention(a, b, c, chunk_size=4),
        (q, k, v),
    )


def test_chunked_validates():
    q, k, v = _qkv((), 3, 4, 5, 2)
    for bad in (0, -2, 2.5, True):
        with pytest.raises(
            ValueError, match="chunk_size must be a positive int"
        ):
            attention.chunked_attention(q, k, v, chunk_size=bad)
    with pytest.raises(ValueError, match="no keys"):
        attention.chunked_attention(q, k[:0], v[:0])


# ------------------------------------------------------------------ top-k attention
@settings(max_examples=60, deadline=None)
@given(
    shape=shapes,
    double=st.booleans(),
    seed=st.integers(0, 10_000),
    data=st.data(),
)
def test_topk_properties(shape, double, seed, data):
    batch, m, n, d, dv = shape
    dtype = torch.float64 if double else torch.float32
    q, k, v = _qkv(batch, m, n, d, dv, dtype=dtype, seed=seed)
    top_k = data.draw(st.integers(1, n + 3))
    out, weights = attention.topk_attention(q, k, v, top_k)
    assert out.shape == (*batch, m, dv) and weights.shape == (*batch, m, n)
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(*batch, m, dtype=dtype), **_tol(dtype)
    )
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    if top_k >= n:
        full_out, full_w = attention.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(weights, full_w, **_tol(dtype))
        torch.testing.assert_close(out, full_out, **_tol(dtype))
        return
    # no ties in random data
    assert ((weights > 0).sum(-1) == top_k).all(), (
        "exactly top_k keys per query"
    )
    # the kept keys are the best ones: every kept score beats every dropped score
    kept_min = scores.masked_fill(weights == 0, math.inf).amin(-1)
    dropped_max = scores.masked_fill(weights > 0, -math.inf).amax(-1)
    assert (kept_min > dropped_max).all()
    # and among the kept keys the weights are the softmax of their scores (renormalised)
    torch.testing.assert_close(out, weights @ v, **_tol(dtype))


def test_topk_against_a_sort_based_loop():
    q, k, v = _qkv((), 6, 10, 4, 3, dtype=torch.float64, seed=21)
    out, weights = attention.topk_attention(q, k, v, 3)
    for i in range(6):
        s = q[i] @ k.T / 2.0
        order = s.argsort(descending=True)[:3]
        w = torch.zeros(10, dtype=torch.float64)
        w[order] = torch.softmax(s[order], dim=0)
        torch.testing.assert_close(weights[i], w)
        torch.testing.assert_close(out[i], w @ v)


def test_topk_validates_and_keeps_exactly_k_on_ties():
    # all scores tie
    q, k, v = (
        torch.ones(2, 3),
        torch.ones(5, 3),
        torch.randn(5, 2),
    )
    _, weights = attention.topk_attention(q, k, v, 2)
    assert ((weights > 0).sum(-1) == 2).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="top_k must be a positive int"):
            attention.topk_attention(q, k, v, bad)


# ------------------------------------------------------------------ devices and dtypes
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_new_references_keep_device_and_dtype(device, dtype):
    q, k, v = _qkv((2,), 4, 6, 8, 3, dtype=dtype, seed=2, device=device)
    mask = torch.ones(4, 6, dtype=torch.bool, device=device)
    results = [
        attention.self_attention(q)[0],
        attention.scaled_dot_product_attention(q, k, v, mask)[0],
        attention.scaled_dot_product_attention(
            q, k, v, mask, need_weights=False
        )[0],
        attention.chunked_attention(q, k, v, chunk_size=4),
        *attention.topk_attention(q, k, v, 2),
    ]
    head = attention.SelfAttentionHead(8, 5, 3).to(
        device=device, dtype=dtype
    )
    results += list(head(q))
    for r in results:
        assert (
            r.device.type == torch.device(device).type and r.dtype == dtype
        )


def test_attention_kernel_timings_carry_their_spread():
    """Each size's row holds every method's quartiles and the fast/PyTorch ratio's, round by round."""
    from benchmarks import attention_kernels

    row = attention_kernels.time_one_size(64, budget_s=0.0)
    assert set(row["quartiles_ms"]) == {
        "reference",
        "fast",
        "pytorch",
        "chunked",
    }
    for q1, q3 in row["quartiles_ms"].values():
        assert 0 < q1 <= q3
    q1, q3 = row["fast_over_pytorch_quartiles"]
    assert 0 < q1 <= q3
    assert attention_kernels._quartiles([2.0]) == (2.0, 2.0)
