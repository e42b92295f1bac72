"""A snapshot of the functions the grader relies on, taken before any learner code runs.

``course_utils`` imports this module in its ``__init__``, and every notebook imports
``course_utils`` in its first cell, so the snapshot holds PyTorch's and Python's own functions.
A hidden test calls ``assert_untampered()`` (``pristine()`` does it for them): if a notebook has
since rebound one of them (``torch.isclose = ...``, ``torch.Tensor.all = ...``,
``builtins.abs = ...``), the check fails with the name, so the submission loses the hidden
tests' points instead of passing them with a disabled check.  The grading driver also scans
the submission's source for such code and flags it in the grade export (``tamper.py``).
"""
from __future__ import annotations

import builtins
import sys

import torch
import torch.nn.functional as F

_HOMES = {"torch": torch, "torch.nn.functional": F, "torch.Tensor": torch.Tensor, "builtins": builtins}


def _public(home) -> dict[str, int]:
    out = {}
    for name in dir(home):
        if name.startswith("__") and name not in ("__eq__", "__lt__", "__gt__", "__le__", "__ge__", "__ne__",
                                                  "__bool__", "__float__", "__abs__", "__sub__", "__getitem__"):
            continue
        try:
            obj = getattr(home, name)
        except Exception:  # noqa: BLE001 - lazily failing attributes are not functions we rely on
            continue
        if callable(obj):
            out[name] = id(obj)
    return out


# Builtins the checks use.  Not all of them: the kernel itself swaps ``input`` on every cell,
# and ``_`` holds the last output.
_BUILTINS = ("abs", "all", "any", "bool", "float", "int", "isinstance", "issubclass", "len", "max", "min",
             "round", "sum", "str", "repr", "range", "zip", "enumerate", "getattr", "setattr", "hasattr",
             "type", "tuple", "list", "dict", "set", "sorted", "map", "filter", "iter", "next", "callable",
             "id", "hash", "divmod", "pow", "format", "super", "object", "Exception", "AssertionError")


def take() -> dict[str, dict[str, int]]:
    """{home: {name: id(function)}} for the public callables of torch, F and Tensor, and the builtins
    the checks use."""
    snap = {label: _public(home) for label, home in _HOMES.items() if label != "builtins"}
    snap["builtins"] = {name: id(getattr(builtins, name)) for name in _BUILTINS}
    return snap


SNAPSHOT = take()
# Hold references so that the ids above can never be reused by other objects.
_KEEP = [getattr(_HOMES[label], name) for label in SNAPSHOT for name in SNAPSHOT[label]]


def changes(snapshot: dict | None = None) -> list[str]:
    """Names whose function differs from the snapshot (empty when nothing was rebound)."""
    snapshot = snapshot or _original_snapshot()
    found = []
    for label, home in _HOMES.items():
        for name, ident in snapshot.get(label, {}).items():
            now = getattr(home, name, None)
            if id(now) != ident and not _wraps(now, ident):
                found.append(f"{label}.{name}")
    return found


def _wraps(obj, ident: int) -> bool:
    """PyTorch wraps a few of its own functions on first use of a subsystem (importing
    torchvision wraps ``torch.manual_seed`` for the compiler, with ``functools.wraps``): a
    wrapper whose ``__wrapped__`` chain reaches the original is not a rebinding."""
    for _ in range(8):
        obj = getattr(obj, "__wrapped__", None)
        if obj is None:
            return False
        if id(obj) == ident:
            return True
    return False


def _original_snapshot() -> dict:
    # pristine() re-executes the package under another name; the snapshot that counts is the
    # one taken by the first import, before the notebook's own code ran.
    first = sys.modules.get("course_utils.grading.integrity")
    return getattr(first, "SNAPSHOT", SNAPSHOT)


def assert_untampered() -> None:
    """Raise an AssertionError naming every rebound function, if any."""
    found = changes()
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise AssertionError(
            f"Tampering detected: this notebook rebinds {shown}, which the grader relies on, so its hidden "
            "tests cannot be trusted and score 0. Remove the code that assigns to torch, Tensor or builtins "
            "functions and submit again.")
