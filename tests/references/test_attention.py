"""The attention references of chapters 01-03 and 06 (softmax, attend, pooling, backward, caching,
bandwidth) against PyTorch and against direct computations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.references import attention
from course_utils.grading import checks


DTYPES = [torch.float32, torch.float64]


# ------------------------------------------------------------------ references
@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    data=st.data(),
    scale=st.sampled_from([1.0, 30.0, 1e4]),
    double=st.booleans(),
)
def test_softmax_matches_torch(shape, data, scale, double):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    dtype = torch.float64 if double else torch.float32
    x = checks.random_tensor(
        *shape, dtype=dtype, seed=len(shape), scale=scale
    )
    got = attention.softmax(x, dim=dim)
    assert got.dtype == dtype
    torch.testing.assert_close(got, torch.softmax(x, dim=dim))


def test_softmax_is_finite_for_huge_inputs():
    x = torch.tensor([1e4, -1e4, 1e4 - 1.0])
    assert torch.isfinite(attention.softmax(x)).all()
    assert torch.allclose(
        attention.softmax(torch.full((3,), -1e4)), torch.full((3,), 1 / 3)
    )


def test_softmax_of_the_slides_example():
    w = attention.softmax(torch.tensor([2.0, 4.0, 4.0]))
    expected = torch.tensor([1.0, math.e**2, math.e**2]) / (
        1 + 2 * math.e**2
    )
    torch.testing.assert_close(w, expected)
    assert abs(w[0].item() - 0.0634) < 1e-4  # the slides round this to 0.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "batch,m,n,d,dv",
    [((), 3, 5, 4, 2), ((2,), 4, 4, 8, 8), ((2, 3), 1, 7, 3, 5)],
)
def test_attend_matches_pytorch_fused_attention_with_unit_scale(
    dtype, batch, m, n, d, dv
):
    q = checks.random_tensor(*batch, m, d, dtype=dtype, seed=1)
    k = checks.random_tensor(*batch, n, d, dtype=dtype, seed=2)
    v = checks.random_tensor(*batch, n, dv, dtype=dtype, seed=3)
    out, weights = attention.attend(q, k, v)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, scale=1.0)
    )
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(*batch, m, dtype=dtype)
    )
    assert weights.shape == (*batch, m, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_pool_is_one_row_of_attend(dtype):
    q = checks.random_tensor(5, 4, dtype=dtype, seed=4)
    k = checks.random_tensor(6, 4, dtype=dtype, seed=5)
    v = checks.random_tensor(6, 3, dtype=dtype, seed=6)
    out, weights = attention.attend(q, k, v)
    for i in range(5):
        c, w = attention.attention_pool(q[i], k, v)
        torch.testing.assert_close(c, out[i])
        torch.testing.assert_close(w, weights[i])


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda: attention.attend(
                torch.randn(2, 3), torch.randn(4, 5), torch.randn(4, 2)
            ),
            "d_k=3 but keys have d_k=5",
        ),
        (
            lambda: attention.attend(
                torch.randn(2, 3), torch.randn(4, 3), torch.randn(5, 2)
            ),
            "4 keys but 5 values",
        ),
        (
            lambda: attention.attend(
                torch.randn(3), torch.randn(4, 3), torch.randn(4, 2)
            ),
            r"\(\.\.\., tokens, features\)",
        ),
        (
            lambda: attention.attend(
                torch.ones(2, 3, dtype=torch.long),
                torch.randn(4, 3),
                torch.randn(4, 2),
            ),
            "floating point",
        ),
        (
            lambda: attention.attend(
                torch.randn(2, 3),
                torch.randn(4, 3).double(),
                torch.randn(4, 2),
            ),
            "mixed dtypes",
        ),
        (
            lambda: attention.attention_pool(
                torch.randn(2, 3), torch.randn(4, 3), torch.randn(4, 2)
            ),
            "query must have 1 dim",
        ),
        (lambda: attention.softmax([1.0, 2.0]), "must be a torch.Tensor"),
    ],
)
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_rows_sum_to_one():
    checks.rows_sum_to_one(torch.softmax(torch.randn(3, 4), -1))
    with pytest.raises(checks.CheckFailed, match="sums to"):
        checks.rows_sum_to_one(torch.rand(3, 4) + 0.1)
    with pytest.raises(checks.CheckFailed, match="negative"):
        checks.rows_sum_to_one(torch.tensor([[1.5, -0.5]]))
    checks.rows_sum_to_one(
        torch.tensor([[0.0, 0.0], [0.5, 0.5]]), allow_zero_rows=True
    )


def test_attention_backward_equals_autograd():
    q, k, v = (
        torch.randn(2, 3, n, d, dtype=torch.float64)
        for n, d in ((4, 5), (6, 5), (6, 2))
    )
    grad_out = torch.randn(2, 3, 4, 2, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    attention.scaled_dot_product_attention(*leaves)[0].backward(grad_out)
    for mine, leaf in zip(
        attention.attention_backward(q, k, v, grad_out), leaves
    ):
        torch.testing.assert_close(mine, leaf.grad)


def test_cached_attention_steps_are_the_rows_of_causal_attention():
    from course_utils.references.masking import causal_mask

    q, k, v = (
        torch.randn(2, 7, 4),
        torch.randn(2, 7, 4),
        torch.randn(2, 7, 3),
    )
    cache, rows = None, []
    for t in range(7):
        out, cache = attention.cached_attention_step(
            q[:, t : t + 1], k[:, t : t + 1], v[:, t : t + 1], cache
        )
        rows.append(out)
    full = attention.scaled_dot_product_attention(q, k, v, causal_mask(7))[0]
    torch.testing.assert_close(torch.cat(rows, dim=1), full)
    assert cache[0].shape == (2, 7, 4) and cache[1].shape == (2, 7, 3)


def test_choose_bandwidth_picks_the_validation_minimum_not_the_training_one():
    g = torch.Generator().manual_seed(0)
    x = 5 * torch.rand(60, generator=g, dtype=torch.float64)
    y = torch.sin(2 * x) + 0.3 * torch.randn(
        60, generator=g, dtype=torch.float64
    )
    sigmas = (0.01, 0.1, 0.3, 3.0)
    best, val = attention.choose_bandwidth(
        x[:30], y[:30], x[30:], y[30:], sigmas
    )
    _, train = attention.choose_bandwidth(
        x[:30], y[:30], x[:30], y[:30], sigmas
    )
    assert best == sigmas[int(val.argmin())] and val.shape == (4,)
    assert int(train.argmin()) == 0, (
        "on its own training points the smallest bandwidth always wins"
    )
    pred = attention.nadaraya_watson(x[30:], x[:30], y[:30], best)
    torch.testing.assert_close(
        ((pred - y[30:]) ** 2).mean(), val[int(val.argmin())]
    )
