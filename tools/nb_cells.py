"""Cell factories for writing a chapter's nbgrader source notebook from a script.

The notebook in ``solutions/<id>/<id>.ipynb`` is the single source of truth; these helpers
only save typing nbgrader metadata by hand when a chapter is first drafted (or when a
script rewrites it).  Usage::

    from tools.nb_cells import md, code, solution, tests, write
    cells = [md("# Title"), solution("softmax", "def softmax(x, dim=-1):\\n    ..."), ...]
    write(cells, "solutions/01_qkv_retrieval/01_qkv_retrieval.ipynb")

Conventions the pipeline relies on (tests/test_release.py checks them):

- ``solution(grade_id, src)`` wraps the answer in ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  (code before/after the markers stays visible to learners);
- ``tests(grade_id, visible, hidden, points)`` makes one autograded cell; the hidden part
  goes between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``;
- a grade id is ``<exercise>`` for the answer and ``test_<exercise>...`` for its tests, so
  the grading test can tell which points belong to which exercise.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


def _nbgrader(grade_id: str, *, solution=False, grade=False, locked=False, points=None, task=False):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": task}
    if points is not None:
        meta["points"] = points
    return meta


def _src(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def md(text: str, *, tags=()) -> nbformat.NotebookNode:
    cell = new_markdown_cell(_src(text))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def code(text: str, *, tags=(), hide_input=False) -> nbformat.NotebookNode:
    """An ordinary code cell.  ``tags`` may hold nbval markers such as ``nbval-ignore-output``."""
    cell = new_code_cell(_src(text))
    tags = list(tags) + (["hide-input"] if hide_input else [])
    if tags:
        cell.metadata["tags"] = tags
    return cell


def solution(grade_id: str, text: str) -> nbformat.NotebookNode:
    """A cell the learner completes.

    If ``text`` holds the ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers, only the
    lines between them are replaced in the release (keep a function's ``def`` line and
    docstring outside); otherwise the whole cell is the solution.
    """
    body = _src(text)
    if "### BEGIN SOLUTION" not in body:
        body = "\n".join(["### BEGIN SOLUTION", body, "### END SOLUTION"])
    cell = new_code_cell(body)
    cell.metadata["nbgrader"] = _nbgrader(grade_id, solution=True)
    return cell


def written_answer(grade_id: str, text: str, points: int) -> nbformat.NotebookNode:
    """A markdown answer graded by hand (kept out of autograde totals by nbgrader)."""
    cell = new_markdown_cell("\n".join(["### BEGIN SOLUTION", _src(text), "### END SOLUTION"]))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, solution=True, grade=True, points=points)
    return cell


def tests(grade_id: str, visible: str = "", hidden: str = "", *, points: int) -> nbformat.NotebookNode:
    """A locked, autograded test cell; ``hidden`` is removed from the student release."""
    parts = [_src(visible)] if visible else ["# The tests of this cell are hidden: they run when your notebook is graded."]
    if hidden:
        parts += ["### BEGIN HIDDEN TESTS", _src(hidden), "### END HIDDEN TESTS"]
    cell = new_code_cell("\n".join(parts))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, locked=True, points=points)
    return cell


def locked_md(grade_id: str, text: str) -> nbformat.NotebookNode:
    """Markdown learners cannot edit (instructions that graders rely on)."""
    cell = new_markdown_cell(_src(text))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, locked=True)
    return cell


def write(cells, path: str | Path, *, title: str) -> None:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["title"] = title
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.validate(nb)
    nbformat.write(nb, path)
