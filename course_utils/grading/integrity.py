"""A snapshot of the functions the grader relies on, taken before any learner code runs.

A grading kernel imports this module when it starts (``cell_hooks.install``; the fork server
even earlier, ``forkserver.WARM_MODULES``), before any learner code, so the snapshot holds
PyTorch's and Python's own functions:
torch, ``torch.nn.functional``, ``Tensor``, ``nn.Module``, the builtins and the standard-library
modules the checks use (``math``, ``inspect``, ``warnings``...).  A grading kernel also pins
every module in ``sys.modules`` when it starts (``pin_modules``, called by ``test_room.install``).
Every graded test cell (``test_room.py``) and ``pristine()`` call ``assert_untampered()``: if a
notebook has since rebound one of those functions (``torch.isclose = ...``,
``sys.modules["math"].isclose = ...``, ``builtins.abs = ...``) or put another object in
``sys.modules`` under a pinned name, the check fails with the names, so the submission loses
the tests' points instead of passing them with a disabled check.  The grading driver also scans
the submission's source for such code and flags it in the grade export (``tamper.py``).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import copy
import dataclasses
import functools
import importlib
import inspect
import itertools
import math
import operator
import random
import re
import statistics
import sys
import types
import warnings

import torch
import torch.nn.functional as F

_HOMES = {
    "torch": torch,
    "torch.nn.functional": F,
    "torch.Tensor": torch.Tensor,
    "torch.nn.Module": torch.nn.Module,
    "torch.testing": torch.testing,
    "torch.linalg": torch.linalg,
}
# The standard library the checks and the hidden tests use: the same in every kernel, and
# reachable (and so rebindable) through sys.modules.
_STDLIB = {
    m.__name__: m
    for m in (
        collections,
        contextlib,
        copy,
        dataclasses,
        functools,
        importlib,
        inspect,
        itertools,
        math,
        operator,
        random,
        re,
        statistics,
        sys,
        types,
        warnings,
    )
}
_HOMES.update(_STDLIB)
# Functions the interpreter or the kernel itself swaps while it runs, not learner code: the
# kernel's output and error hooks, and IPython's per-cell ``input``.
# (warnings.catch_warnings swaps the display of warnings while it is active, pytest's around each
# test; the standard library's private names are its own business.)
_VOLATILE = {
    "sys": {"displayhook", "excepthook", "breakpointhook", "unraisablehook"},
    "warnings": {"showwarning", "formatwarning"},
    "builtins": {
        "input",
        "display",
        "get_ipython",
        "help",
        "exit",
        "quit",
        "copyright",
        "credits",
        "license",
        "_",
        "__",
        "___",
    },
}


def _public(home) -> dict[str, int]:
    out = {}
    for name in dir(home):
        if name.startswith("__") and name not in (
            "__eq__",
            "__lt__",
            "__gt__",
            "__le__",
            "__ge__",
            "__ne__",
            "__bool__",
            "__float__",
            "__abs__",
            "__sub__",
            "__getitem__",
        ):
            continue
        try:
            obj = getattr(home, name)
        except Exception:
            continue
        if callable(obj):
            out[name] = id(obj)
    return out


def _builtins() -> dict[str, int]:
    return {
        name: id(getattr(builtins, name))
        for name in dir(builtins)
        if name not in _VOLATILE["builtins"]
        and callable(getattr(builtins, name))
    }


def take() -> dict[str, dict[str, int]]:
    """{home: {name: id(function)}} for the public callables of each home in ``_HOMES``, and
    every builtin callable (``__import__`` included)."""
    snap = {
        label: {
            n: i
            for n, i in _public(home).items()
            if n not in _VOLATILE.get(label, ())
            and not (label in _STDLIB and n.startswith("_"))
        }
        for label, home in _HOMES.items()
    }
    snap["builtins"] = _builtins()
    return snap


SNAPSHOT = take()
# Hold references so that the ids above can never be reused by other objects.
_KEEP = [
    getattr(_HOMES.get(label, builtins), name)
    for label in SNAPSHOT
    for name in SNAPSHOT[label]
]
_PINNED: dict[
    str, types.ModuleType
] = {}  # sys.modules when the grading kernel started


def pin_modules() -> None:
    """Remember every module now in ``sys.modules``: a grading kernel calls this before any learner code."""
    _PINNED.update(
        (name, module)
        for name, module in list(sys.modules.items())
        if module is not None
    )


def changes(snapshot: dict | None = None) -> list[str]:
    """Names whose function differs from the snapshot (empty when nothing was rebound)."""
    snapshot = snapshot or _original_snapshot()
    found = []
    # pristine() copies: the first import's homes
    first = sys.modules.get("course_utils.grading.integrity")
    homes = dict(getattr(first, "_HOMES", _HOMES), builtins=builtins)
    for label, home in homes.items():
        if sys.modules.get(label, home) is not home:
            found.append(f"sys.modules[{label!r}]")
            continue
        for name, ident in snapshot.get(label, {}).items():
            now = getattr(home, name, None)
            if id(now) != ident and not _wraps(now, ident):
                found.append(f"{label}.{name}")
    pinned = getattr(first, "_PINNED", _PINNED)
    found += [
        f"sys.modules[{name!r}]"
        for name, module in list(pinned.items())
        if sys.modules.get(name, module) is not module
        and f"sys.modules[{name!r}]" not in found
    ]
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
        shown = ", ".join(found[:5]) + (
            f" and {len(found) - 5} more" if len(found) > 5 else ""
        )
        raise AssertionError(
            f"Tampering detected: this notebook rebinds {shown}, which the grader relies on, so its hidden "
            "tests cannot be trusted and score 0. Remove the code that assigns to functions of torch, Python's "
            "standard library or builtins (directly or through sys.modules) and submit again."
        )
