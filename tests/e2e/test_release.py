"""The student release: generated from solutions/, identical to the committed notebooks/,
and free of solutions and hidden tests."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from tests.helpers import (
    ROOT,
    chapter_ids,
    hidden_test_lines_of,
    solution_lines_of,
)


@pytest.mark.parametrize("cid", chapter_ids())
def test_committed_release_matches_solutions(cid, course):
    fresh = json.loads(
        (course / "notebooks" / cid / f"{cid}.ipynb").read_text()
    )
    committed_path = ROOT / "notebooks" / cid / f"{cid}.ipynb"
    assert committed_path.exists(), (
        f"notebooks/{cid}/{cid}.ipynb is missing: run `make release`"
    )
    committed = json.loads(committed_path.read_text())
    if fresh != committed:
        diffs = [
            i
            for i, (a, b) in enumerate(
                zip(fresh["cells"], committed["cells"])
            )
            if a != b
        ]
        pytest.fail(
            f"notebooks/{cid} is out of date with solutions/{cid} (first differing cells: {diffs[:5]}, "
            f"{len(fresh['cells'])} vs {len(committed['cells'])} cells): run `make release` and commit"
        )


@pytest.mark.parametrize("cid", chapter_ids())
def test_release_has_no_solutions_or_hidden_tests(cid):
    nb = nbformat.read(
        ROOT / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )
    text = "\n".join(cell.source for cell in nb.cells)
    for marker in (
        "BEGIN HIDDEN TESTS",
        "END HIDDEN TESTS",
        "BEGIN SOLUTION",
        "END SOLUTION",
    ):
        assert marker not in text, (
            f"notebooks/{cid} contains the marker {marker!r}"
        )
    lines = {line.strip() for line in text.splitlines()}
    leaked_hidden = sorted(hidden_test_lines_of(cid) & lines)
    assert not leaked_hidden, (
        f"notebooks/{cid} shows hidden tests: {leaked_hidden[:3]}"
    )
    leaked_solution = sorted(solution_lines_of(cid) & lines)
    assert not leaked_solution, (
        f"notebooks/{cid} shows solution code: {leaked_solution[:3]}"
    )
    assert not any(
        cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"
    ), f"notebooks/{cid} carries outputs of the stored run"


@pytest.mark.parametrize("cid", chapter_ids())
def test_source_notebook_follows_conventions(cid):
    """Grade ids tie tests to exercises (test_<exercise>...), and every exercise is tested."""
    nb = nbformat.read(
        ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
    )
    solutions, tests = [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            solutions.append(meta["grade_id"])
            assert "### BEGIN SOLUTION" in cell.source, (
                f"{cid}: solution cell {meta['grade_id']} has no markers"
            )
        elif meta.get("grade") and cell.cell_type == "code":
            tests.append(meta["grade_id"])
            assert re.match(r"test_\w+", meta["grade_id"]), (
                f"{cid}: test cell id {meta['grade_id']!r} must start with test_"
            )
            assert meta.get("points", 0) > 0, (
                f"{cid}: test cell {meta['grade_id']} has no points"
            )
    for sid in solutions:
        assert any(
            t == f"test_{sid}" or t.startswith(f"test_{sid}_") for t in tests
        ), f"{cid}: exercise {sid!r} has no test cell named test_{sid}[...]"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


def test_every_notebook_opens_with_the_current_setup_cell():
    """The first code cell installs course_utils where it is missing, from the address in
    _config.yml (tools/setup_cell.py writes it; `make release` runs that first)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "tools/setup_cell.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("cid", chapter_ids())
def test_cells_skipped_while_grading_are_safe_to_skip(cid):
    """A cell tagged skip-while-grading is neither answer nor test, and nothing after it reads what it binds."""
    from course_utils.grading.markers import skip_problems

    nb = nbformat.read(
        ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
    )
    assert skip_problems(nb) == []


def test_skip_problems_finds_a_cell_whose_names_are_used_later():
    from nbformat.v4 import new_code_cell, new_notebook

    from course_utils.grading.markers import (
        SKIP_WHILE_GRADING,
        skip_problems,
    )

    skipped = new_code_cell(
        "table = [1, 2]\nprint(table)",
        metadata={"tags": [SKIP_WHILE_GRADING]},
    )
    nb = new_notebook(cells=[skipped, new_code_cell("print(len(table))")])
    assert skip_problems(nb) == [
        "cell 1 is skipped while grading but cell 2 reads table, which it binds"
    ]
    nb.cells[1].source = "print('no dependency')"
    assert skip_problems(nb) == []
    test = new_code_cell(
        "assert True",
        metadata={
            "tags": [SKIP_WHILE_GRADING],
            "nbgrader": {
                "grade": True,
                "solution": False,
                "grade_id": "t",
                "points": 1,
            },
        },
    )
    assert skip_problems(new_notebook(cells=[test])) == [
        "cell 1 is an answer or a test: it always runs"
    ]


def test_a_comprehension_keeps_its_own_loop_variable():
    """``p`` in ``sum(p.numel() for p in ps)`` is the comprehension's, not the cell's: skipping
    that cell leaves a later ``for p in ...`` alone, while a walrus still binds the cell's name."""
    from nbformat.v4 import new_code_cell, new_notebook

    from course_utils.grading.markers import (
        SKIP_WHILE_GRADING,
        defined_names,
        skip_problems,
    )

    assert set(
        defined_names(
            "n = sum(p.numel() for p in ps)\nq = [(y := i) for i in r]"
        )
    ) == {"n", "q", "y"}
    skipped = new_code_cell(
        "n = sum(p.numel() for p in ps)",
        metadata={"tags": [SKIP_WHILE_GRADING]},
    )
    later = new_code_cell("sizes = {p: len(p) for p in names}")
    assert skip_problems(new_notebook(cells=[skipped, later])) == []
    later.source = "print(n)"
    assert skip_problems(new_notebook(cells=[skipped, later])) == [
        "cell 1 is skipped while grading but cell 2 reads n, which it binds"
    ]


def test_imported_modules_lists_what_a_cell_imports():
    from course_utils.grading.markers import imported_modules

    source = (
        "import os, torch.nn as nn\nfrom torchvision.models import resnet34\nfrom . import x\n"
        "def f():\n    import einops\n%matplotlib inline\n"
    )
    assert imported_modules(source) == [
        "os",
        "torch.nn",
        "torchvision.models",
        "torchvision.models.resnet34",
        "einops",
    ]
    assert imported_modules("def (:") == []
