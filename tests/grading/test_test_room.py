"""Graded test cells run in the grader's own namespace (course_utils.grading.test_room): what a
notebook binds to a builtin's name, to ``__builtins__`` or to a module's name does not reach the
tests, and a standard-library function rebound through ``sys.modules`` fails them by name.

The room is checked directly (a notebook namespace and a test source), then through the grading
driver on chapter 01 with submissions that attack the hidden tests.  Plain ``nbgrader autograde``,
which runs test cells as ordinary cells, grades the same attacks first: it gives them the points
(each attack works where nothing stops it), the course's grader does not.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from course_utils.grading import test_room
from course_utils.grading.autograde import grade
from tests.conftest import nbgrader
from tests.grading.test_autograde_driver import (
    CID,
    SANDBOX,
    _reset,
    max_points,
    scores,
    small_course,  # noqa: F401
)
from tests.e2e.test_grading_e2e import _submission, _write

# one worker, one released course for the grading tests
pytestmark = pytest.mark.xdist_group("test-room")

_ROOM_CHECK = r"""
import builtins, math, sys, types
import torch
import course_utils
from course_utils.grading import test_room, integrity
shell = types.SimpleNamespace(user_ns={}, events=None)
integrity.pin_modules()
room = test_room._Room(shell)
ns = shell.user_ns
ns.update(__builtins__=builtins, softmax=lambda x: x, Q=torch.ones(2))
# The notebook shadows builtins, a module name and __builtins__ itself.
exec("def abs(x):\n    return 0\nlen = 7\ntorch = None\n__builtins__ = {'__import__': None}", ns)
preamble = "import math\nimport torch"
room.run("result = (abs(-2), len([1, 2]), torch.ones(1).item(), softmax(3), float(Q.sum()))\n"
         "globals()['seen_by_notebook'] = True", preamble)
assert ns["result"] == (2, 2, 1.0, 3, 2.0), ns["result"]   # builtins and modules the grader's; answers the notebook's
assert ns["seen_by_notebook"] is True                       # globals() is the notebook's namespace
assert ns["torch"] is None and ns["len"] == 7               # the notebook's own names are left as they were
# A standard-library function rebound through sys.modules: every test cell fails, naming it.
original = math.isclose
sys.modules["math"].isclose = lambda *a, **k: True
try:
    room.run("x = 1", preamble)
except AssertionError as exc:
    assert "math.isclose" in str(exc), exc
    print("DETECTED math.isclose")
finally:
    math.isclose = original
# A module replaced in sys.modules.
real = sys.modules["inspect"]
sys.modules["inspect"] = types.ModuleType("inspect")
try:
    room.run("x = 1", preamble)
except AssertionError as exc:
    assert "sys.modules['inspect']" in str(exc), exc
    print("DETECTED sys.modules['inspect']")
finally:
    sys.modules["inspect"] = real
room.run("x = 1", preamble)  # restored: runs again
print("ROOM OK")
"""


def test_the_room_resolves_names_to_the_graders_objects():
    out = subprocess.run(
        [sys.executable, "-c", _ROOM_CHECK],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [
        "DETECTED",
        "math.isclose",
        "DETECTED",
        "sys.modules['inspect']",
        "ROOM",
        "OK",
    ], out.stdout


def test_the_preamble_keeps_imports_and_leaves_out_the_answers():
    sources = [
        "import math\nx = 1\nif x:\n    import os",
        "from torch import nn, softmax as sm\nimport torch.nn.functional as F",
    ]
    assert (
        test_room.preamble_of(sources, answers={"sm"})
        == "import math\nfrom torch import nn\nimport torch.nn.functional as F"
    )
    from course_utils.grading.markers import defined_names

    assert set(
        defined_names(
            "def f():\n    y = 2\nclass A: pass\nz, w = 1, 2\nimport a.b"
        )
    ) == {"f", "A", "z", "w", "a"}
    assert (
        test_room.wrap("x = 1", "import math")
        == "__course_test_room__('x = 1', 'import math')"
    )


# ----------------------------------------------------------------- through the grading driver
# Chapter 01's softmax with the global max subtracted passes the visible tests and fails only the
# hidden ones (inputs of magnitude 1e4): each attack below tries to win those points back.
_WRONG = (
    "shifted = x - x.amax(dim=dim, keepdim=True)",
    "shifted = x - x.max()",
)
# A notebook-level global that shadows the builtins: __builtins__ itself, whose __import__ hands
# the hidden test a pristine() whose comparisons check nothing.
_SHADOW = r"""
import builtins as _b
_real_import = _b.__import__
class _Lenient:
    def __init__(self, real):
        self._real = real
    def __getattr__(self, name):
        return getattr(self._real, name)
    def compare(self, *args, **kwargs):
        return None
def _pristine():
    real = _real_import("course_utils.grading", fromlist=["pristine"]).pristine()
    copy = _Lenient(real)
    copy.checks = _Lenient(real.checks)
    return copy
class _Grading:
    pristine = staticmethod(_pristine)
def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if name == "course_utils.grading" and fromlist and "pristine" in fromlist:
        return _Grading
    return _real_import(name, globals, locals, fromlist, level)
_fake = dict(vars(_b))
_fake["__import__"] = _import
__builtins__ = _fake
"""
# A standard-library function rebound through sys.modules: sys.setprofile, with which the checks
# see a call of a forbidden function (here the course's own softmax, which the answer calls).
_COPY = (
    "shifted = x - x.amax(dim=dim, keepdim=True)",
    "from course_utils.references.attention import softmax as _course_softmax\n"
    "    return _course_softmax(x, dim=dim)",
)
_REBIND = 'import sys as _s\n_s.modules["sys"].setprofile = lambda function: None\n'
# A correct answer written next to innocent names that happen to be builtins' and modules'.
_INNOCENT = (
    "sum = 3.0\nmax = [1, 2]\ninput = 'abc'\nlen_ = len\nreference = None\n"
)


def _edit(replace=None, append=""):
    def edit(nb):
        cell = next(
            c
            for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax"
        )
        if replace:
            assert replace[0] in cell.source
            cell.source = cell.source.replace(*replace)
        cell.source += "\n" + append

    return edit


def _write_attacks(course):
    _reset(course)
    _write(
        course,
        CID,
        "shadow",
        _submission(course, CID, _edit(_WRONG, _SHADOW)),
    )
    _write(
        course,
        CID,
        "rebind",
        _submission(course, CID, _edit(_COPY, _REBIND)),
    )
    _write(course, CID, "wrong", _submission(course, CID, _edit(_WRONG)))
    _write(
        course,
        CID,
        "innocent",
        _submission(course, CID, _edit(None, _INNOCENT)),
    )


_BLIND = r"""
import sys
from course_utils.grading import checks
from course_utils.references import attention
sys.modules["sys"].setprofile = lambda function: None
with checks.forbid_calls(attention.softmax, what="softmax"):
    attention.softmax(__import__("torch").ones(3))
print("NOT SEEN")
"""


def test_rebinding_sys_setprofile_blinds_the_forbidden_call_check():
    """The control of the rebinding attack: it does hide a forbidden call from the checks, so only
    the integrity check stands between it and the points."""
    out = subprocess.run(
        [sys.executable, "-c", _BLIND],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "NOT SEEN" in out.stdout, (
        out.stdout,
        out.stderr[-2000:],
    )


@pytest.mark.slow
def test_plain_nbgrader_gives_the_shadowing_attack_the_points(small_course):
    """The control: run as ordinary cells, the shadowing attack wins the hidden test; the
    rebinding loses it to the integrity check, which hidden tests run through pristine()."""
    _write_attacks(small_course)
    nbgrader(small_course, "autograde", CID, "--force")
    got = scores(small_course)
    full = max_points(small_course)
    # the mistake itself is caught
    assert got["wrong"]["test_softmax"] == 0, got["wrong"]
    assert got["shadow"]["test_softmax"] == full["test_softmax"], got[
        "shadow"
    ]
    assert got["rebind"]["test_softmax"] == 0, got["rebind"]


@pytest.mark.slow
def test_the_grader_takes_the_points_back_and_says_why(small_course):
    _write_attacks(small_course)
    status = grade(
        small_course,
        CID,
        jobs=1,
        force=True,
        progress=lambda line: None,
        sandbox=SANDBOX,
    )
    got = scores(small_course)
    full = max_points(small_course)
    assert got["innocent"] == full, (
        f"a correct answer next to innocent names lost points: {got['innocent']}"
    )
    # (the innocent answer is the book's own: flagged as the published answer, for nothing else)
    assert all(
        "graded without sandbox" in f or "published answer" in f
        for f in status["innocent"]["flags"]
    )
    assert got["wrong"]["test_softmax"] == 0
    assert got["shadow"]["test_softmax"] == 0, (
        f"shadowing __builtins__ won the hidden test: {got['shadow']}"
    )
    assert got["rebind"]["test_softmax"] == 0, (
        f"rebinding sys.setprofile won the hidden test: {got['rebind']}"
    )
    # Both are flagged for the instructor, with the line that did it.
    assert any("__builtins__" in f for f in status["shadow"]["flags"]), (
        status["shadow"]
    )
    assert any("sys.setprofile" in f for f in status["rebind"]["flags"]), (
        status["rebind"]
    )
    # In the learner's graded notebook, the failed test names the rebinding.
    import nbformat

    nb = nbformat.read(
        small_course
        / "autograde"
        / "autograded"
        / "rebind"
        / CID
        / f"{CID}.ipynb",
        as_version=4,
    )
    errors = [
        o.get("evalue", "")
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert errors and "sys.setprofile" in errors[0], errors
