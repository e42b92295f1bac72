"""Chapter 01's additive score (course_utils.references.attention) and the scoring-function benchmark.

- ``additive_scores`` and ``additive_attention`` against a loop over (query, key) pairs written
  as the papers write it (column vectors), with and without batch dims, in float32 and float64;
  against ``nn.Linear`` layers holding the same weights; clear errors for wrong shapes;
- the two facts the chapter argues from: without the tanh every query gets the same weights,
  and without a bias the score changes sign when the query and the key both do;
- the benchmark's functions at a tiny size, and its quick run end to end.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from course_utils.grading import checks
from course_utils.references import attention

DTYPES = [torch.float32, torch.float64]


def _tol(dtype):
    return (
        {"atol": 1e-5, "rtol": 1e-5}
        if dtype == torch.float32
        else {"atol": 1e-12, "rtol": 1e-10}
    )


def _inputs(batch, m, n, d_q, d_k, d_v, h, dtype=torch.float64, seed=0):
    r = checks.random_tensor
    return (
        r(*batch, m, d_q, dtype=dtype, seed=seed),
        r(*batch, n, d_k, dtype=dtype, seed=seed + 1),
        r(*batch, n, d_v, dtype=dtype, seed=seed + 2),
        r(h, d_q, dtype=dtype, seed=seed + 3, scale=0.6),
        r(h, d_k, dtype=dtype, seed=seed + 4, scale=0.6),
        r(h, dtype=dtype, seed=seed + 5),
    )


def _loop_scores(q, k, W_q, W_k, w_v):
    """e_ij = w_v . tanh(W_q q_i + W_k k_j), one pair at a time, for 2-D q and k."""
    return torch.stack(
        [
            torch.stack(
                [w_v @ torch.tanh(W_q @ q_i + W_k @ k_j) for k_j in k]
            )
            for q_i in q
        ]
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_additive_attention_matches_a_loop_over_pairs(dtype, batch):
    q, k, v, W_q, W_k, w_v = _inputs(
        batch, 4, 6, 3, 5, 2, 7, dtype=dtype, seed=len(batch)
    )
    context, weights = attention.additive_attention(q, k, v, W_q, W_k, w_v)
    assert context.shape == (*batch, 4, 2) and weights.shape == (
        *batch,
        4,
        6,
    )
    assert context.dtype == weights.dtype == dtype
    flat = [
        t.reshape(-1, *t.shape[-2:]) for t in (q, k, v, weights, context)
    ]
    for b in range(flat[0].shape[0]):
        e = _loop_scores(flat[0][b], flat[1][b], W_q, W_k, w_v)
        w = e.exp() / e.exp().sum(dim=-1, keepdim=True)
        torch.testing.assert_close(flat[3][b], w, **_tol(dtype))
        torch.testing.assert_close(flat[4][b], w @ flat[2][b], **_tol(dtype))
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(*batch, 4, dtype=dtype), **_tol(dtype)
    )


def test_additive_scores_equal_linear_layers_with_the_same_weights():
    torch.manual_seed(0)
    W_q, W_k, w_v = (
        nn.Linear(3, 8, bias=False),
        nn.Linear(5, 8, bias=False),
        nn.Linear(8, 1, bias=False),
    )
    q, k = torch.randn(2, 4, 3), torch.randn(2, 6, 5)
    by_layers = w_v(
        torch.tanh(W_q(q)[..., :, None, :] + W_k(k)[..., None, :, :])
    ).squeeze(-1)
    got = attention.additive_scores(
        q, k, W_q.weight, W_k.weight, w_v.weight[0]
    )
    torch.testing.assert_close(got, by_layers)


def test_additive_attention_broadcasts_leading_dims_and_keeps_its_inputs():
    q, k, v, W_q, W_k, w_v = _inputs((2,), 3, 4, 2, 3, 2, 5)
    before = [t.clone() for t in (q, k, v, W_q, W_k, w_v)]
    # one memory for both batch elements
    shared, _ = attention.additive_attention(q, k[0], v[0], W_q, W_k, w_v)
    for b in range(2):
        torch.testing.assert_close(
            shared[b],
            attention.additive_attention(q[b], k[0], v[0], W_q, W_k, w_v)[0],
        )
    assert all(
        torch.equal(a, b) for a, b in zip(before, (q, k, v, W_q, W_k, w_v))
    )


def test_additive_attention_has_gradients_everywhere():
    args = [t.requires_grad_() for t in _inputs((), 2, 3, 2, 4, 2, 3)]
    assert torch.autograd.gradcheck(
        lambda *a: attention.additive_attention(*a)[0], args
    )


@pytest.mark.parametrize(
    "call, words",
    [
        (
            lambda q, k, v, Wq, Wk, wv: attention.additive_attention(
                q, k, v, Wq.T, Wk, wv
            ),
            "W_q has shape",
        ),
        (
            lambda q, k, v, Wq, Wk, wv: attention.additive_attention(
                q, k, v, Wq, Wk[:, :2], wv
            ),
            "W_k has shape",
        ),
        (
            lambda q, k, v, Wq, Wk, wv: attention.additive_attention(
                q, k, v, Wq, Wk, wv[None]
            ),
            "w_v (h,)",
        ),
        (
            lambda q, k, v, Wq, Wk, wv: attention.additive_attention(
                q, k, v[:2], Wq, Wk, wv
            ),
            "one value per key",
        ),
        (
            lambda q, k, v, Wq, Wk, wv: attention.additive_attention(
                q[0], k, v, Wq, Wk, wv
            ),
            "(..., tokens, features)",
        ),
    ],
)
def test_additive_attention_explains_wrong_shapes(call, words):
    with pytest.raises(
        ValueError,
        match=words.replace("(", r"\(")
        .replace(")", r"\)")
        .replace(".", r"\."),
    ):
        call(*_inputs((), 3, 4, 2, 5, 2, 6))


def test_additive_attention_refuses_mixed_dtypes_and_integers():
    q, k, v, W_q, W_k, w_v = _inputs((), 3, 4, 2, 5, 2, 6)
    with pytest.raises(TypeError, match="mixed dtypes"):
        attention.additive_attention(q.float(), k, v, W_q, W_k, w_v)
    with pytest.raises(TypeError, match="floating point"):
        attention.additive_scores(q.long(), k, W_q, W_k, w_v)


def test_without_the_tanh_every_query_gets_the_same_weights():
    q, k, _, W_q, W_k, w_v = _inputs((), 5, 6, 3, 4, 2, 7)
    linear = ((q @ W_q.T)[:, None, :] + (k @ W_k.T)[None, :, :]) @ w_v
    weights = attention.softmax(linear, dim=-1)
    torch.testing.assert_close(weights, weights[:1].expand(5, 6))
    real = attention.softmax(
        attention.additive_scores(q, k, W_q, W_k, w_v), dim=-1
    )
    assert (real - real[:1]).abs().max() > 1e-3


def test_the_additive_score_is_odd_and_the_bilinear_score_even():
    q, k, _, W_q, W_k, w_v = _inputs((), 3, 4, 2, 5, 2, 6)
    torch.testing.assert_close(
        attention.additive_scores(-q, -k, W_q, W_k, w_v),
        -attention.additive_scores(q, k, W_q, W_k, w_v),
    )
    from course_utils.experiments import score_functions as bench

    M = checks.random_tensor(2, 5, dtype=torch.float64, seed=9)
    torch.testing.assert_close(
        bench.bilinear_scores(-q, -k, M), bench.bilinear_scores(q, k, M)
    )


# --------------------------------------------------------------------------- the benchmark
def test_benchmark_scores_agree_with_their_formulas():
    from course_utils.experiments import score_functions as bench

    args = bench.time_inputs(8, 4, 3)
    q, k = args["dot"]
    torch.testing.assert_close(bench.dot_scores(q, k), q @ k.T)
    torch.testing.assert_close(bench.scaled_dot_scores(q, k), q @ k.T / 2.0)
    torch.testing.assert_close(
        bench.bilinear_scores(q, k, torch.eye(4)), q @ k.T
    )
    torch.testing.assert_close(
        bench.additive_scores(*args["additive"]),
        attention.additive_scores(*args["additive"]),
    )
    for name in bench.METHODS:
        assert bench.FUNCTIONS[name](*args[name]).shape == (8, 8)


def test_benchmark_timing_reports_median_quartiles_and_ratios():
    from course_utils.experiments import score_functions as bench

    row = bench.time_one_size(
        16, 8, 4, budget_s=0.0, min_repeats=3, max_repeats=3
    )
    assert row["repeats"] == 3
    for name in bench.METHODS:
        ms = row[name]["ms"]
        assert (
            0
            < ms["min"]
            <= ms["p25"]
            <= ms["median"]
            <= ms["p75"]
            <= ms["max"]
        )
    assert row["dot"]["over_dot"]["median"] == 1.0
    assert bench._quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5


@pytest.mark.parametrize("task", ["bilinear_teacher", "additive_teacher"])
def test_benchmark_task_and_students(task):
    from course_utils.experiments import score_functions as bench

    teacher = bench.Teacher(task, torch.Generator().manual_seed(0))
    q, k, target = bench.retrieval_batch(
        teacher, 32, generator=torch.Generator().manual_seed(1)
    )
    assert (
        q.shape == (32, 1, bench.D_Q)
        and k.shape == (32, bench.N_KEYS, bench.D_K)
        and target.shape == (32,)
    )
    torch.testing.assert_close(
        target, teacher.scores(q, k).squeeze(-2).argmax(-1), rtol=0, atol=0
    )
    # the symmetry the chapter's argument rests on
    negated = teacher.scores(-q, -k)
    sign = 1 if task == "bilinear_teacher" else -1
    torch.testing.assert_close(negated, sign * teacher.scores(q, k))
    for kind in bench.STUDENTS:
        torch.manual_seed(0)
        model = bench.LearnedScore(kind)
        assert model(q, k).shape == (32, 1, bench.N_KEYS)
        assert 0.0 <= bench.accuracy(model, q, k, target) <= 1.0
    torch.manual_seed(0)
    dot = bench.LearnedScore("dot")
    torch.manual_seed(0)
    scaled = bench.LearnedScore("scaled_dot")
    torch.testing.assert_close(scaled(q, k) * math.sqrt(bench.H), dot(q, k))
    model, losses = bench.train_student("additive", teacher, seed=0, steps=3)
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)


def test_benchmark_quick_run_writes_its_result(tmp_path):
    from course_utils.experiments import score_functions as bench

    data = bench.run(["--quick", "--out-dir", str(tmp_path)])
    saved = json.loads((tmp_path / "ch01_score_functions.json").read_text())
    assert saved["data"]["quick"] is True and saved["provenance"][
        "command"
    ].endswith("--quick")
    assert set(saved["data"]["learning"]["accuracy"]) == set(bench.TASKS)
    for task in bench.TASKS:
        for kind in bench.STUDENTS:
            cell = data["learning"]["accuracy"][task][kind]
            assert (
                cell["min"] <= cell["mean"] <= cell["max"]
                and len(cell["per_seed"]) == 1
            )
    assert {r["n"] for r in saved["data"]["time"]["rows"]} == {32, 64}
