"""Print grading-job.yaml filled in for one assignment: the student list, counts and Job name.

    python autograde/k8s/render_job.py 01_qkv_retrieval [--parallelism 20] [--students FILE] > job.yaml

Students are the folders ``autograde/submitted/<student>/<id>/`` (what ``make collect`` made),
or the lines of ``--students FILE``.  The Job has one completion per student.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
COURSE = HERE.parent


def render(assignment: str, students: list[str], parallelism: int = 20, image: str | None = None) -> list[dict]:
    """The ConfigMap and Job documents for ``assignment`` and ``students``."""
    if not students:
        raise ValueError(f"no students to grade for {assignment}: run `make collect` first, or pass --students")
    bad = [s for s in students if not re.fullmatch(r"[A-Za-z0-9._@+-]+", s)]
    if bad:
        raise ValueError(f"student ids the pods cannot pass safely: {bad}")
    docs = list(yaml.safe_load_all((HERE / "grading-job.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "Job")
    cm["data"] = {"assignment": assignment, "students.txt": "".join(f"{s}\n" for s in students)}
    # Job names are DNS labels; the Job controller adds a suffix to pod names, so keep it short.
    job["metadata"]["name"] = ("grade-" + re.sub(r"[^a-z0-9]+", "-", assignment.lower())).strip("-")[:50]
    job["spec"]["completions"] = len(students)
    job["spec"]["parallelism"] = max(1, min(parallelism, len(students)))
    if image:
        job["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return [cm, job]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("assignment")
    p.add_argument("--students", type=Path, help="file with one student id per line")
    p.add_argument("--parallelism", type=int, default=20, help="pods at once (default 20)")
    p.add_argument("--image", help="grader image (default: the one in grading-job.yaml)")
    args = p.parse_args(argv)
    if args.students:
        students = [s.strip() for s in args.students.read_text().splitlines() if s.strip()]
    else:
        students = sorted(d.parent.name for d in (COURSE / "submitted").glob(f"*/{args.assignment}") if d.is_dir())
    try:
        docs = render(args.assignment, students, args.parallelism, args.image)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
