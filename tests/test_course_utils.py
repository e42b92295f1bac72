"""Unit tests of course_utils: references against PyTorch, checks, pristine copies, runtime."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.references import attention
from course_utils.grading import checks
from course_utils import runtime
from course_utils.grading import pristine

DTYPES = [torch.float32, torch.float64]


# ------------------------------------------------------------------ references
@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(),
       scale=st.sampled_from([1.0, 30.0, 1e4]), double=st.booleans())
def test_softmax_matches_torch(shape, data, scale, double):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    dtype = torch.float64 if double else torch.float32
    x = checks.random_tensor(*shape, dtype=dtype, seed=len(shape), scale=scale)
    got = attention.softmax(x, dim=dim)
    assert got.dtype == dtype
    torch.testing.assert_close(got, torch.softmax(x, dim=dim))


def test_softmax_is_finite_for_huge_inputs():
    x = torch.tensor([1e4, -1e4, 1e4 - 1.0])
    assert torch.isfinite(attention.softmax(x)).all()
    assert torch.allclose(attention.softmax(torch.full((3,), -1e4)), torch.full((3,), 1 / 3))


def test_softmax_of_the_slides_example():
    w = attention.softmax(torch.tensor([2.0, 4.0, 4.0]))
    expected = torch.tensor([1.0, math.e**2, math.e**2]) / (1 + 2 * math.e**2)
    torch.testing.assert_close(w, expected)
    assert abs(w[0].item() - 0.0634) < 1e-4  # the slides round this to 0.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,m,n,d,dv", [((), 3, 5, 4, 2), ((2,), 4, 4, 8, 8), ((2, 3), 1, 7, 3, 5)])
def test_attend_matches_pytorch_fused_attention_with_unit_scale(dtype, batch, m, n, d, dv):
    q = checks.random_tensor(*batch, m, d, dtype=dtype, seed=1)
    k = checks.random_tensor(*batch, n, d, dtype=dtype, seed=2)
    v = checks.random_tensor(*batch, n, dv, dtype=dtype, seed=3)
    out, weights = attention.attend(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=1.0))
    torch.testing.assert_close(weights.sum(-1), torch.ones(*batch, m, dtype=dtype))
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


@pytest.mark.parametrize("call,match", [
    (lambda: attention.attend(torch.randn(2, 3), torch.randn(4, 5), torch.randn(4, 2)), "d_k=3 but keys have d_k=5"),
    (lambda: attention.attend(torch.randn(2, 3), torch.randn(4, 3), torch.randn(5, 2)), "4 keys but 5 values"),
    (lambda: attention.attend(torch.randn(3), torch.randn(4, 3), torch.randn(4, 2)), r"\(\.\.\., tokens, features\)"),
    (lambda: attention.attend(torch.ones(2, 3, dtype=torch.long), torch.randn(4, 3), torch.randn(4, 2)), "floating point"),
    (lambda: attention.attend(torch.randn(2, 3), torch.randn(4, 3).double(), torch.randn(4, 2)), "mixed dtypes"),
    (lambda: attention.attention_pool(torch.randn(2, 3), torch.randn(4, 3), torch.randn(4, 2)), "query must have 1 dim"),
    (lambda: attention.softmax([1.0, 2.0]), "must be a torch.Tensor"),
])
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# ------------------------------------------------------------------ checks
def test_assert_close_names_the_first_differing_entry():
    expected = torch.zeros(2, 3)
    got = expected.clone()
    got[1, 2] = 0.5
    with pytest.raises(checks.CheckFailed, match=r"1 of 6 entries differ; first at index \[1, 2\]: got 0.5, expected 0") as info:
        checks.assert_close(got, expected, name="weights", hint="normalise over the keys")
    assert "Hint: normalise over the keys" in str(info.value)


@pytest.mark.parametrize("got,match", [
    (torch.zeros(3, 2), r"shape is \(3, 2\), expected \(2, 3\)"),
    (torch.zeros(2, 3, dtype=torch.float64), "dtype is torch.float64, expected torch.float32"),
    (torch.full((2, 3), float("nan")), "has NaN at index"),
    ([0.0] * 6, "expected a torch.Tensor"),
])
def test_assert_close_reports_shape_dtype_nan_and_type(got, match):
    with pytest.raises(checks.CheckFailed, match=match):
        checks.assert_close(got, torch.zeros(2, 3))


def test_assert_close_accepts_float64_student_against_float64_reference():
    x = torch.randn(4, dtype=torch.float64)
    checks.assert_close(x + 1e-12, x)


def test_rows_sum_to_one():
    checks.rows_sum_to_one(torch.softmax(torch.randn(3, 4), -1))
    with pytest.raises(checks.CheckFailed, match="sums to"):
        checks.rows_sum_to_one(torch.rand(3, 4) + 0.1)
    with pytest.raises(checks.CheckFailed, match="negative"):
        checks.rows_sum_to_one(torch.tensor([[1.5, -0.5]]))
    checks.rows_sum_to_one(torch.tensor([[0.0, 0.0], [0.5, 0.5]]), allow_zero_rows=True)


def test_compare_passes_equivalent_formulations_and_reports_the_case():
    def einsum_attend(q, k, v):
        w = torch.einsum("...md,...nd->...mn", q, k).softmax(-1)
        return torch.einsum("...mn,...nv->...mv", w, v), w

    def loop_attend(q, k, v):
        rows = [attention.attention_pool(qi, k, v) for qi in q]
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    cases = [checks.Case((checks.random_tensor(3, 4, dtype=dt, seed=1), checks.random_tensor(5, 4, dtype=dt, seed=2),
                          checks.random_tensor(5, 2, dtype=dt, seed=3))) for dt in DTYPES]
    checks.compare(einsum_attend, attention.attend, cases, outputs=("context", "weights"))
    checks.compare(loop_attend, attention.attend, cases, outputs=("context", "weights"))

    def transposed(q, k, v):
        w = (k @ q.T).softmax(-1).T
        return w @ v, w

    with pytest.raises(checks.CheckFailed, match=r"transposed\(<torch.float32 \(3, 4\)>.*-> context"):
        checks.compare(transposed, attention.attend, cases, outputs=("context", "weights"))


def test_compare_reports_exceptions_and_missing_work():
    def unfinished(x, dim=-1):
        raise NotImplementedError

    def crashes(x, dim=-1):
        return x @ torch.ones(99)

    case = [checks.Case((torch.randn(2, 3),), {"dim": -1})]
    with pytest.raises(checks.CheckFailed, match="not done yet"):
        checks.compare(unfinished, attention.softmax, case)
    with pytest.raises(checks.CheckFailed, match="raised RuntimeError"):
        checks.compare(crashes, attention.softmax, case)


def test_compare_rejects_in_place_changes_and_keeps_the_callers_tensor():
    def in_place(x, dim=-1):
        x -= x.amax(dim=dim, keepdim=True)
        x.exp_()
        return x / x.sum(dim=dim, keepdim=True)

    x = torch.randn(3, 4)
    before = x.clone()
    with pytest.raises(checks.CheckFailed, match="changed its input .argument 1. in place"):
        checks.compare(in_place, attention.softmax, [checks.Case((x,), {"dim": -1})])
    assert torch.equal(x, before)


def test_device_check_catches_a_detour_through_the_cpu_without_a_gpu():
    """An answer that copies a step to the CPU (``.cpu()``) runs on a CPU, cannot run on ``meta`` at
    all, and fails on a GPU; the check's simulated CUDA device fails it here, with the device named.
    Correct answers, answers that read values, and CPU 0-dim tensors pass, as on a real GPU."""
    x = torch.randn(3, 4)

    def detour(t):
        return (t.cpu() * torch.ones(4)).softmax(-1).to(t.device) + torch.zeros(4)  # new CPU tensor at the end

    with pytest.raises(checks.CheckFailed, match="cuda device.*same device"):
        checks.check_device_agnostic(detour, (x,), name="detour")
    checks.check_device_agnostic(lambda t: t.softmax(-1) * torch.tensor(2.0) + torch.zeros_like(t), (x,))
    checks.check_device_agnostic(lambda t: t[torch.arange(2)] * float(t.shape[0]), (x,))  # CPU indices are fine
    checks.check_device_agnostic(lambda t: t * t.abs().max().item(), (x,))  # reads a value: not judged
    # a module's parameters stay where the caller put them: compare_cuda=False checks meta only
    checks.check_device_agnostic(lambda t: t + torch.ones(4, device="meta"), (x,), compare_cuda=False)


def test_forbid_calls_sees_aliases_methods_and_copies():
    from torch import softmax as alias

    uses = {
        "torch function by alias": lambda x: alias(x, -1),
        "tensor method": lambda x: x.softmax(-1),
        "functional": lambda x: F.softmax(x, -1),
        "course reference": lambda x: attention.softmax(x),
        "pristine copy of the reference": lambda x: pristine().attention.softmax(x),
    }
    for label, fn in uses.items():
        with pytest.raises(checks.CheckFailed, match="which this exercise asks you to build yourself"):
            with checks.forbid_calls("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax",
                                     attention.softmax, what=label):
                fn(torch.randn(3))
    with checks.forbid_calls("torch.softmax", attention.softmax):
        (torch.randn(3).exp() / 2).sum()  # allowed operations pass


def test_forbid_calls_sees_aten_operators_however_they_are_reached():
    ops = ("torch.ops.aten._softmax", "torch.ops.aten._log_softmax")
    reached = {
        "the operator itself": lambda x: torch.ops.aten._softmax(x, -1, False),
        "an overload of it": lambda x: torch.ops.aten._log_softmax.default(x, -1, False).exp(),
        "a public function over it": lambda x: torch.special.log_softmax(x, -1).exp(),
        "a module over it": lambda x: torch.nn.Softmax(dim=-1)(x),
    }
    for label, fn in reached.items():
        with pytest.raises(checks.CheckFailed, match="torch.ops.aten._(log_)?softmax"):
            with checks.forbid_calls(*ops, what=label):
                fn(torch.randn(2, 3))
    with checks.forbid_calls(*ops):  # a softmax of one's own reaches other operators only
        x = torch.randn(2, 3, dtype=torch.float64)
        torch.exp(x - x.logsumexp(-1, keepdim=True))


def test_forbid_calls_catches_fused_attention_inside_modules():
    mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    x = torch.randn(1, 3, 4)
    with pytest.raises(checks.CheckFailed, match="scaled_dot_product_attention"):
        with checks.forbid_calls("torch.nn.functional.scaled_dot_product_attention"):
            F.scaled_dot_product_attention(x, x, x)
    with pytest.raises(checks.CheckFailed, match="MultiheadAttention"):
        with checks.forbid_calls(torch.nn.MultiheadAttention):
            mha(x, x, x)


# ------------------------------------------------------------------ pristine copies
def test_pristine_copies_ignore_rebinding(monkeypatch):
    monkeypatch.setattr(checks, "assert_close", lambda *a, **k: None)
    monkeypatch.setattr(attention, "softmax", lambda x, dim=-1: x)
    P = pristine()
    with pytest.raises(AssertionError):
        P.checks.assert_close(torch.ones(2), torch.zeros(2))
    torch.testing.assert_close(P.attention.softmax(torch.zeros(2)), torch.full((2,), 0.5))
    assert P.attention is not attention and P.checks is not checks


# ------------------------------------------------------------------ runtime
@pytest.mark.parametrize("env,expected", [
    ({}, False),
    ({"CI": "true"}, True),
    ({"NBGRADER_EXECUTION": "autograde"}, True),
    ({"COURSE_FAST": "1"}, True),
    ({"CI": "true", "COURSE_FAST": "0"}, False),
])
def test_fast_mode(monkeypatch, env, expected):
    for var in ("CI", "NBGRADER_EXECUTION", "COURSE_FAST"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert runtime.fast_mode() is expected


def test_pick_device_and_seed(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        expected = "mps"
    assert runtime.pick_device().type == expected
    assert runtime.pick_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            runtime.pick_device("cuda")
    runtime.seed_everything(3)
    a = torch.randn(2)
    runtime.seed_everything(3)
    assert torch.equal(a, torch.randn(2))
    assert torch.equal(torch.randn(2, generator=runtime.generator(5)), torch.randn(2, generator=runtime.generator(5)))


def test_every_course_variable_is_documented_in_settings():
    import re

    from course_utils import settings
    from tests.helpers import ROOT

    used = set()
    for path in [*ROOT.glob("course_utils/**/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("tools/*"),
                 ROOT / "Makefile", ROOT / "autograde" / "nbgrader_config.py"]:
        used |= set(re.findall(r"\bCOURSE_[A-Z0-9_]+\b", path.read_text(errors="replace")))
    undocumented = sorted(used - set(settings.SETTINGS))
    assert not undocumented, f"document these in course_utils/settings.py: {undocumented}"
    assert all(name in settings.__doc__ for name in settings.SETTINGS), "the module docstring's table is incomplete"


def test_compare_seeds_reads_a_gap_only_as_far_as_the_seeds_allow():
    from itertools import combinations

    from course_utils.training.evidence import MIN_SEEDS, compare_seeds

    ref = [0.62, 0.618, 0.636]
    assert str(compare_seeds([0.60, 0.598, 0.61], ref)) == "lower, beyond the noise"
    assert str(compare_seeds([0.66, 0.65, 0.67], ref)) == "higher, beyond the noise"
    # Every seed beyond, but by less than two standard errors (a wide spread on one side).
    wide = compare_seeds([0.637, 0.70, 0.64], ref)
    assert wide.apart and abs(wide.gap) < 2 * wide.se and wide.verdict == "inside the noise"
    # A large mean gap with overlapping seeds is noise too.
    assert compare_seeds([0.50, 0.52, 0.63], ref).verdict == "inside the noise"
    # Too few seeds on either side: not measured, whatever the numbers.
    assert str(compare_seeds([0.40, 0.41], ref)) == "not measured (2 seeds)"
    assert str(compare_seeds([0.40], [0.60])) == "not measured (1 seed)"
    assert compare_seeds([0.40], [0.60]).se is None
    # Integers and other sequences read the same; the standard error is the textbook one.
    c = compare_seeds((1, 2, 3), (4, 5, 6))
    assert c.gap == -3 and abs(c.se - (2 / 3) ** 0.5) < 1e-12 and c.verdict == "lower"
    with pytest.raises(ValueError, match="at least one value"):
        compare_seeds([], ref)
    # The comment's odds: with MIN_SEEDS a side and no effect, the seeds fall apart 1 time in 10.
    n = MIN_SEEDS
    splits = list(combinations(range(2 * n), n))
    apart = sum(1 for s in splits if max(s) < n or min(s) >= n)
    assert apart / len(splits) == 0.1


def test_transplant_matches_layers_by_structure_and_keeps_the_learners_settings():
    """A block with other names and containers, LayerNorm eps 1e-6 and the tanh GELU receives the course
    block's weights by structure and then computes what the course block computes with those settings."""
    from torch import nn

    from course_utils.references.multihead import MultiHeadAttention
    from course_utils.references.vit import EncoderBlock

    class Renamed(nn.Module):
        def __init__(self, dim, heads, mlp_dim):
            super().__init__()
            self.ln_a = nn.LayerNorm(dim, eps=1e-6)
            self.attention = MultiHeadAttention(dim, heads)
            self.ln_b = nn.LayerNorm(dim, eps=1e-6)
            self.fc1, self.act, self.fc2 = nn.Linear(dim, mlp_dim), nn.GELU(approximate="tanh"), nn.Linear(mlp_dim, dim)

        def forward(self, x):
            h = self.ln_a(x)
            x = x + self.attention(h, h, h)[0]
            return x + self.fc2(self.act(self.fc1(self.ln_b(x))))

    torch.manual_seed(0)
    reference, mine = EncoderBlock(16, 4, 32).eval(), Renamed(16, 4, 32).eval()
    checks.transplant(reference, mine, name="Renamed")
    assert reference.norm1.eps == 1e-6 and reference.mlp[1].approximate == "tanh"
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(mine(x), reference(x))
    wrong = Renamed(16, 4, 24)
    with pytest.raises(checks.CheckFailed, match=r"Renamed: its Linear layers differ .*\(24, 16, 'bias'\)"):
        checks.transplant(EncoderBlock(16, 4, 32), wrong, name="Renamed", hint="keep the given layers")


def test_attention_backward_equals_autograd():
    q, k, v = (torch.randn(2, 3, n, d, dtype=torch.float64) for n, d in ((4, 5), (6, 5), (6, 2)))
    grad_out = torch.randn(2, 3, 4, 2, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    attention.scaled_dot_product_attention(*leaves)[0].backward(grad_out)
    for mine, leaf in zip(attention.attention_backward(q, k, v, grad_out), leaves):
        torch.testing.assert_close(mine, leaf.grad)


def test_cached_attention_steps_are_the_rows_of_causal_attention():
    from course_utils.references.masking import causal_mask

    q, k, v = torch.randn(2, 7, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 3)
    cache, rows = None, []
    for t in range(7):
        out, cache = attention.cached_attention_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], cache)
        rows.append(out)
    full = attention.scaled_dot_product_attention(q, k, v, causal_mask(7))[0]
    torch.testing.assert_close(torch.cat(rows, dim=1), full)
    assert cache[0].shape == (2, 7, 4) and cache[1].shape == (2, 7, 3)


def test_choose_bandwidth_picks_the_validation_minimum_not_the_training_one():
    g = torch.Generator().manual_seed(0)
    x = 5 * torch.rand(60, generator=g, dtype=torch.float64)
    y = torch.sin(2 * x) + 0.3 * torch.randn(60, generator=g, dtype=torch.float64)
    sigmas = (0.01, 0.1, 0.3, 3.0)
    best, val = attention.choose_bandwidth(x[:30], y[:30], x[30:], y[30:], sigmas)
    _, train = attention.choose_bandwidth(x[:30], y[:30], x[:30], y[:30], sigmas)
    assert best == sigmas[int(val.argmin())] and val.shape == (4,)
    assert int(train.argmin()) == 0, "on its own training points the smallest bandwidth always wins"
    pred = attention.nadaraya_watson(x[30:], x[:30], y[:30], best)
    torch.testing.assert_close(((pred - y[30:]) ** 2).mean(), val[int(val.argmin())])
