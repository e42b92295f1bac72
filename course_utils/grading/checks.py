"""Checks used by the notebooks' visible tests and by the hidden tests.

Every failure raises ``CheckFailed`` (an ``AssertionError``) whose message says what was
being checked, which shape or entry was wrong, expected versus got, and a hint.  The
hidden tests call these through ``course_utils.grading.pristine()`` so that a notebook
which rebinds them (``checks.assert_close = lambda *a: None``) changes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import math
import sys
import types
import warnings
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "CheckFailed",
    "Case",
    "assert_close",
    "assert_shape",
    "compare",
    "forbid_calls",
    "rows_sum_to_one",
    "random_tensor",
    "passed",
    "call",
    "derived_tolerance",
    "check_device_agnostic",
    "seeded",
    "transplant",
]


class CheckFailed(AssertionError):
    """A check did not hold; the message is written for the learner."""


def _fail(what: str, problem: str, hint: str | None) -> None:
    msg = f"{what}: {problem}"
    if hint:
        msg += f"\nHint: {hint}"
    raise CheckFailed(msg)


def _shape(t: Any) -> str:
    return str(tuple(t.shape)) if hasattr(t, "shape") else type(t).__name__


def assert_shape(
    got: Any,
    shape: Sequence[int],
    *,
    name: str = "output",
    hint: str | None = None,
) -> None:
    """``got`` is a tensor of exactly ``shape``."""
    if not isinstance(got, Tensor):
        _fail(
            name,
            f"expected a torch.Tensor of shape {tuple(shape)}, got {type(got).__name__}",
            hint,
        )
    if tuple(got.shape) != tuple(shape):
        _fail(
            name,
            f"shape is {tuple(got.shape)}, expected {tuple(shape)}",
            hint,
        )


def assert_close(
    got: Any,
    expected: Tensor,
    *,
    name: str = "output",
    atol: float | None = None,
    rtol: float | None = None,
    check_dtype: bool = True,
    hint: str | None = None,
) -> None:
    """``got`` matches ``expected``: type, shape, dtype, device, no NaN where none expected, values.

    Tolerances default to 1e-5 (float32) or 1e-10 (float64), relative and absolute.
    """
    assert_shape(got, expected.shape, name=name, hint=hint)
    if check_dtype and got.dtype != expected.dtype:
        _fail(
            name,
            f"dtype is {got.dtype}, expected {expected.dtype} (the input's dtype)",
            hint
            or "create new tensors with dtype=x.dtype, device=x.device, or use torch.*_like",
        )
    if got.device != expected.device:
        _fail(
            name,
            f"is on {got.device}, expected {expected.device} (the input's device)",
            hint,
        )
    wide = torch.float64 in (got.dtype, expected.dtype)
    atol = (1e-10 if wide else 1e-5) if atol is None else atol
    rtol = (1e-8 if wide else 1e-5) if rtol is None else rtol
    g = got.detach().to(torch.float64).cpu()
    e = expected.detach().to(torch.float64).cpu()
    bad_nan = torch.isnan(g) & ~torch.isnan(e)
    if bad_nan.any():
        idx = tuple(int(i) for i in bad_nan.nonzero()[0])
        _fail(
            name,
            f"has NaN at index {list(idx)} (and {int(bad_nan.sum()) - 1} more) where {e[idx].item():.6g} was expected",
            hint,
        )
    ok = torch.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
    if not bool(ok.all()):
        idx = tuple(int(i) for i in (~ok).nonzero()[0])
        n_bad = int((~ok).sum())
        where = f"index {list(idx)}" if idx else "the value"
        # enough digits to show the difference the tolerance cares about
        digits = max(
            6,
            min(
                17,
                2
                - math.floor(
                    math.log10(max(min(atol, rtol) if atol else rtol, 1e-17))
                ),
            ),
        )
        _fail(
            name,
            f"{n_bad} of {ok.numel()} entries differ; first at {where}: got {g[idx].item():.{digits}g}, "
            f"expected {e[idx].item():.{digits}g} (tolerance atol={atol:.3g}, rtol={rtol:.3g})",
            hint,
        )


def rows_sum_to_one(
    weights: Tensor,
    *,
    dim: int = -1,
    name: str = "weights",
    allow_zero_rows: bool = False,
    hint: str | None = None,
) -> None:
    """Every slice of ``weights`` along ``dim`` is non-negative and sums to 1 (or is all 0)."""
    if not isinstance(weights, Tensor):
        _fail(name, f"expected a tensor, got {type(weights).__name__}", hint)
    w = weights.detach().to(torch.float64)
    if torch.isnan(w).any():
        _fail(name, "contains NaN", hint)
    if (w < -1e-7).any():
        _fail(
            name,
            f"has negative entries (min {w.min().item():.3g}); weights are probabilities",
            hint,
        )
    sums = w.sum(dim=dim)
    good = (sums - 1).abs() < 1e-5
    if allow_zero_rows:
        good |= sums.abs() < 1e-12
    if not bool(good.all()):
        idx = tuple(int(i) for i in (~good).nonzero()[0])
        _fail(
            name,
            f"slice {list(idx)} along dim {dim} sums to {sums[idx].item():.6g}, not 1",
            hint or "normalise over the keys (the last dim)",
        )


def random_tensor(
    *shape: int,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    scale: float = 1.0,
    device: str | torch.device = "cpu",
) -> Tensor:
    """A reproducible standard-normal tensor times ``scale``."""
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    ).to(dtype=dtype, device=device)


@dataclasses.dataclass
class Case:
    """One call to compare: positional ``args``, keyword ``kwargs`` and a readable ``label``."""

    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    label: str = ""
    hint: str | None = None  # overrides compare()'s hint for this case

    def describe(self, fn_name: str) -> str:
        if self.label:
            return f"{fn_name}({self.label})"
        parts = [
            f"<{t.dtype} {_shape(t)}>" if isinstance(t, Tensor) else repr(t)
            for t in self.args
        ]
        parts += [
            f"{k}="
            + (
                f"<{v.dtype} {_shape(v)}>"
                if isinstance(v, Tensor)
                else repr(v)
            )
            for k, v in self.kwargs.items()
        ]
        return f"{fn_name}({', '.join(parts)})"


def _clone(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.clone()
    if isinstance(obj, (tuple, list)):
        return type(obj)(_clone(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


def _map_tensors(obj: Any, fn: Callable[[Tensor], Any]) -> Any:
    """``obj`` with every tensor inside tuples, lists and dicts replaced by ``fn(tensor)``."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def _tensors(obj: Any, path: str = "") -> list[tuple[str, Tensor]]:
    """(where, tensor) for every tensor inside ``obj``; ``where`` reads like ``[1]`` or ``['mask']``."""
    if isinstance(obj, Tensor):
        return [(path, obj)]
    if isinstance(obj, (tuple, list)):
        return [
            pair
            for i, o in enumerate(obj)
            for pair in _tensors(o, f"{path}[{i}]")
        ]
    if isinstance(obj, dict):
        return [
            pair
            for k, v in obj.items()
            for pair in _tensors(v, f"{path}[{k!r}]")
        ]
    return []


def _same(a: Tensor, b: Tensor) -> bool:
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and bool(
            torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
            if a.is_floating_point()
            else torch.equal(a, b)
        )
    )


# --------------------------------------------------------------------------- tolerances
def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def _widen(obj: Any) -> Any:
    return _map_tensors(
        obj, lambda t: t.double() if t.is_floating_point() else t
    )


def _as_tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _detached(out: tuple) -> tuple:
    return tuple(o.detach() if isinstance(o, Tensor) else o for o in out)


def derived_tolerance(
    reference: Callable,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    perturb: bool = True,
    factor: float = 16.0,
    draws: int = 2,
    seed: int = 0,
    low: tuple | None = None,
):
    """What a correct formulation can achieve on these inputs, measured rather than assumed.

    Returns ``(truth, atols, rtol)``: ``truth`` is the tuple of the reference's outputs computed
    in float64 (one element when it returns a single tensor), ``atols`` one tolerance per output.
    A formulation counts as correct when it is *backward stable*: its result equals the exact
    result for inputs perturbed by a few units in the last place of their own dtype.  So the
    tolerance is ``factor`` times the larger of (a) the reference's own error in the input
    dtype and (b) how far the float64 result moves when every floating input is perturbed by
    one relative ``eps`` of its dtype (``draws`` random perturbations).  A float32
    ``exp(x - logsumexp(x))`` softmax of a row of -1e4 is off by ~1e-5: (b) is ~2e-4 there,
    because an input of 1e4 is itself only known to ~1e-3 in float32.  ``perturb=False``
    skips (b) for functions whose output jumps under tiny input changes (top-k selection).
    ``low``: the reference's result on these inputs, when the caller has it already.
    """
    kwargs = kwargs or {}
    with torch.no_grad():
        return _derived_tolerance(
            reference,
            args,
            kwargs,
            perturb=perturb,
            factor=factor,
            draws=draws,
            seed=seed,
            low=low,
        )


def _derived_tolerance(
    reference, args, kwargs, *, perturb, factor, draws, seed, low=None
):
    if low is None:
        low = _as_tuple(reference(*_clone(args), **_clone(kwargs)))
    low = _detached(low)
    widen = _widen
    floating = [
        t for _, t in _tensors((args, kwargs)) if t.is_floating_point()
    ]
    if not floating:  # nothing to widen or to perturb (token ids, say): the float64 run is this one
        truth = low
    else:
        try:
            truth = _detached(
                _as_tuple(reference(*_widen(args), **_widen(kwargs)))
            )
        except RuntimeError:
            # A reference fixed to one dtype (a float32 module, say) cannot run in float64: measure
            # in the input's dtype, where the perturbations below still show the conditioning.
            widen, truth = _clone, low
    spread = [0.0] * len(truth)
    for i, (lo, tr) in enumerate(zip(low, truth)):
        if (
            isinstance(lo, Tensor)
            and isinstance(tr, Tensor)
            and lo.is_floating_point()
            and lo.numel()
        ):
            spread[i] = float(
                (lo.double() - tr)
                .abs()
                .nan_to_num(0.0, posinf=0.0, neginf=0.0)
                .max()
            )
    if perturb and floating:
        g = torch.Generator().manual_seed(seed)

        def nudge(t: Tensor) -> Tensor:
            if not t.is_floating_point():
                return t
            u = torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1
            wide = widen(t)
            return wide * (
                1 + _eps(t.dtype) * u.to(device=t.device, dtype=wide.dtype)
            )

        for _ in range(draws):
            moved = _detached(
                _as_tuple(
                    reference(
                        *_map_tensors(args, nudge),
                        **_map_tensors(kwargs, nudge),
                    )
                )
            )
            for i, (mv, tr) in enumerate(zip(moved, truth)):
                if (
                    isinstance(mv, Tensor)
                    and isinstance(tr, Tensor)
                    and tr.is_floating_point()
                    and tr.numel()
                ):
                    d = (
                        (mv.double() - tr)
                        .abs()
                        .nan_to_num(0.0, posinf=0.0, neginf=0.0)
                        .max()
                    )
                    spread[i] = max(spread[i], float(d))
    dtype = next((t.dtype for t in floating), torch.float64)
    eps = _eps(dtype)
    atols = []
    for sp, tr in zip(spread, truth):
        scale = (
            float(
                tr.double()
                .abs()
                .nan_to_num(0.0, posinf=0.0, neginf=0.0)
                .max()
            )
            if isinstance(tr, Tensor)
            and tr.is_floating_point()
            and tr.numel()
            else 0.0
        )
        atols.append(factor * sp + 4 * eps * scale)
    return truth, atols, factor * eps


def _assert_matches(
    got: Any,
    truth: Tensor,
    like: Tensor,
    *,
    name: str,
    atol: float,
    rtol: float,
    hint: str | None,
) -> None:
    """``got`` has ``like``'s shape, dtype and device and is within tolerance of ``truth``."""
    assert_shape(got, like.shape, name=name, hint=hint)
    if got.dtype != like.dtype:
        _fail(
            name,
            f"dtype is {got.dtype}, expected {like.dtype} (the input's dtype)",
            hint
            or "create new tensors with dtype=x.dtype, device=x.device, or use torch.*_like",
        )
    if not like.is_floating_point():
        assert_close(got, like, name=name, hint=hint)
        return
    assert_close(
        got,
        truth.to(like.device),
        name=name,
        atol=atol,
        rtol=rtol,
        check_dtype=False,
        hint=hint,
    )


def _run_student(
    student: Callable,
    args: tuple,
    kwargs: dict,
    *,
    what: str,
    hint: str | None,
    forbid: Sequence[Any] = (),
    fn_name: str = "your function",
) -> Any:
    """Call the learner's function; its own crash becomes a CheckFailed naming the inputs.

    Warnings the answer triggers are recorded and dropped (they never cost points), and
    the call is checked not to modify its inputs in place.
    """
    mine_args, mine_kwargs = _clone(args), _clone(kwargs)
    try:
        with (
            warnings.catch_warnings(record=True),
            forbid_calls(*forbid, what=fn_name),
        ):
            got = student(*mine_args, **mine_kwargs)
    except NotImplementedError:
        _fail(
            what,
            "raises NotImplementedError: the exercise is not done yet",
            None,
        )
    except CheckFailed:
        raise
    except (
        Exception
    ) as exc:  # the learner's bug: report it with the inputs that caused it
        _fail(what, f"raised {type(exc).__name__}: {exc}", hint)
    pairs = [
        (f"argument {i + 1}{where}", b, a)
        for i, (x, y) in enumerate(zip(args, mine_args))
        for (where, b), (_, a) in zip(_tensors(x), _tensors(y))
    ]
    pairs += [
        (f"argument {k}{where}", b, a)
        for k in kwargs
        for (where, b), (_, a) in zip(
            _tensors(kwargs[k]), _tensors(mine_kwargs[k])
        )
    ]
    for arg, before, after in pairs:
        if not _same(before, after):
            _fail(
                what,
                f"changed its input ({arg}) in place",
                "a graded function must not modify its inputs: write x = x - m instead of x -= m, "
                "and avoid in-place methods such as masked_fill_ or div_ on tensors you were given",
            )
    return got


def compare(
    student: Callable,
    reference: Callable,
    cases: Iterable[Case],
    *,
    name: str | None = None,
    outputs: Sequence[str] | None = None,
    hint: str | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    forbid: Sequence[Any] = (),
    perturb: bool = True,
    devices: bool = True,
) -> None:
    """Call ``student`` and ``reference`` on each case and require equal results.

    ``outputs`` names the parts of a tuple result (e.g. ``("context", "weights")``) and
    says a tuple is expected.  ``forbid`` lists functions the student's call must not use
    (see ``forbid_calls``; the reference may use them).  The student's call must leave its
    inputs unchanged.  Tolerances default to ``derived_tolerance`` (what a correct
    formulation achieves in the input's dtype; ``perturb`` is passed on); explicit
    ``atol``/``rtol`` override them.  With ``devices``, the first case of each dtype is
    also run on the ``meta`` device (and CUDA when present) to catch tensors created on a
    fixed device.  Returns nothing, so that a test cell ending in ``compare(...)`` prints
    nothing.
    """
    fn_name = name or getattr(student, "__name__", "function")
    seen_dtypes: set = set()
    for case in cases:
        what = case.describe(fn_name)
        case_hint = case.hint or hint
        like = _as_tuple(
            reference(*_clone(case.args), **_clone(case.kwargs))
        )
        if atol is None and rtol is None:
            truth, atols, rtol_c = derived_tolerance(
                reference, case.args, case.kwargs, perturb=perturb, low=like
            )
        else:
            truth, atols, rtol_c = like, [atol] * len(like), rtol
        got = _run_student(
            student,
            case.args,
            case.kwargs,
            what=what,
            hint=case_hint,
            forbid=forbid,
            fn_name=fn_name,
        )
        if outputs is not None:
            if not isinstance(got, tuple) or len(got) != len(outputs):
                _fail(
                    what,
                    f"should return a tuple ({', '.join(outputs)}), got "
                    f"{type(got).__name__}"
                    + (
                        f" of length {len(got)}"
                        if isinstance(got, tuple)
                        else ""
                    ),
                    case_hint,
                )
            parts = list(zip(outputs, got, truth, like, atols))
        else:
            parts = [(None, got, truth[0], like[0], atols[0])]
        for part, g, tr, lk, at in parts:
            label = f"{what} -> {part}" if part else what
            if atol is None and rtol is None:
                _assert_matches(
                    g,
                    tr,
                    lk,
                    name=label,
                    atol=at,
                    rtol=rtol_c,
                    hint=case_hint,
                )
            else:
                assert_close(
                    g, lk, name=label, atol=atol, rtol=rtol, hint=case_hint
                )
        dtypes = tuple(
            t.dtype for _, t in _tensors(case.args) if t.is_floating_point()
        )
        # Nothing to move (only ints, say) or a module among the inputs (its weights stay put):
        # there is no device to follow, so nothing to check.
        movable = bool(_tensors((case.args, case.kwargs))) and not any(
            isinstance(a, torch.nn.Module)
            for a in (*case.args, *case.kwargs.values())
        )
        if (
            devices
            and movable
            and dtypes not in seen_dtypes
            and not _holds_module(student)
        ):
            seen_dtypes.add(dtypes)
            check_device_agnostic(
                student, case.args, case.kwargs, name=what, hint=case_hint
            )


def _holds_module(fn: Callable) -> bool:
    """True when ``fn`` is, or reaches, an ``nn.Module`` (its parameters stay on their own device,
    so moving only the inputs to ``meta`` would blame the learner for the test's own setup;
    module exercises move a copy of the module instead)."""
    Module = torch.nn.Module
    if isinstance(fn, Module) or isinstance(
        getattr(fn, "__self__", None), Module
    ):
        return True
    cells = [
        c.cell_contents
        for c in (getattr(fn, "__closure__", None) or ())
        if c.cell_contents is not c
    ]
    names = getattr(getattr(fn, "__code__", None), "co_names", ())
    globs = getattr(fn, "__globals__", {})
    return any(
        isinstance(v, Module)
        for v in [*cells, *(globs.get(n) for n in names)]
    )


def check_device_agnostic(
    fn: Callable,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    name: str = "function",
    hint: str | None = None,
    compare_cuda: bool = True,
) -> None:
    """``fn`` keeps its tensors on the input's device: run it on ``meta`` copies of the inputs,
    then on CUDA copies (a real GPU when there is one, else fake CUDA tensors, ``_simulated_cuda``;
    ``compare_cuda=False`` skips this) and require every output tensor on that device.

    ``meta`` and fake tensors have shapes but no data, so an answer that reads values (``.item()``,
    data-dependent indexing) cannot run there; that alone is not a mistake and is skipped.
    What fails is positive evidence of a fixed device: an output on another device, or a
    device-mismatch error inside the answer.
    """
    kwargs = kwargs or {}
    real_cuda = compare_cuda and torch.cuda.is_available()
    targets = ["meta"] + (
        ["cuda" if real_cuda else "simulated cuda"] if compare_cuda else []
    )
    for target in targets:
        device = "cuda" if target.endswith("cuda") else target
        try:
            with (
                _simulated_cuda()
                if target == "simulated cuda"
                else contextlib.nullcontext()
            ):
                moved_args = _map_tensors(
                    args, lambda t, target=target: _moved(t, target)
                )
                moved_kwargs = _map_tensors(
                    kwargs, lambda t, target=target: _moved(t, target)
                )
                with warnings.catch_warnings(record=True):
                    out = fn(*moved_args, **moved_kwargs)
        except _NoSimulation:
            continue
        except Exception as exc:
            text = str(exc)
            if "device" in text and (
                "expected" in text.lower() or "same device" in text
            ):
                _fail(
                    f"{name} on the {target} device",
                    f"raised {type(exc).__name__}: {text.splitlines()[0]}",
                    "a tensor inside your function was created on a fixed device (the CPU), or moved there: "
                    "create new tensors with device=x.device and dtype=x.dtype, or with torch.zeros_like(x) "
                    "and friends, and keep every step on x's device",
                )
            continue
        for where, t in _tensors(out):
            if t.device.type != device:
                _fail(
                    f"{name} on the {target} device",
                    f"output{where} is on {t.device}, expected the input's device ({device})",
                    "create new tensors with device=x.device and dtype=x.dtype (or torch.*_like), "
                    "never on a fixed device",
                )


class _NoSimulation(Exception):
    """This PyTorch cannot simulate a CUDA device (a build without CUDA): that check is skipped."""


@contextlib.contextmanager
def _simulated_cuda():
    """PyTorch's fake tensors on the ``cuda`` device: shapes, dtypes and devices without data or a
    GPU, with CUDA's device rules (a CPU tensor other than a 0-dim one meets a CUDA tensor: an
    error).  It reaches what ``meta`` cannot: a step that moves data to the CPU (``.cpu()``) and
    computes there, which a GPU grader would refuse and ``meta`` merely cannot run."""
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode

        # the learner's own CPU constants become fake too
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with mode:
            torch.empty(1, device="cuda")
    except Exception as exc:
        raise _NoSimulation(str(exc)) from exc
    with mode:
        yield


def _moved(t: Tensor, target: str) -> Tensor:
    """``t`` on ``target``: ``meta``, real ``cuda``, or a fake CUDA tensor (inside ``_simulated_cuda``)."""
    if target == "simulated cuda":
        return torch.empty_strided(
            t.shape, t.stride(), dtype=t.dtype, device="cuda"
        ).requires_grad_(t.requires_grad)
    return t.to(target)


def call(
    fn: Callable,
    *args: Any,
    name: str | None = None,
    hint: str | None = None,
    **kwargs: Any,
) -> Any:
    """Call a learner's function in a visible test: a crash inside it becomes a short message that
    names the function, the input shapes and a hint, instead of a raw traceback."""
    fn_name = name or getattr(fn, "__name__", "your function")
    what = Case(args, kwargs).describe(fn_name)
    try:
        with warnings.catch_warnings(record=True):
            return fn(*args, **kwargs)
    except NotImplementedError:
        raise CheckFailed(
            f"{what}: raises NotImplementedError: the exercise is not done yet"
        ) from None
    except CheckFailed:
        raise
    except Exception as exc:
        msg = f"{what}: raised {type(exc).__name__}: {exc}"
        if hint:
            msg += f"\nHint: {hint}"
        raise CheckFailed(msg) from None


def seeded(fn: Callable, *args: Any, seed: int = 0, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with PyTorch's global RNG seeded to ``seed`` and restored afterwards.

    Dropout draws its masks from the global RNG in the order it is applied, so the learner's
    module and the reference, run in train mode under the same seed, give the same output
    exactly when they apply the same dropout at the same places in the same order.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with warnings.catch_warnings(record=True):
            return fn(*args, **kwargs)


def transplant(
    reference: torch.nn.Module,
    learner: torch.nn.Module,
    *,
    name: str = "your module",
    hint: str | None = None,
) -> None:
    """Give the learner's module the reference's weights by structure, not by attribute name: the
    LayerNorms, then the Linear layers, in the order each module registers them (names and
    containers are the learner's choice).  The learner's settings that change no weight, LayerNorm's
    ``eps`` and GELU's ``approximate``, are copied into the reference, so the two compute the same
    function.  Raises ``CheckFailed`` naming both layouts when the layers differ."""

    def layers(module, kind):
        return [m for m in module.modules() if isinstance(m, kind)]

    def layout(items):
        return [
            tuple(m.weight.shape) + (("bias",) if m.bias is not None else ())
            for m in items
        ]

    for kind in (torch.nn.LayerNorm, torch.nn.Linear):
        mine, ref = layers(learner, kind), layers(reference, kind)
        if layout(mine) != layout(ref):
            _fail(
                name,
                f"its {kind.__name__} layers differ from the ones the given code builds, so the tests "
                f"cannot give it the course's weights: expected (in registration order) {layout(ref)}, "
                f"found {layout(mine)}",
                hint,
            )
        for a, b in zip(mine, ref):
            a.load_state_dict(b.state_dict())
            if kind is torch.nn.LayerNorm:
                b.eps = a.eps
    gelus, ref_gelus = (
        layers(learner, torch.nn.GELU),
        layers(reference, torch.nn.GELU),
    )
    if len(gelus) == len(ref_gelus):
        for a, b in zip(gelus, ref_gelus):
            b.approximate = a.approximate


# --------------------------------------------------------------------------- forbidden calls
def _code_key(code: types.CodeType) -> tuple:
    # Matching by file, name and line (not identity) also catches fresh copies of a module.
    return (code.co_filename, code.co_name, code.co_firstlineno)


def _resolve(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    parts = target.split(".")
    # longest importable module prefix, then attributes
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ValueError(f"forbid_calls: cannot resolve {target!r}")


def _label(target: Any) -> str:
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", "")
    # builtins report odd modules; prefer the public path
    for home in (
        torch,
        torch.nn.functional,
    ):
        if name and getattr(home, name, None) is target:
            return f"{home.__name__}.{name}"
    mod = getattr(target, "__module__", None) or ""
    return f"{mod}.{getattr(target, '__qualname__', getattr(target, '__name__', repr(target)))}".lstrip(
        "."
    )


class _Watch(TorchFunctionMode):
    def __init__(self, torch_targets: dict, seen: list):
        super().__init__()
        self.torch_targets = torch_targets
        self.seen = seen

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        label = self.torch_targets.get(func)
        if label is not None and label not in self.seen:
            self.seen.append(label)
        return func(*args, **(kwargs or {}))


class _DispatchWatch(TorchDispatchMode):
    """Sees the ATen operators every tensor operation reaches, however it was called (``torch.ops.aten``
    directly, private aliases, a function that calls the operator inside)."""

    def __init__(self, ops: dict, seen: list):
        super().__init__()
        self.ops = ops
        self.seen = seen

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        label = self.ops.get(func.overloadpacket)
        if label is not None and label not in self.seen:
            self.seen.append(label)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def forbid_calls(
    *targets: Any, what: str = "your function", hint: str | None = None
):
    """Fail if the code inside the ``with`` block calls any of ``targets``.

    Targets are callables or dotted names: torch functions and Tensor methods (seen
    through a ``TorchFunctionMode``, so aliases like ``from torch import softmax as s``
    are caught), Python functions (seen by their code object, also through aliases and
    fresh copies of a module), ``nn.Module`` classes (their ``forward``), and ATen operators
    (``"torch.ops.aten._softmax"``: seen where the dispatcher runs them, whatever called them).
    """
    torch_targets: dict = {}
    code_targets: dict = {}
    ops: dict = {}
    for target in targets:
        obj = _resolve(target)
        label = _label(target)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            ops[obj] = label
            continue
        if inspect.isclass(obj):
            fwd = getattr(obj, "forward", None)
            if isinstance(fwd, types.FunctionType):
                code_targets[_code_key(fwd.__code__)] = label
            continue
        if isinstance(obj, types.FunctionType):
            code_targets[_code_key(obj.__code__)] = label
        # torch passes the public function object to modes
        torch_targets[obj] = label

    seen: list = []

    def profiler(frame, event, arg):
        if event == "call":
            label = code_targets.get(_code_key(frame.f_code))
            if label is not None and label not in seen:
                seen.append(label)

    previous = sys.getprofile()
    sys.setprofile(profiler)
    try:
        with (
            _Watch(torch_targets, seen),
            _DispatchWatch(ops, seen) if ops else contextlib.nullcontext(),
        ):
            yield
    finally:
        sys.setprofile(previous)
    if seen:
        _fail(
            what,
            f"calls {', '.join(seen)}, which this exercise asks you to build yourself",
            hint
            or "write the computation with basic tensor operations (matmul, exp, sum, ...)",
        )


def passed(message: str) -> None:
    """Print a success line (visible tests end with one so learners see what passed)."""
    print(f"\N{CHECK MARK} {message}")
