"""Grading throughput: submissions per minute of the class-grading driver, 1 vs 2 workers, and
with the grading sandbox against without it.

    python -m benchmarks.grading_throughput                 # writes results/bench_grading.json
    python -m benchmarks.grading_throughput --copies 2 --chapters 01_qkv_retrieval --baseline

For each chapter, a temporary copy of the course gets K copies of the reference solution and
a few seeded mistakes (tests/mutations), and ``course_utils.grading.autograde.grade`` grades
them all with JOBS=1 and then JOBS=2 in the bubblewrap sandbox, then JOBS=2 without it
(``--force``: every submission, worker start-up included), one after the other in the same
run.  Reported per chapter and averaged over chapters: submissions per minute of each run, the
speed-up of JOBS=2, the sandbox's cost (JOBS=2 with over without), and whether all runs gave
identical scores.  ``--baseline`` also times
plain ``nbgrader autograde ID --force`` (one process, serial), the command this driver replaced.
On a shared machine the numbers are only as quiet as the machine: the provenance records it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from course_utils.grading.autograde import grade
from course_utils.results import write_result

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
# (name, JOBS, sandbox): the runs of each chapter, in this order, in one process
RUNS = (
    ("jobs1", 1, True),
    ("jobs2", 2, True),
    ("jobs2_no_sandbox", 2, False),
)


def _nbgrader(course: Path, *args: str) -> None:
    env = dict(
        os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    subprocess.run(
        [str(BIN / "nbgrader"), *args],
        cwd=course / "autograde",
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )


def _submissions(course: Path, cid: str, copies: int, wrong: int) -> int:
    """Write K reference copies and ``wrong`` seeded mistakes of ``cid``; return how many."""
    # the seeded mistakes the grading tests use
    from tests.mutations import (
        MUTATIONS,
    )

    source = nbformat.read(
        ROOT / "solutions" / cid / f"{cid}.ipynb", as_version=4
    )
    answers = {
        c.metadata["nbgrader"]["grade_id"]: _MARKER.sub("", c.source)
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    release = nbformat.read(
        course / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )

    def write(student: str, mutation=None) -> None:
        nb = nbformat.from_dict(release)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = answers[gid]
                if mutation is not None and gid == mutation.exercise:
                    cell.source = cell.source.replace(
                        mutation.old, mutation.new
                    )
        path = (
            course
            / "autograde"
            / "submitted"
            / student
            / cid
            / f"{cid}.ipynb"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)

    for i in range(copies):
        write(f"reference-{i}")
    mutations = MUTATIONS.get(cid, [])[:wrong]
    for m in mutations:
        write(f"wrong-{m.name}", m)
    return copies + len(mutations)


def _scores(course: Path, cid: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(
        f"sqlite:///{course / 'autograde' / 'gradebook.db'}",
        "attention-course",
    ) as gb:
        return {
            s.student.id: {g.name: g.score for g in s.notebooks[0].grades}
            for s in gb.assignment_submissions(cid)
        }


def main(
    copies: int = 4,
    wrong: int = 2,
    chapters: list[str] | None = None,
    baseline: bool = False,
) -> dict:
    wall = time.perf_counter()
    chapters = chapters or sorted(
        p.name
        for p in (ROOT / "solutions").iterdir()
        if (p / f"{p.name}.ipynb").is_file()
    )
    per_chapter = {}
    with tempfile.TemporaryDirectory(prefix="course-bench-grading-") as tmp:
        course = Path(tmp)
        shutil.copytree(ROOT / "solutions", course / "solutions")
        (course / "autograde").mkdir()
        shutil.copy2(
            ROOT / "autograde" / "nbgrader_config.py",
            course / "autograde" / "nbgrader_config.py",
        )
        for cid in chapters:
            _nbgrader(course, "generate_assignment", cid, "--force")
            n = _submissions(course, cid, copies, wrong)
            row: dict = {"submissions": n}
            scores = {}
            for name, jobs, sandbox in RUNS:
                start = time.perf_counter()
                status = grade(
                    course,
                    cid,
                    jobs=jobs,
                    force=True,
                    progress=lambda line: None,
                    sandbox=sandbox,
                )
                seconds = time.perf_counter() - start
                failed = sorted(
                    s for s, v in status.items() if v["state"] != "graded"
                )
                row[f"{name}_seconds"] = round(seconds, 1)
                row[f"{name}_per_min"] = round(n / seconds * 60, 2)
                if failed:
                    row[f"{name}_failed"] = failed
                scores[name] = _scores(course, cid)
            row["speedup_jobs2"] = round(
                row["jobs2_per_min"] / row["jobs1_per_min"], 2
            )
            row["sandbox_cost_jobs2"] = round(
                row["jobs2_no_sandbox_per_min"] / row["jobs2_per_min"], 2
            )
            row["same_scores"] = all(
                v == scores["jobs1"] for v in scores.values()
            )
            if baseline:
                start = time.perf_counter()
                _nbgrader(course, "autograde", cid, "--force")
                row["nbgrader_cli_per_min"] = round(
                    n / (time.perf_counter() - start) * 60, 2
                )
            per_chapter[cid] = row
            print(
                f"{cid}: {n} submissions; sandboxed JOBS=1 {row['jobs1_per_min']}/min, JOBS=2 {row['jobs2_per_min']}/min "
                f"(x{row['speedup_jobs2']}); JOBS=2 without the sandbox {row['jobs2_no_sandbox_per_min']}/min "
                f"(x{row['sandbox_cost_jobs2']} the sandboxed rate), same scores: {row['same_scores']}"
                + (
                    f"; nbgrader autograde {row['nbgrader_cli_per_min']}/min"
                    if baseline
                    else ""
                ),
                flush=True,
            )
    mean = {
        key: round(statistics.fmean(r[key] for r in per_chapter.values()), 2)
        for key in (
            "jobs1_per_min",
            "jobs2_per_min",
            "jobs2_no_sandbox_per_min",
            "speedup_jobs2",
            "sandbox_cost_jobs2",
        )
        + (("nbgrader_cli_per_min",) if baseline else ())
    }
    result = {
        "copies_of_reference": copies,
        "seeded_mistakes": wrong,
        "cpu_count": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "per_chapter": per_chapter,
        "mean_over_chapters": mean,
        "all_same_scores": all(
            r["same_scores"] for r in per_chapter.values()
        ),
    }
    print(f"mean over {len(per_chapter)} chapters: {mean}")
    write_result(
        "bench_grading",
        result,
        dataset="the course's reference solutions and seeded mistakes "
        "(tests/mutations)",
        wall_time_s=time.perf_counter() - wall,
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--copies",
        type=int,
        default=4,
        help="reference copies per chapter (default %(default)s)",
    )
    parser.add_argument(
        "--wrong",
        type=int,
        default=2,
        help="seeded mistakes per chapter (default %(default)s)",
    )
    parser.add_argument(
        "--chapters", nargs="+", help="only these chapters (default: all)"
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also time plain `nbgrader autograde` (serial)",
    )
    args = parser.parse_args()
    main(args.copies, args.wrong, args.chapters, args.baseline)
