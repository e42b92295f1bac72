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
import sys
import types
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

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


def assert_shape(got: Any, shape: Sequence[int], *, name: str = "output", hint: str | None = None) -> None:
    """``got`` is a tensor of exactly ``shape``."""
    if not isinstance(got, Tensor):
        _fail(name, f"expected a torch.Tensor of shape {tuple(shape)}, got {type(got).__name__}", hint)
    if tuple(got.shape) != tuple(shape):
        _fail(name, f"shape is {tuple(got.shape)}, expected {tuple(shape)}", hint)


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
            hint or "create new tensors with dtype=x.dtype, device=x.device, or use torch.*_like",
        )
    if got.device != expected.device:
        _fail(name, f"is on {got.device}, expected {expected.device} (the input's device)", hint)
    wide = torch.float64 in (got.dtype, expected.dtype)
    atol = (1e-10 if wide else 1e-5) if atol is None else atol
    rtol = (1e-8 if wide else 1e-5) if rtol is None else rtol
    g = got.detach().to(torch.float64).cpu()
    e = expected.detach().to(torch.float64).cpu()
    bad_nan = torch.isnan(g) & ~torch.isnan(e)
    if bad_nan.any():
        idx = tuple(int(i) for i in bad_nan.nonzero()[0])
        _fail(name, f"has NaN at index {list(idx)} (and {int(bad_nan.sum()) - 1} more) where {e[idx].item():.6g} was expected", hint)
    ok = torch.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
    if not bool(ok.all()):
        idx = tuple(int(i) for i in (~ok).nonzero()[0])
        n_bad = int((~ok).sum())
        where = f"index {list(idx)}" if idx else "the value"
        _fail(
            name,
            f"{n_bad} of {ok.numel()} entries differ; first at {where}: got {g[idx].item():.6g}, "
            f"expected {e[idx].item():.6g} (tolerance atol={atol:g}, rtol={rtol:g})",
            hint,
        )


def rows_sum_to_one(weights: Tensor, *, dim: int = -1, name: str = "weights", allow_zero_rows: bool = False,
                    hint: str | None = None) -> None:
    """Every slice of ``weights`` along ``dim`` is non-negative and sums to 1 (or is all 0)."""
    if not isinstance(weights, Tensor):
        _fail(name, f"expected a tensor, got {type(weights).__name__}", hint)
    w = weights.detach().to(torch.float64)
    if torch.isnan(w).any():
        _fail(name, "contains NaN", hint)
    if (w < -1e-7).any():
        _fail(name, f"has negative entries (min {w.min().item():.3g}); weights are probabilities", hint)
    sums = w.sum(dim=dim)
    good = (sums - 1).abs() < 1e-5
    if allow_zero_rows:
        good |= sums.abs() < 1e-12
    if not bool(good.all()):
        idx = tuple(int(i) for i in (~good).nonzero()[0])
        _fail(name, f"slice {list(idx)} along dim {dim} sums to {sums[idx].item():.6g}, not 1", hint
              or "normalise over the keys (the last dim)")


def random_tensor(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0,
                  device: str | torch.device = "cpu") -> Tensor:
    """A reproducible standard-normal tensor times ``scale``."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype=dtype, device=device)


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
        parts = [f"<{t.dtype} {_shape(t)}>" if isinstance(t, Tensor) else repr(t) for t in self.args]
        parts += [f"{k}=" + (f"<{v.dtype} {_shape(v)}>" if isinstance(v, Tensor) else repr(v))
                  for k, v in self.kwargs.items()]
        return f"{fn_name}({', '.join(parts)})"


def _clone(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj.clone()
    if isinstance(obj, (tuple, list)):
        return type(obj)(_clone(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


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
) -> None:
    """Call ``student`` and ``reference`` on each case and require equal results.

    ``outputs`` names the parts of a tuple result (e.g. ``("context", "weights")``) and
    says a tuple is expected.  ``forbid`` lists functions the student's call must not use
    (see ``forbid_calls``; the reference may use them).  Inputs are cloned, so a function
    that modifies its input in place cannot change what the reference sees.  Returns
    nothing, so that a test cell ending in ``compare(...)`` prints nothing.
    """
    fn_name = name or getattr(student, "__name__", "function")
    for case in cases:
        what = case.describe(fn_name)
        case_hint = case.hint or hint
        expected = reference(*_clone(case.args), **_clone(case.kwargs))
        try:
            with forbid_calls(*forbid, what=fn_name):
                got = student(*_clone(case.args), **_clone(case.kwargs))
        except NotImplementedError:
            _fail(what, "raises NotImplementedError: the exercise is not done yet", None)
        except CheckFailed:
            raise
        except Exception as exc:  # the learner's bug: report it with the inputs that caused it
            _fail(what, f"raised {type(exc).__name__}: {exc}", case_hint)
        if outputs is not None:
            if not isinstance(got, tuple) or len(got) != len(outputs):
                _fail(what, f"should return a tuple ({', '.join(outputs)}), got "
                      f"{type(got).__name__}" + (f" of length {len(got)}" if isinstance(got, tuple) else ""),
                      case_hint)
            for part, g, e in zip(outputs, got, expected):
                assert_close(g, e, name=f"{what} -> {part}", atol=atol, rtol=rtol, hint=case_hint)
        else:
            assert_close(got, expected, name=f"{what}", atol=atol, rtol=rtol, hint=case_hint)


# --------------------------------------------------------------------------- forbidden calls
def _code_key(code: types.CodeType) -> tuple:
    # Matching by file, name and line (not identity) also catches fresh copies of a module.
    return (code.co_filename, code.co_name, code.co_firstlineno)


def _resolve(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # longest importable module prefix, then attributes
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
    for home in (torch, torch.nn.functional):  # builtins report odd modules; prefer the public path
        if name and getattr(home, name, None) is target:
            return f"{home.__name__}.{name}"
    mod = getattr(target, "__module__", None) or ""
    return f"{mod}.{getattr(target, '__qualname__', getattr(target, '__name__', repr(target)))}".lstrip(".")


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


@contextlib.contextmanager
def forbid_calls(*targets: Any, what: str = "your function", hint: str | None = None):
    """Fail if the code inside the ``with`` block calls any of ``targets``.

    Targets are callables or dotted names: torch functions and Tensor methods (seen
    through a ``TorchFunctionMode``, so aliases like ``from torch import softmax as s``
    are caught), Python functions (seen by their code object, also through aliases and
    fresh copies of a module), and ``nn.Module`` classes (their ``forward``).
    """
    torch_targets: dict = {}
    code_targets: dict = {}
    for target in targets:
        obj = _resolve(target)
        label = _label(target)
        if inspect.isclass(obj):
            fwd = getattr(obj, "forward", None)
            if isinstance(fwd, types.FunctionType):
                code_targets[_code_key(fwd.__code__)] = label
            continue
        if isinstance(obj, types.FunctionType):
            code_targets[_code_key(obj.__code__)] = label
        torch_targets[obj] = label  # torch passes the public function object to modes

    seen: list = []

    def profiler(frame, event, arg):
        if event == "call":
            label = code_targets.get(_code_key(frame.f_code))
            if label is not None and label not in seen:
                seen.append(label)

    previous = sys.getprofile()
    sys.setprofile(profiler)
    try:
        with _Watch(torch_targets, seen):
            yield
    finally:
        sys.setprofile(previous)
    if seen:
        _fail(what, f"calls {', '.join(seen)}, which this exercise asks you to build yourself",
              hint or "write the computation with basic tensor operations (matmul, exp, sum, ...)")


def passed(message: str) -> None:
    """Print a success line (visible tests end with one so learners see what passed)."""
    print(f"\N{CHECK MARK} {message}")
