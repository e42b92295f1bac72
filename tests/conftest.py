"""Fixtures shared by the release and grading tests: a throw-away copy of the course."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.helpers import ROOT, chapter_ids

BIN = Path(sys.executable).parent

# Property tests: CI (.ci/run sets CI) draws the same examples on every run, so a change fails for
# what it changed and never for a new random draw; every other run (``make test`` at a desk)
# explores new examples, and prints the blob that replays a failure.  HYPOTHESIS_PROFILE picks
# either by name.  Loaded here, before the test modules, whose own @settings inherit from it.
settings.register_profile("ci", derandomize=True, print_blob=True)
# (explicitly not derandomized: Hypothesis's own default is, where it detects CI)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(
    os.environ.get(
        "HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "explore"
    )
)


def nbgrader(
    course: Path,
    *args: str,
    env_extra: dict | None = None,
    timeout: int = 1800,
) -> subprocess.CompletedProcess:
    """Run nbgrader in ``course/autograde`` with the course's config, as `make` does."""
    env = dict(
        os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    # grading must behave as it does on an instructor's machine
    env.pop("CI", None)
    env.update(env_extra or {})
    proc = subprocess.run(
        [str(BIN / "nbgrader"), *args],
        cwd=course / "autograde",
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


_RELEASE = """
import os, sys
from traitlets.config.loader import PyFileConfigLoader
from nbgrader.apps.api import NbGraderAPI
api = NbGraderAPI(config=PyFileConfigLoader("nbgrader_config.py", path=os.getcwd()).load_config())
for cid in sys.argv[1:]:
    result = api.generate_assignment(cid, force=True)
    if not result["success"]:
        sys.exit(f"generate_assignment {cid} failed:\\n{result.get('log', '')[-3000:]}{result.get('error', '')}")
"""


def release(course: Path, ids: list[str]) -> None:
    """``nbgrader generate_assignment`` for each id, in one process (nbgrader's start-up costs
    seconds; the course fixture releases every chapter)."""
    # nbgrader runs alembic
    env = dict(
        os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    env.pop("CI", None)
    proc = subprocess.run(
        [sys.executable, "-c", _RELEASE, *ids],
        cwd=course / "autograde",
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"release of {ids} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )


@pytest.fixture(scope="session")
def course(tmp_path_factory) -> Path:
    """solutions/ and the nbgrader config copied to a temporary folder, with a fresh release."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "solutions", root / "solutions")
    (root / "autograde").mkdir()
    shutil.copy2(
        ROOT / "autograde" / "nbgrader_config.py",
        root / "autograde" / "nbgrader_config.py",
    )
    release(root, chapter_ids())
    return root


def pytest_configure(config):
    """In a pytest-xdist worker: the cores shared out among the workers, for this process's PyTorch
    and for every process it starts (kernels, graders, scripts), unless the caller set a thread
    count (``runtime.thread_share_env`` says why)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    from course_utils.runtime import thread_share_env, usable_cores

    threads = max(1, usable_cores() // int(workers))
    os.environ.update(thread_share_env(threads))
    torch.set_num_threads(threads)


def pytest_addoption(parser):
    parser.addoption(
        "--skips-file",
        default=None,
        help="also write the end-of-run lines on skipped checks to this file (tools/run_tests.py)",
    )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per reason a check was skipped, at the very end of the run: a learner's machine
    without Chromium, PostgreSQL or a GPU runs everything else and says what it left out.  With
    --skips-file, the same lines go to that file (tools/run_tests.py repeats them last)."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = (
            longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        )
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    lines = [
        f"skipped {n} test(s): {reason}"
        for reason, n in sorted(reasons.items())
    ]
    if lines:
        terminalreporter.section("checks skipped, and why")
        for line in lines:
            terminalreporter.write_line(line)
    target = config.getoption("--skips-file")
    if target:
        Path(target).write_text("".join(f"{line}\n" for line in lines))
