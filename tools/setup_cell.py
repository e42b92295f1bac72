"""The setup cell that opens every chapter notebook: it makes ``course_utils`` importable where
the notebook was opened (Colab, a JupyterHub, a downloaded copy) and does nothing inside the
course's own environment.

    python tools/setup_cell.py            # write or update the cell in every solutions/ notebook
    python tools/setup_cell.py --check    # exit 1 if a notebook's cell is missing or out of date

The cell installs from ``COURSE_PACKAGE`` when that is set (a path to the repository or to a
wheel, or any pip requirement), else from ``course.repository_url`` in ``_config.yml``; with
neither, it says what to do.  ``make release`` runs this first, so the student notebooks carry
the configured address.  The cell is tagged ``remove-cell``: the book's pages leave it out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
import yaml
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parents[1]
TAG = "course-setup"

TEMPLATE = """\
# Setup: makes the course's package importable here (Colab, a JupyterHub, a downloaded copy).
# In the course's own environment it does nothing.  Run it first.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("course_utils") is None:
    source = os.environ.get("COURSE_PACKAGE") or {default!r}
    if source.startswith(("https://", "http://")) and not source.endswith((".whl", ".zip", ".tar.gz")):
        source = "course-utils @ git+" + source.rstrip("/")  # a repository's web address
    if not source:
        raise ModuleNotFoundError(
            "course_utils is missing and this notebook does not say where the course lives: run "
            "%env COURSE_PACKAGE=https://github.com/<owner>/<course> (the address your course gives, or "
            "the path of a downloaded copy of it) in a cell above, then this cell again")
    print(f"Installing the course package from {{source}} ...")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", source], capture_output=True, text=True)
    if pip.returncode != 0:
        said = (pip.stderr.strip().splitlines() or ["no message"])[-1]
        raise ModuleNotFoundError(
            f"could not install the course package from {{source}} (pip: {{said}}): connect to the internet, "
            "or run %env COURSE_PACKAGE=<the path of a downloaded copy of the course> in a cell above, then "
            "this cell again")
    importlib.invalidate_caches()
    print("Installed. If an import below fails, restart the kernel and run the notebook again.")
else:
    print("The course package is installed: nothing to do.")"""


def cell_source(config: dict) -> str:
    repo = ((config or {}).get("course") or {}).get("repository_url") or ""
    branch = ((config or {}).get("course") or {}).get("branch") or "main"
    default = (
        f"course-utils @ git+{repo.rstrip('/')}@{branch}" if repo else ""
    )
    return TEMPLATE.format(default=default)


def _config(root: Path) -> dict:
    return yaml.safe_load((root / "_config.yml").read_text())


def update(nb: nbformat.NotebookNode, source: str) -> bool:
    """Put the setup cell first among the code cells (after the title); True if ``nb`` changed."""
    existing = [c for c in nb.cells if TAG in c.metadata.get("tags", [])]
    if existing:
        cell = existing[0]
        if cell.source == source and cell.execution_count:
            return False
        cell.source, cell.execution_count = source, cell.execution_count or 1
        return True
    first_code = next(
        i for i, c in enumerate(nb.cells) if c.cell_type == "code"
    )
    # stored as run (nbval checks outputs only of cells that have an execution count)
    cell = new_code_cell(
        source, metadata={"tags": [TAG, "remove-cell"]}, execution_count=1
    )
    cell.outputs = [
        nbformat.v4.new_output(
            "stream",
            name="stdout",
            text="The course package is installed: nothing to do.\n",
        )
    ]
    nb.cells.insert(first_code, cell)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check; exit 1 if a notebook needs updating",
    )
    args = parser.parse_args(argv)
    source = cell_source(_config(ROOT))
    stale = []
    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if update(nb, source):
            stale.append(path.relative_to(ROOT))
            if not args.check:
                nbformat.write(nb, path)
    if args.check and stale:
        print(
            "setup cell missing or out of date (run python tools/setup_cell.py):",
            *stale,
            sep="\n  ",
        )
        return 1
    for path in [] if args.check else stale:
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
