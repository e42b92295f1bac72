"""make test runs the suite with ``--dist loadgroup`` (tools/run_tests.py): the tests of one
``xdist_group`` share an expensive fixture (the built book, the class edition, an installed
wheel) and must run one after another on one worker.  When a pytest / pytest-xdist pair stops
honouring the groups, the suite still passes but builds those fixtures on both workers at once,
in the same folders: this test catches that."""

from __future__ import annotations

import re
import subprocess
import sys


GROUPED = """
import pytest
pytestmark = [pytest.mark.xdist_group("shared")]
def test_one(): pass
def test_two(): pass
def test_three(): pass
"""
# enough ungrouped tests that the scheduler has work for the other worker
LOOSE = "\n".join(f"def test_loose_{i}(): pass" for i in range(6))


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path),
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            f"--rootdir={tmp_path}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    workers = {
        name: worker
        for worker, name in re.findall(
            r"\[(gw\d+)\].*?PASSED\s+\S*test_grouped\.py::(test_\w+)",
            proc.stdout,
        )
    }
    assert set(workers) == {"test_one", "test_two", "test_three"}, (
        proc.stdout[-3000:]
    )
    assert len(set(workers.values())) == 1, (
        f"the group's tests ran on {sorted(set(workers.values()))}: this pytest / pytest-xdist "
        "pair splits xdist_group (see the pin on pytest in pyproject.toml)"
    )
