"""Private feedback for each learner: every test's points and message, never hidden-test code.

    python -m course_utils.cli.feedback ID [--student S ...] [--course .]

(``make feedback ID=<id>``); what the pages show: ``grading/feedback.py``.
"""

from __future__ import annotations

import argparse
import sys

from ..grading.config import course_root
from ..grading.feedback import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.cli.feedback",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("assignment_id")
    parser.add_argument(
        "--student",
        nargs="+",
        action="extend",
        default=[],
        help="only these students",
    )
    parser.add_argument(
        "--course",
        default=".",
        help="repository root or course directory (default: .)",
    )
    args = parser.parse_args(argv)
    written = generate(args.course, args.assignment_id, args.student or None)
    print(
        f"{args.assignment_id}: feedback for {len(written)} notebook(s) in "
        f"{course_root(args.course) / 'feedback'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
