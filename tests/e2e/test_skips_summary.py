"""A machine without the optional pieces (Chromium, PostgreSQL, root) runs the rest of the tests
and ends with one line per skipped check saying why; under CI, where make test installs the
pieces, a missing one fails instead."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT

PIECES = """
from tests.helpers import missing_piece
def test_page_one(): missing_piece("a browser", "install one")
def test_page_two(): missing_piece("a browser", "install one")
def test_database(): missing_piece("a database server", "install that")
def test_the_rest(): pass
"""


def _pytest(
    tmp_path, ci: bool
) -> tuple[subprocess.CompletedProcess, list[str]]:
    (tmp_path / "test_pieces.py").write_text(PIECES)
    skips = tmp_path / "skips.txt"
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path / "test_pieces.py"),
            "-p",
            "tests.conftest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--skips-file",
            str(skips),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, (skips.read_text().splitlines() if skips.is_file() else [])


def test_skipped_checks_are_listed_once_each_at_the_end(tmp_path):
    proc, lines = _pytest(tmp_path, ci=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    expected = [
        "skipped 1 test(s): optional piece missing: a database server; install that",
        "skipped 2 test(s): optional piece missing: a browser; install one",
    ]
    assert sorted(lines) == sorted(expected)
    tail = proc.stdout[proc.stdout.index("checks skipped, and why") :]
    assert all(line in tail for line in expected), tail


def test_under_ci_a_missing_piece_fails(tmp_path):
    proc, _ = _pytest(tmp_path, ci=True)
    assert proc.returncode == 1
    assert (
        "3 failed, 1 passed" in proc.stdout
        and "make test should have installed it" in proc.stdout
    )
