"""The graders' tools (grading.checks, grading.pristine): closeness with helpful messages,
comparison over cases, device checks, forbidden calls, pristine copies, transplanting weights."""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

from course_utils.references import attention
from course_utils.grading import checks
from course_utils.grading import pristine


DTYPES = [torch.float32, torch.float64]


# ------------------------------------------------------------------ checks
def test_assert_close_names_the_first_differing_entry():
    expected = torch.zeros(2, 3)
    got = expected.clone()
    got[1, 2] = 0.5
    with pytest.raises(
        checks.CheckFailed,
        match=r"1 of 6 entries differ; first at index \[1, 2\]: got 0.5, expected 0",
    ) as info:
        checks.assert_close(
            got, expected, name="weights", hint="normalise over the keys"
        )
    assert "Hint: normalise over the keys" in str(info.value)


@pytest.mark.parametrize(
    "got,match",
    [
        (torch.zeros(3, 2), r"shape is \(3, 2\), expected \(2, 3\)"),
        (
            torch.zeros(2, 3, dtype=torch.float64),
            "dtype is torch.float64, expected torch.float32",
        ),
        (torch.full((2, 3), float("nan")), "has NaN at index"),
        ([0.0] * 6, "expected a torch.Tensor"),
    ],
)
def test_assert_close_reports_shape_dtype_nan_and_type(got, match):
    with pytest.raises(checks.CheckFailed, match=match):
        checks.assert_close(got, torch.zeros(2, 3))


def test_assert_close_accepts_float64_student_against_float64_reference():
    x = torch.randn(4, dtype=torch.float64)
    checks.assert_close(x + 1e-12, x)


def test_compare_passes_equivalent_formulations_and_reports_the_case():
    def einsum_attend(q, k, v):
        w = torch.einsum("...md,...nd->...mn", q, k).softmax(-1)
        return torch.einsum("...mn,...nv->...mv", w, v), w

    def loop_attend(q, k, v):
        rows = [attention.attention_pool(qi, k, v) for qi in q]
        return torch.stack([r[0] for r in rows]), torch.stack(
            [r[1] for r in rows]
        )

    cases = [
        checks.Case(
            (
                checks.random_tensor(3, 4, dtype=dt, seed=1),
                checks.random_tensor(5, 4, dtype=dt, seed=2),
                checks.random_tensor(5, 2, dtype=dt, seed=3),
            )
        )
        for dt in DTYPES
    ]
    checks.compare(
        einsum_attend,
        attention.attend,
        cases,
        outputs=("context", "weights"),
    )
    checks.compare(
        loop_attend, attention.attend, cases, outputs=("context", "weights")
    )

    def transposed(q, k, v):
        w = (k @ q.T).softmax(-1).T
        return w @ v, w

    with pytest.raises(
        checks.CheckFailed,
        match=r"transposed\(<torch.float32 \(3, 4\)>.*-> context",
    ):
        checks.compare(
            transposed,
            attention.attend,
            cases,
            outputs=("context", "weights"),
        )


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
    with pytest.raises(
        checks.CheckFailed, match="changed its input .argument 1. in place"
    ):
        checks.compare(
            in_place, attention.softmax, [checks.Case((x,), {"dim": -1})]
        )
    assert torch.equal(x, before)


def test_device_check_catches_a_detour_through_the_cpu_without_a_gpu():
    """An answer that copies a step to the CPU (``.cpu()``) runs on a CPU, cannot run on ``meta`` at
    all, and fails on a GPU; the check's simulated CUDA device fails it here, with the device named.
    Correct answers, answers that read values, and CPU 0-dim tensors pass, as on a real GPU."""
    x = torch.randn(3, 4)

    def detour(t):
        return (t.cpu() * torch.ones(4)).softmax(-1).to(
            t.device
        ) + torch.zeros(4)  # new CPU tensor at the end

    with pytest.raises(checks.CheckFailed, match="cuda device.*same device"):
        checks.check_device_agnostic(detour, (x,), name="detour")
    checks.check_device_agnostic(
        lambda t: t.softmax(-1) * torch.tensor(2.0) + torch.zeros_like(t),
        (x,),
    )
    # CPU indices are fine
    checks.check_device_agnostic(
        lambda t: t[torch.arange(2)] * float(t.shape[0]), (x,)
    )
    # reads a value: not judged
    checks.check_device_agnostic(lambda t: t * t.abs().max().item(), (x,))
    # a module's parameters stay where the caller put them: compare_cuda=False checks meta only
    checks.check_device_agnostic(
        lambda t: t + torch.ones(4, device="meta"), (x,), compare_cuda=False
    )


def test_forbid_calls_sees_aliases_methods_and_copies():
    from torch import softmax as alias

    uses = {
        "torch function by alias": lambda x: alias(x, -1),
        "tensor method": lambda x: x.softmax(-1),
        "functional": lambda x: F.softmax(x, -1),
        "course reference": lambda x: attention.softmax(x),
        "pristine copy of the reference": lambda x: (
            pristine().attention.softmax(x)
        ),
    }
    for label, fn in uses.items():
        with pytest.raises(
            checks.CheckFailed,
            match="which this exercise asks you to build yourself",
        ):
            with checks.forbid_calls(
                "torch.softmax",
                "torch.Tensor.softmax",
                "torch.nn.functional.softmax",
                attention.softmax,
                what=label,
            ):
                fn(torch.randn(3))
    with checks.forbid_calls("torch.softmax", attention.softmax):
        (torch.randn(3).exp() / 2).sum()  # allowed operations pass


def test_forbid_calls_sees_aten_operators_however_they_are_reached():
    ops = ("torch.ops.aten._softmax", "torch.ops.aten._log_softmax")
    reached = {
        "the operator itself": lambda x: torch.ops.aten._softmax(
            x, -1, False
        ),
        "an overload of it": lambda x: torch.ops.aten._log_softmax.default(
            x, -1, False
        ).exp(),
        "a public function over it": lambda x: torch.special.log_softmax(
            x, -1
        ).exp(),
        "a module over it": lambda x: torch.nn.Softmax(dim=-1)(x),
    }
    for label, fn in reached.items():
        with pytest.raises(
            checks.CheckFailed, match="torch.ops.aten._(log_)?softmax"
        ):
            with checks.forbid_calls(*ops, what=label):
                fn(torch.randn(2, 3))
    # a softmax of one's own reaches other operators only
    with checks.forbid_calls(*ops):
        x = torch.randn(2, 3, dtype=torch.float64)
        torch.exp(x - x.logsumexp(-1, keepdim=True))


def test_forbid_calls_catches_fused_attention_inside_modules():
    mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    x = torch.randn(1, 3, 4)
    with pytest.raises(
        checks.CheckFailed, match="scaled_dot_product_attention"
    ):
        with checks.forbid_calls(
            "torch.nn.functional.scaled_dot_product_attention"
        ):
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
    torch.testing.assert_close(
        P.attention.softmax(torch.zeros(2)), torch.full((2,), 0.5)
    )
    assert P.attention is not attention and P.checks is not checks


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
            self.fc1, self.act, self.fc2 = (
                nn.Linear(dim, mlp_dim),
                nn.GELU(approximate="tanh"),
                nn.Linear(mlp_dim, dim),
            )

        def forward(self, x):
            h = self.ln_a(x)
            x = x + self.attention(h, h, h)[0]
            return x + self.fc2(self.act(self.fc1(self.ln_b(x))))

    torch.manual_seed(0)
    reference, mine = (
        EncoderBlock(16, 4, 32).eval(),
        Renamed(16, 4, 32).eval(),
    )
    checks.transplant(reference, mine, name="Renamed")
    assert (
        reference.norm1.eps == 1e-6
        and reference.mlp[1].approximate == "tanh"
    )
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(mine(x), reference(x))
    wrong = Renamed(16, 4, 24)
    with pytest.raises(
        checks.CheckFailed,
        match=r"Renamed: its Linear layers differ .*\(24, 16, 'bias'\)",
    ):
        checks.transplant(
            EncoderBlock(16, 4, 32),
            wrong,
            name="Renamed",
            hint="keep the given layers",
        )
