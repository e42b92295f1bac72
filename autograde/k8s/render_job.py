"""Print grading-job.yaml filled in for one assignment: the student list, counts and names.

    python autograde/k8s/render_job.py 01_qkv_retrieval [--parallelism 20] [--students FILE]
                                       [--image IMAGE] [--no-sandbox] > job.yaml

Students are the folders ``autograde/submitted/<student>/<id>/`` (what ``make collect`` made),
or the lines of ``--students FILE``.  The Job has one completion per student; it and its
student list (a ConfigMap) are named after the assignment, so that several assignments can be
graded at once.  ``--no-sandbox`` is for clusters that refuse the sandbox's pod settings:
the pods then grade with ``--no-sandbox``, and every row is flagged "graded without sandbox".
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
COURSE = HERE.parent
GRADE_COMMAND = 'exec python -m course_utils.cli.autograde "$ASSIGNMENT" --student "$student" --jobs 1'


def names(assignment: str) -> tuple[str, str]:
    """(Job name, ConfigMap name) for ``assignment``: DNS labels, one pair per assignment."""
    slug = re.sub(r"[^a-z0-9]+", "-", assignment.lower()).strip("-")
    if not slug:
        raise ValueError(f"assignment id {assignment!r} has no letters or digits to name a Job after")
    # The Job controller adds a suffix to the Job's name for its pods: keep it short.
    return ("grade-" + slug)[:50].rstrip("-"), ("grading-students-" + slug)[:63].rstrip("-")


def _without_sandbox(job: dict) -> None:
    """The pod settings a cluster that forbids the sandbox's ones accepts, and the grading
    command that runs without it (every row then flagged)."""
    pod = job["spec"]["template"]["spec"]
    pod.pop("hostUsers", None)
    pod["securityContext"]["seccompProfile"] = {"type": "RuntimeDefault"}
    pod["securityContext"].pop("appArmorProfile", None)
    (box,) = pod["containers"]
    box["securityContext"].pop("procMount", None)
    script = box["args"][0]
    if script.count(GRADE_COMMAND) != 1:
        raise RuntimeError(f"grading-job.yaml no longer runs {GRADE_COMMAND!r} once: update render_job.py")
    box["args"][0] = script.replace(GRADE_COMMAND, GRADE_COMMAND + " --no-sandbox")


def render(assignment: str, students: list[str], parallelism: int = 20, image: str | None = None,
           sandbox: bool = True) -> list[dict]:
    """The ConfigMap and Job documents for ``assignment`` and ``students``."""
    if not students:
        raise ValueError(f"no students to grade for {assignment}: run `make collect` first, or pass --students")
    bad = [s for s in students if not re.fullmatch(r"[A-Za-z0-9._@+-]+", s)]
    if bad:
        raise ValueError(f"student ids the pods cannot pass safely: {bad}")
    docs = list(yaml.safe_load_all((HERE / "grading-job.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    job = next(d for d in docs if d["kind"] == "Job")
    job_name, cm_name = names(assignment)
    cm["metadata"]["name"] = cm_name
    cm["data"] = {"assignment": assignment, "students.txt": "".join(f"{s}\n" for s in students)}
    job["metadata"]["name"] = job_name
    job["spec"]["completions"] = len(students)
    job["spec"]["parallelism"] = max(1, min(parallelism, len(students)))
    pod = job["spec"]["template"]["spec"]
    (box,) = pod["containers"]
    for env in box["env"]:
        ref = env.get("valueFrom", {}).get("configMapKeyRef")
        if ref is not None:
            ref["name"] = cm_name
    for volume in pod["volumes"]:
        if "configMap" in volume:
            volume["configMap"]["name"] = cm_name
    if image:
        box["image"] = image
    if not sandbox:
        _without_sandbox(job)
    return [cm, job]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("assignment")
    p.add_argument("--students", type=Path, help="file with one student id per line")
    p.add_argument("--parallelism", type=int, default=20, help="pods at once (default 20)")
    p.add_argument("--image", help="grader image (default: the one in grading-job.yaml)")
    p.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                   help="pods without the sandbox's settings, grading with --no-sandbox (every row flagged)")
    args = p.parse_args(argv)
    if args.students:
        students = [s.strip() for s in args.students.read_text().splitlines() if s.strip()]
    else:
        students = sorted(d.parent.name for d in (COURSE / "submitted").glob(f"*/{args.assignment}") if d.is_dir())
    try:
        docs = render(args.assignment, students, args.parallelism, args.image, args.sandbox)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
