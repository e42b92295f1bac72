"""Grade a whole class in parallel, resumable, with limits (``make autograde ID=<id> JOBS=N FORCE=1``).

    python -m course_utils.cli.autograde ID [--jobs N] [--force] [--student S ...]
                                            [--mem-limit 3G] [--time-limit 900] [--no-fork-server]
                                            [--no-sandbox]

Run from the repository root.  What it does and guarantees: ``grading/autograde.py``.
"""

from __future__ import annotations

import argparse
import sys

from ..grading.forkserver import skip_slow_optional_imports

skip_slow_optional_imports()  # before nbgrader: the driver starts seconds sooner (grading/worker.py does the same)
from ..grading.autograde import grade  # noqa: E402
from ..grading.limits import DEFAULT_MEM_LIMIT, DEFAULT_TIME_LIMIT  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.cli.autograde",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("assignment_id")
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=None,
        help="parallel graders (default: one per core)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="regrade unchanged submissions too",
    )
    parser.add_argument(
        "--student",
        nargs="+",
        action="extend",
        default=[],
        help="only these students",
    )
    parser.add_argument(
        "--mem-limit",
        default=DEFAULT_MEM_LIMIT,
        help="per kernel, e.g. 3G (default), 0 for none",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT,
        help="seconds per notebook (default 900); COURSE_CELL_TIMEOUT limits each cell",
    )
    parser.add_argument(
        "--course",
        default=".",
        help="repository root or course directory (default: .)",
    )
    parser.add_argument(
        "--no-fork-server",
        dest="fork_server",
        action="store_false",
        help="start each kernel as a fresh Python instead of forking it from a warm one",
    )
    parser.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        help="run learner code without the bubblewrap sandbox (with the grader's rights); "
        "every row is then flagged 'graded without sandbox'",
    )
    args = parser.parse_args(argv)
    grade(
        args.course,
        args.assignment_id,
        jobs=args.jobs,
        force=args.force,
        students=args.student,
        mem_limit=args.mem_limit,
        time_limit=args.time_limit,
        fork_server=args.fork_server,
        sandbox=args.sandbox,
    )
    return 0  # failed submissions are results (see the status file), not errors of the command


if __name__ == "__main__":
    sys.exit(main())
