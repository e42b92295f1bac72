"""nbgrader's markers in the course's notebooks: the one home for finding and removing them.

``### BEGIN SOLUTION`` ... ``### END SOLUTION`` wraps an answer (the release replaces it with
``STUB``); ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` wraps tests a learner never
sees.  The book's pages (tools/book_pages.py) and the tests that prove nothing leaks use these.

The course's own tag ``skip-while-grading`` marks a cell that shows the course's results and
grades nothing (a figure of stored runs, a timing); the grading driver does not run it
(``autograde.py``), which saves seconds per submission.  ``skip_problems`` is the rule such a
cell must keep: it is neither an answer nor a test, and nothing that runs after it reads a name
it binds.
"""

from __future__ import annotations

import re

__all__ = [
    "MARKERS",
    "STUB",
    "HIDDEN",
    "SOLUTION",
    "SKIP_WHILE_GRADING",
    "strip_hidden_tests",
    "strip_solution_markers",
    "replace_solutions_with_stub",
    "skipped_while_grading",
    "skip_problems",
    "defined_names",
    "reads_and_binds",
    "imported_modules",
]

MARKERS = (
    "### BEGIN SOLUTION",
    "### END SOLUTION",
    "### BEGIN HIDDEN TESTS",
    "### END HIDDEN TESTS",
)
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # as autograde/nbgrader_config.py's code_stub
# group 1: the hidden code
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)
# group 1: the answer
SOLUTION = re.compile(r"### BEGIN SOLUTION(.*?)### END SOLUTION", re.S)
_HIDDEN_WITH_INDENT = re.compile(
    r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*", re.S
)
_SOLUTION_MARKER = re.compile(
    r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M
)
# a cell tag: see the module docstring
SKIP_WHILE_GRADING = "skip-while-grading"
_SOLUTION_BLOCK = re.compile(
    r"^([ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*$",
    re.M | re.S,
)


def strip_hidden_tests(source: str) -> str:
    """``source`` without its hidden tests (markers included)."""
    return _HIDDEN_WITH_INDENT.sub("", source).strip("\n")


def strip_solution_markers(source: str) -> str:
    """``source`` with its answers kept and the solution markers removed (the book shows answers)."""
    return _SOLUTION_MARKER.sub("", source).strip("\n")


def replace_solutions_with_stub(source: str) -> str:
    """Each solution block becomes ``STUB``, indented like the block (as nbgrader's release does)."""
    return _SOLUTION_BLOCK.sub(
        lambda m: "\n".join(m.group(1) + line for line in STUB.splitlines()),
        source,
    )


def skipped_while_grading(cell) -> bool:
    """Whether the grading driver leaves ``cell`` out (its tag, on a cell that is neither answer nor test)."""
    meta = cell.get("metadata", {})
    grading = meta.get("nbgrader", {})
    return (
        cell.get("cell_type") == "code"
        and SKIP_WHILE_GRADING in meta.get("tags", [])
        and not grading.get("solution")
        and not grading.get("grade")
    )


def _parse(source: str):
    import ast

    return ast.parse(
        "\n".join(
            "" if ln.lstrip().startswith(("%", "!")) else ln
            for ln in source.splitlines()
        )
    )


def defined_names(source: str) -> dict[str, int]:
    """{name: first line that binds it} for what code cell ``source`` binds at its top level
    (functions, classes, imports, assignments); IPython magics are skipped, bad syntax binds nothing."""
    import ast

    try:
        tree = _parse(source)
    except SyntaxError:
        return {}
    binds: dict[str, int] = {}
    for node in tree.body:
        if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            found = {node.name}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found = {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            found = {
                n.id
                for n in _own_names(node)
                if isinstance(n.ctx, ast.Store)
            }
        for name in found:
            binds.setdefault(name, node.lineno)
    return binds


def _own_names(node, inner: frozenset = frozenset()):
    """The ``ast.Name`` nodes under ``node`` that name the cell's variables: a comprehension's
    own loop variables (``p`` in ``sum(p.numel() for p in ps)``) belong to the comprehension."""
    import ast

    if isinstance(node, ast.Name):
        if node.id not in inner:
            yield node
        return
    if isinstance(
        node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
    ):
        inner = inner | {
            n.id
            for g in node.generators
            for n in ast.walk(g.target)
            if isinstance(n, ast.Name)
        }
    for child in ast.iter_child_nodes(node):
        yield from _own_names(child, inner)


def imported_modules(source: str) -> list[str]:
    """The absolute modules code cell ``source`` imports anywhere (``from a.b import c`` gives
    ``a.b`` and ``a.b.c``, which may be a module), in order; bad syntax imports nothing."""
    import ast

    try:
        tree = _parse(source)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and not node.level
        ):
            names = [node.module] + [
                f"{node.module}.{a.name}"
                for a in node.names
                if a.name != "*"
            ]
        else:
            continue
        found += [n for n in names if n not in found]
    return found


def reads_and_binds(source: str) -> tuple[set[str], set[str]]:
    """(names code cell ``source`` reads before binding them itself, names it binds at its top level)."""
    import ast

    binds = defined_names(source)
    # A read on the line that binds (x = x + 1) or before it needs the value from outside.
    reads = {
        n.id
        for n in _own_names(_parse(source))
        if isinstance(n.ctx, ast.Load)
        and n.lineno <= binds.get(n.id, n.lineno)
    }
    return reads, set(binds)


def skip_problems(nb) -> list[str]:
    """Why the ``skip-while-grading`` cells of notebook ``nb`` cannot be left out (empty: they can).

    A name a skipped cell binds is needed when a later cell that runs reads it before binding it
    itself, and no cell that runs in between binds it first."""
    problems = []
    code = [
        (i, c, *reads_and_binds(c.source))
        for i, c in enumerate(nb.cells, 1)
        if c.get("cell_type") == "code"
    ]
    for i, cell, _, binds in code:
        if SKIP_WHILE_GRADING not in cell.get("metadata", {}).get(
            "tags", []
        ):
            continue
        if not skipped_while_grading(cell):
            problems.append(
                f"cell {i} is an answer or a test: it always runs"
            )
            continue
        live = set(binds)
        for j, later, reads, later_binds in code:
            if j <= i or skipped_while_grading(later):
                continue
            used = sorted(live & reads)
            if used:
                problems.append(
                    f"cell {i} is skipped while grading but cell {j} reads {', '.join(used)}, "
                    "which it binds"
                )
            live -= later_binds
    return problems
