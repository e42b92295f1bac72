"""Derive the book's chapter pages from the solution notebooks.

    python tools/book_pages.py                  # writes book/chapters/<id>.ipynb for every chapter
    python tools/book_pages.py --no-solutions   # the same pages for a class that is being graded

For each ``solutions/<id>/<id>.ipynb`` the page keeps the prose, the code and the outputs of
the stored run, and:

- removes every hidden test (``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``) and
  drops test cells that held nothing else;
- folds solution code behind a "Show solution" toggle (MyST-NB's ``hide-input`` tag) and
  removes the solution markers; written answers go into a "Show answer" dropdown;
- folds visible tests behind a "Show tests" toggle, keeping their output;
- strips nbgrader metadata;
- puts links to the chapter's *student* notebook at the top of the page: a download that works
  offline (the notebook is shipped with the built book) and, when ``course.repository_url`` is
  set in ``_config.yml``, "Open in Colab" (GitHub repositories) and "Open on a JupyterHub"
  (nbgitpuller, when ``course.jupyterhub_url`` is set too).

With ``--no-solutions`` (``make book SOLUTIONS=0``) solution code is replaced by the same stub
the student notebook has and written answers are left out; no output of the stored run that
the solutions made is shown (``answer_outputs``): not the answers' own, not the visible tests'
("passed"), not those of any cell that reads what an answer bound, directly or through other
cells.  Outputs that owe nothing to an answer (a figure of stored results, a worked example)
stay.

Pages are build artefacts (git-ignored): never edit them, edit the solution notebook.
"""

from __future__ import annotations

import argparse
import copy
import html
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import nbformat
import yaml
from nbformat.v4 import new_markdown_cell

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from course_utils.grading.markers import (  # noqa: E402
    MARKERS,
    replace_solutions_with_stub,
    strip_hidden_tests,
    strip_solution_markers,
)


def course_links(cid: str, config: dict) -> str:
    """The Markdown box at the top of a chapter page: where to get the exercise notebook."""
    course = (config or {}).get("course") or {}
    repo = (course.get("repository_url") or "").rstrip("/")
    branch = course.get("branch") or "main"
    hub = (course.get("jupyterhub_url") or "").rstrip("/")
    path = f"notebooks/{cid}/{cid}.ipynb"
    links = [f"{{download}}`Download the exercise notebook <../../{path}>`"]
    if repo.startswith("https://github.com/"):
        links.append(
            f"[Open in Colab](https://colab.research.google.com/github/"
            f"{repo.removeprefix('https://github.com/')}/blob/{branch}/{path})"
        )
    if repo and hub:
        name = repo.split("/")[-1].removesuffix(".git")
        query = urlencode(
            {
                "repo": repo,
                "branch": branch,
                "urlpath": f"lab/tree/{name}/{path}",
            },
            quote_via=quote,
        )
        # Raw HTML, not a Markdown link: MyST escapes the query's "&" twice in a Markdown link's
        # address (MyST-Parser issue 760), which breaks nbgitpuller's parameters.
        links.append(
            f'<a href="{html.escape(f"{hub}/hub/user-redirect/git-pull?{query}")}">Open on the JupyterHub</a>'
        )
    return (
        ":::{admonition} Do the exercises\n:class: note\n"
        + " · ".join(links)
        + "\n\n"
        "These links give the **student version** of this chapter: the same text and code, with each "
        "graded exercise left for you to write (`raise NotImplementedError()`) and the hidden tests "
        "removed. They never give the solutions shown on this page. "
        "[Setting up](../setup.md) explains laptops, Colab and JupyterHubs.\n:::"
    )


def _fold(cell, show: str, hide: str) -> None:
    tags = cell.metadata.setdefault("tags", [])
    if "hide-input" not in tags:
        tags.append("hide-input")
    # merge: authors keep their own MyST-NB settings (e.g. image alt text) on the cell
    cell.metadata["mystnb"] = {
        **cell.metadata.get("mystnb", {}),
        "code_prompt_show": show,
        "code_prompt_hide": hide,
    }


def answer_outputs(nb: nbformat.NotebookNode) -> set[int]:
    """Indices of the code cells whose stored outputs the solutions made: answers, tests, and
    every cell that reads a name an answer bound, or a name bound by such a cell, and so on."""
    # the skip-while-grading rule's reading
    from course_utils.grading.markers import (
        reads_and_binds,
    )

    tainted: set[str] = set()
    found = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        grader = cell.metadata.get("nbgrader", {})
        reads, binds = reads_and_binds(cell.source)
        if grader.get("solution") or grader.get("grade") or reads & tainted:
            found.add(i)
            tainted |= binds
        else:
            # rebound from the course's own values: clean again
            tainted -= binds
    return found


def page_from_solution(
    nb: nbformat.NotebookNode,
    *,
    solutions: bool = True,
    header: str | None = None,
) -> nbformat.NotebookNode:
    """The reader's version of a solution notebook (see the module docstring); ``header`` is
    Markdown put right under the chapter's title."""
    page = copy.deepcopy(nb)
    made_by_answers = set() if solutions else answer_outputs(page)
    cells = []
    for index, cell in enumerate(page.cells):
        if index in made_by_answers:
            cell.outputs, cell.execution_count = [], None
        grader = cell.metadata.pop("nbgrader", None) or {}
        if (
            grader.get("grade")
            and not grader.get("solution")
            and cell.cell_type == "code"
        ):
            cell.source = strip_hidden_tests(cell.source)
            if not cell.source.strip():
                continue  # a cell of hidden tests only: nothing for readers
            _fold(cell, "Show tests", "Hide tests")
        elif (
            grader.get("solution")
            and cell.cell_type == "code"
            and not solutions
        ):
            cell.source = replace_solutions_with_stub(cell.source)
            cell.outputs = []
        elif grader.get("solution") and cell.cell_type == "code":
            cell.source = strip_solution_markers(cell.source)
            _fold(cell, "Show solution", "Hide solution")
        elif grader.get("solution") and cell.cell_type == "markdown":
            if not solutions:
                continue
            answer = strip_solution_markers(cell.source)
            cell.source = f":::{{dropdown}} Show answer\n{answer}\n:::"
        leftover = [m for m in MARKERS if m in cell.source]
        if leftover:
            raise ValueError(
                f"nbgrader marker {leftover[0]!r} left in a cell after conversion:\n{cell.source[:200]}"
            )
        cells.append(cell)
    if header and cells:
        # right under the chapter's title, which opens the first cell
        first = cells[0]
        title, _, rest = first.source.partition("\n")
        if (
            first.cell_type == "markdown"
            and title.startswith("# ")
            and rest.strip()
        ):
            first.source = title
            cells[1:1] = [
                new_markdown_cell(header),
                new_markdown_cell(rest.strip("\n")),
            ]
        else:
            cells.insert(1, new_markdown_cell(header))
    page.cells = cells
    page.metadata.pop("nbgrader", None)
    return page


def chapter_ids(root: Path = ROOT) -> list[str]:
    return sorted(
        p.name
        for p in (root / "solutions").iterdir()
        if (p / f"{p.name}.ipynb").is_file()
    )


def build_pages(
    root: Path = ROOT, out_dir: Path | None = None, *, solutions: bool = True
) -> list[Path]:
    out_dir = out_dir or root / "book" / "chapters"
    config = yaml.safe_load((root / "_config.yml").read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for cid in chapter_ids(root):
        nb = nbformat.read(
            root / "solutions" / cid / f"{cid}.ipynb", as_version=4
        )
        if not any(
            c.get("outputs") for c in nb.cells if c.cell_type == "code"
        ):
            raise SystemExit(
                f"{cid}: the solution notebook has no stored outputs; run `make execute` first"
            )
        target = out_dir / f"{cid}.ipynb"
        page = page_from_solution(
            nb, solutions=solutions, header=course_links(cid, config)
        )
        nbformat.write(page, target)
        written.append(target)
    # Pages of chapters that no longer exist must not linger in the book.
    for stale in set(out_dir.glob("*.ipynb")) - set(written):
        stale.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: book/chapters)",
    )
    parser.add_argument(
        "--no-solutions",
        action="store_true",
        help="leave solutions out (for a class that is being graded): code becomes the stub",
    )
    args = parser.parse_args(argv)
    for path in build_pages(
        out_dir=args.out, solutions=not args.no_solutions
    ):
        print(
            f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
