"""Graded test cells run in a namespace of the grader's own, not the notebook's.

A test cell runs in the learner's kernel after the learner's code.  Run there as an ordinary
cell, every name it reads would resolve through the notebook's globals first: a notebook that
defines ``abs``, ``len`` or ``all``, rebinds ``torch`` or ``checks``, or replaces
``__builtins__`` would decide what the test's own calls do.  While grading, the grading worker
(``autograde.py``) sends each graded test cell wrapped as one call,
``__course_test_room__(source, preamble)``, and this module runs it:

* in a fresh namespace whose builtins are Python's own (``builtins``, checked against the
  snapshot taken before any learner code ran, ``integrity.py``);
* with the notebook's imports re-executed there first (``preamble``: the top-level imports of the
  cells the learner cannot edit), so ``torch``, ``math``, ``checks``... are the grader's modules,
  whatever the notebook bound to those names since;
* with every other name the test reads (the learner's answers: ``softmax``, ``ViT``; the
  chapter's objects: ``Q``, ``task``) taken from the notebook, and ``globals()`` meaning the
  notebook's namespace, as the tests that swap in the course's parts expect;
* after ``integrity.assert_untampered()``: a notebook that rebound a function of torch, Python's
  standard library or the builtins, or replaced a module in ``sys.modules``, fails the cell with
  the names.

Names the test binds are copied back to the notebook afterwards, as an ordinary cell would leave
them.  The pre-run hook puts ``run`` under its name before every cell, so no learner code runs
between that and the call.  This guards the tests against a notebook's names, in the same
process as the learner's code: the sandbox (``sandbox.py``) bounds what that code can reach, and
the static scan (``tamper.py``) flags code that goes after these hooks.
"""

from __future__ import annotations

import ast
import builtins

from . import integrity

NAME = "__course_test_room__"
_MISSING = object()
# Taken when the kernel starts, before learner code: what the room itself calls.
_exec, _compile, _parse, _check = (
    exec,
    compile,
    ast.parse,
    integrity.assert_untampered,
)


def wrap(source: str, preamble: str) -> str:
    """The cell the grader sends instead of a test cell's ``source``."""
    return f"{NAME}({source!r}, {preamble!r})"


def preamble_of(sources, answers=()) -> str:
    """The top-level ``import``/``from ... import`` statements of ``sources`` (code strings), in
    order, without the names in ``answers`` (what the learner's answers define: those the test
    must take from the notebook)."""
    lines = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                node.names = [
                    a
                    for a in node.names
                    if (a.asname or a.name).split(".")[0] not in answers
                ]
                if node.names and not any(a.name == "*" for a in node.names):
                    lines.append(ast.unparse(node))
    return "\n".join(lines)


def _free_names(tree: ast.AST) -> set[str]:
    """Names the code reads (a superset of what it needs from outside: cheap and safe)."""
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


class _Room:
    def __init__(self, shell):
        self.shell = shell
        self.builtins = builtins  # the module object itself: learner code can rebind its entries, not it

    def run(self, source: str, preamble: str) -> None:
        _check()
        user_ns = self.shell.user_ns
        room: dict = {"__builtins__": self.builtins, "__name__": "__main__"}
        _exec(_compile(preamble, "<the notebook's imports>", "exec"), room)
        tree = _parse(source)
        for name in _free_names(tree):
            if name in room or hasattr(self.builtins, name):
                continue  # the grader's module or Python's builtin, never the notebook's
            value = user_ns.get(name, _MISSING)
            if value is not _MISSING:
                room[name] = value
        # tests swap the course's parts into the notebook's namespace
        room["globals"] = lambda: user_ns
        entry = dict(room)
        try:
            _exec(_compile(tree, self._filename(source), "exec"), room)
        finally:
            for name, value in room.items():
                if (
                    name in ("__builtins__", "globals")
                    or entry.get(name, _MISSING) is value
                ):
                    continue
                user_ns[name] = value

    def _filename(self, source: str) -> str:
        """A name under which tracebacks show the test's lines (IPython's cell cache), as for any cell."""
        try:
            return self.shell.compile.cache(source)
        except Exception:
            return "<graded test cell>"

    def before_cell(self, info=None) -> None:
        self.shell.user_ns[NAME] = self.run


def install(shell) -> None:
    """Register the pre-run hook on an IPython shell (once) and pin ``sys.modules``; the grading
    kernel calls it at start-up (``cell_hooks.install``)."""
    if getattr(shell, "_course_test_room", None) is not None:
        return
    integrity.pin_modules()
    shell._course_test_room = room = _Room(shell)
    shell.events.register("pre_run_cell", room.before_cell)
