"""Collect an LMS submissions zip (Canvas, Moodle) into nbgrader's ``submitted/`` folder.

    python -m course_utils.cli.collect subs.zip 01_qkv_retrieval [--course autograde]

(``make collect ZIP=subs.zip ID=01_qkv_retrieval``).  File names, the roster and which file
wins: ``grading/collect.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..grading.collect import report_path as collect_report, summary_lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m course_utils.cli.collect",
        description=__doc__.split("\n")[0],
    )
    p.add_argument(
        "zip",
        type=Path,
        help="the LMS's submissions zip (or a single submitted file)",
    )
    p.add_argument("assignment", help="assignment id, e.g. 01_qkv_retrieval")
    p.add_argument(
        "--course",
        type=Path,
        default=Path("autograde"),
        help="course directory (default: autograde)",
    )
    p.add_argument(
        "--keep-archive",
        action="store_true",
        help="keep zips collected earlier for this assignment (all of them are collected; newest file wins)",
    )
    args = p.parse_args(argv)
    if not args.zip.is_file():
        p.error(f"{args.zip}: no such file")
    course = args.course.resolve()
    if not (course / "nbgrader_config.py").exists():
        p.error(
            f"{course} has no nbgrader_config.py: run from the repository root or pass --course"
        )
    archive = course / "downloaded" / args.assignment / "archive"
    if archive.exists() and not args.keep_archive:
        shutil.rmtree(archive)  # a re-download replaces the old one
    archive.mkdir(parents=True, exist_ok=True)
    shutil.copy2(args.zip, archive / args.zip.name)
    report_path = collect_report(course, args.assignment)
    report_path.unlink(missing_ok=True)  # CourseCollector writes a fresh one
    nbgrader = Path(sys.executable).with_name("nbgrader")
    proc = subprocess.run(
        [
            str(nbgrader if nbgrader.exists() else "nbgrader"),
            "zip_collect",
            args.assignment,
            "--force",
        ],
        cwd=course,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        print(
            f"nbgrader zip_collect failed (exit {proc.returncode}); its log is above",
            file=sys.stderr,
        )
        return proc.returncode
    if not report_path.exists():
        sys.stderr.write(proc.stderr[-4000:])
        print(
            f"nothing collected and no report: either {args.zip.name} holds no files, or "
            "nbgrader_config.py does not set c.ZipCollectApp.collector_plugin to "
            "course_utils.grading.collect.CourseCollector",
            file=sys.stderr,
        )
        return 1
    report = json.loads(report_path.read_text())
    print("\n".join(summary_lines(report)))
    print(
        f"submissions are in {course / 'submitted'}; report: {report_path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
