"""Derive the book's chapter pages from the solution notebooks.

    python tools/book_pages.py            # writes book/chapters/<id>.ipynb for every chapter

For each ``solutions/<id>/<id>.ipynb`` the page keeps the prose, the code and the outputs of
the stored run, and:

- removes every hidden test (``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``) and
  drops test cells that held nothing else;
- folds solution code behind a "Show solution" toggle (MyST-NB's ``hide-input`` tag) and
  removes the solution markers; written answers go into a "Show answer" dropdown;
- folds visible tests behind a "Show tests" toggle, keeping their output;
- strips nbgrader metadata.

Pages are build artefacts (git-ignored): never edit them, edit the solution notebook.
"""
from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
_HIDDEN = re.compile(r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*", re.S)
_SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)


def strip_hidden_tests(source: str) -> str:
    return _HIDDEN.sub("", source).strip("\n")


def strip_solution_markers(source: str) -> str:
    return _SOLUTION_MARKER.sub("", source).strip("\n")


def _fold(cell, show: str, hide: str) -> None:
    tags = cell.metadata.setdefault("tags", [])
    if "hide-input" not in tags:
        tags.append("hide-input")
    cell.metadata["mystnb"] = {"code_prompt_show": show, "code_prompt_hide": hide}


def page_from_solution(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The reader's version of a solution notebook (see the module docstring)."""
    page = copy.deepcopy(nb)
    cells = []
    for cell in page.cells:
        grader = cell.metadata.pop("nbgrader", None) or {}
        if grader.get("grade") and not grader.get("solution") and cell.cell_type == "code":
            cell.source = strip_hidden_tests(cell.source)
            if not cell.source.strip():
                continue  # a cell of hidden tests only: nothing for readers
            _fold(cell, "Show tests", "Hide tests")
        elif grader.get("solution") and cell.cell_type == "code":
            cell.source = strip_solution_markers(cell.source)
            _fold(cell, "Show solution", "Hide solution")
        elif grader.get("solution") and cell.cell_type == "markdown":
            answer = strip_solution_markers(cell.source)
            cell.source = f":::{{dropdown}} Show answer\n{answer}\n:::"
        leftover = [m for m in MARKERS if m in cell.source]
        if leftover:
            raise ValueError(f"nbgrader marker {leftover[0]!r} left in a cell after conversion:\n{cell.source[:200]}")
        cells.append(cell)
    page.cells = cells
    page.metadata.pop("nbgrader", None)
    return page


def chapter_ids(root: Path = ROOT) -> list[str]:
    return sorted(p.name for p in (root / "solutions").iterdir() if (p / f"{p.name}.ipynb").is_file())


def build_pages(root: Path = ROOT, out_dir: Path | None = None) -> list[Path]:
    out_dir = out_dir or root / "book" / "chapters"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for cid in chapter_ids(root):
        nb = nbformat.read(root / "solutions" / cid / f"{cid}.ipynb", as_version=4)
        if not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
            raise SystemExit(f"{cid}: the solution notebook has no stored outputs; run `make execute` first")
        target = out_dir / f"{cid}.ipynb"
        nbformat.write(page_from_solution(nb), target)
        written.append(target)
    # Pages of chapters that no longer exist must not linger in the book.
    for stale in set(out_dir.glob("*.ipynb")) - set(written):
        stale.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: book/chapters)")
    args = parser.parse_args(argv)
    for path in build_pages(out_dir=args.out):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
