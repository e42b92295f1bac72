"""Grades from nbgrader's gradebook, as CSV files an LMS imports (``make grades``).

    python -m course_utils.cli.export [--course autograde] [--assignment ID ...] [--db-url URL]

What the files hold: ``grading/export.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..grading.export import export


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m course_utils.cli.export",
        description=__doc__.split("\n")[0],
    )
    p.add_argument(
        "--course",
        type=Path,
        default=Path("autograde"),
        help="course directory (default: autograde)",
    )
    p.add_argument(
        "--db-url",
        help="gradebook URL (default: the one nbgrader_config.py sets)",
    )
    p.add_argument(
        "--assignment",
        action="append",
        help="export only this assignment (repeatable)",
    )
    args = p.parse_args(argv)
    # nbgrader migrates a gradebook by running `alembic`, which lives next to this Python.
    os.environ["PATH"] = os.pathsep.join(
        [os.path.dirname(sys.executable), os.environ.get("PATH", "")]
    )
    try:
        res = export(args.course, args.db_url, args.assignment)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not res["assignments"]:
        print(
            "no assignment has submissions in the gradebook yet: run `make autograde ID=<id>` first"
        )
    for f in res["files"]:
        print(f"wrote {f}")
    if res["no_canvas_id"]:
        print(
            f"{len(res['no_canvas_id'])} student(s) have no Canvas user id and are not in canvas.csv "
            f"(add canvas_id to roster.csv): {', '.join(res['no_canvas_id'][:20])}"
            + (" ..." if len(res["no_canvas_id"]) > 20 else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
