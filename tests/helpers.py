"""What several test modules need: where things are, and the text that must never leak."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
from course_utils.grading.markers import (  # noqa: E402
    HIDDEN as _HIDDEN,
    SOLUTION as _SOLUTION,
)

MIN_LEN = 12  # shorter lines ("cases = []") are too generic to prove a leak


def chapter_ids() -> list[str]:
    return sorted(
        p.name
        for p in (ROOT / "solutions").iterdir()
        if (p / f"{p.name}.ipynb").is_file()
    )


def solution_notebook(cid: str) -> nbformat.NotebookNode:
    return nbformat.read(
        ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
    )


@lru_cache(maxsize=None)
def reference_definitions() -> dict[str, str]:
    """{name: source} of every top-level function and class in ``course_utils/references``
    (the first, when two modules define a name), as a learner would copy it from there."""
    import ast

    found: dict[str, str] = {}
    for path in sorted((ROOT / "course_utils" / "references").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.setdefault(
                    node.name, ast.get_source_segment(text, node)
                )
    return found


def _lines(blocks) -> set[str]:
    return {
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if len(line.strip()) >= MIN_LEN
    }


@lru_cache(maxsize=None)
def _blocks(
    cid: str, pattern: re.Pattern
) -> tuple[frozenset[str], frozenset[str]]:
    """(lines inside the pattern's blocks, lines elsewhere) of one source notebook."""
    inside, outside = [], []
    for cell in solution_notebook(cid).cells:
        inside += pattern.findall(cell.source)
        outside.append(pattern.sub("", cell.source))
    return frozenset(_lines(inside)), frozenset(_lines(outside))


def _distinctive(cid: str, pattern: re.Pattern) -> frozenset[str]:
    """Lines inside the pattern's blocks of ``cid`` that appear outside such blocks in no chapter
    (a line a chapter shows on purpose, e.g. an import, proves no leak)."""
    shown = frozenset().union(
        *(_blocks(other, pattern)[1] for other in chapter_ids())
    )
    return _blocks(cid, pattern)[0] - shown


@lru_cache(maxsize=None)
def hidden_test_lines_of(cid: str) -> frozenset[str]:
    return _distinctive(cid, _HIDDEN)


@lru_cache(maxsize=None)
def solution_lines_of(cid: str) -> frozenset[str]:
    return _distinctive(cid, _SOLUTION)


def hidden_test_lines() -> dict[str, frozenset[str]]:
    return {cid: hidden_test_lines_of(cid) for cid in chapter_ids()}


MISSING = "optional piece missing: "  # the prefix the end-of-run summary groups skips by (tests/conftest.py)


def missing_piece(piece: str, fix: str) -> None:
    """Skip a test that needs something a learner's machine may lack (a browser, a database
    server, root), saying what and how to get it; under CI, where make test installs it, fail.
    The end of the run lists each missing piece once, with its fix."""
    import os

    import pytest

    message = f"{MISSING}{piece}; {fix}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI: make test should have installed it)")
    pytest.skip(message)


def grading_sandbox() -> bool:
    """Whether the grading tests grade in the bubblewrap sandbox (course_utils.grading.sandbox):
    where it can start, and always under CI (make test installs bubblewrap; a missing one then
    fails loudly).  Elsewhere (no bubblewrap, not root, not Linux) they grade without it; the
    hostile-submission tests (tests/grading/test_sandbox.py) then skip and say why."""
    import os

    from course_utils.grading.sandbox import unavailable

    return bool(os.environ.get("CI")) or unavailable() is None
