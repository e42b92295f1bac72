"""Grading a class into a PostgreSQL gradebook (COURSE_DB_URL), with two parallel graders.

A private PostgreSQL server runs in a temporary folder, on a unix socket only (no TCP port),
as the ``postgres`` system user when the tests run as root (``initdb`` refuses root) and as
the current user otherwise.  ``make test`` installs the server first (tools/ensure_postgres.sh).
"""

from __future__ import annotations

import csv
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.grading.autograde import grade
from tests.conftest import nbgrader
from tests.helpers import missing_piece
from tests.mutations import MUTATIONS
from tests.grading.test_autograde_driver import (
    CID,
    SANDBOX,
    max_points,
    scores,
    small_course,  # noqa: F401  (fixture)
)
from tests.e2e.test_grading_e2e import (
    _mutate,
    _of_exercise,
    _submission,
    _write,
)


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]),
    )
    return Path(candidates[-1]).parent if candidates else None


@pytest.fixture(scope="module")
def postgres_url():
    """A throw-away PostgreSQL server; yields its SQLAlchemy URL."""
    bindir = _pg_bin()
    if bindir is None:
        missing_piece(
            "a PostgreSQL server (grading into a PostgreSQL gradebook)",
            "run 'sudo apt-get install -y postgresql', or tools/ensure_postgres.sh as root",
        )
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    run_as: list[str] = []
    user = os.environ.get("USER") or "postgres"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        run_as, user = ["runuser", "-u", "postgres", "--"], "postgres"
    data = folder / "data"
    port = "5433"  # only names the socket file in the private folder: no TCP, no clash
    subprocess.run(
        [
            *run_as,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            user,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    subprocess.run(
        [
            *run_as,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(folder / "server.log"),
            "-w",
            "-o",
            f"-c listen_addresses='' -k {folder} -p {port} -c fsync=off",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    try:
        yield f"postgresql+psycopg2://{user}@/postgres?host={folder}&port={port}"
    finally:
        subprocess.run(
            [
                *run_as,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_grade_into_postgres_with_two_workers(small_course, postgres_url):
    course, env = small_course, {"COURSE_DB_URL": postgres_url}
    start = time.perf_counter()
    for name in ("submitted", "autograded", "status"):
        shutil.rmtree(course / "autograde" / name, ignore_errors=True)
    # the release fills the gradebook
    nbgrader(course, "generate_assignment", CID, "--force", env_extra=env)
    mutations = MUTATIONS[CID][:2]
    _write(course, CID, "reference", _submission(course, CID))
    _write(
        course,
        CID,
        "untouched",
        nbformat.read(
            course / "notebooks" / CID / f"{CID}.ipynb", as_version=4
        ),
    )
    for m in mutations:
        _write(course, CID, m.name, _submission(course, CID, _mutate(m)))

    status = grade(
        course, CID, jobs=2, force=True, env_extra=env, sandbox=SANDBOX
    )
    assert all(s["state"] == "graded" for s in status.values()), status

    full = max_points(course, db_url=postgres_url)
    got = scores(course, db_url=postgres_url)
    assert got["reference"] == full and not any(got["untouched"].values()), (
        got
    )
    for m in mutations:
        assert got[m.name] == {
            g: (0.0 if _of_exercise(g, m.exercise) else p)
            for g, p in full.items()
        }, (m.name, got)

    nbgrader(course, "export", "--to", "pg_grades.csv", env_extra=env)
    with open(course / "autograde" / "pg_grades.csv", newline="") as f:
        rows = {
            r["student_id"]: r
            for r in csv.DictReader(f)
            if r["assignment"] == CID
        }
    assert set(rows) == {
        "reference",
        "untouched",
        *(m.name for m in mutations),
    }
    total = sum(full.values())
    assert (
        float(rows["reference"]["score"])
        == float(rows["reference"]["max_score"])
        == total
    )
    assert float(rows["untouched"]["score"]) == 0
    for m in mutations:
        assert float(rows[m.name]["score"]) == sum(got[m.name].values())
    print(
        f"PostgreSQL grading of {len(rows)} submissions with 2 workers: {time.perf_counter() - start:.1f} s"
    )
