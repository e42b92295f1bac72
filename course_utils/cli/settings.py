"""Print every environment variable the course reads, with its current value.

python -m course_utils.cli.settings
"""

from __future__ import annotations

import argparse
import os
import sys

from ..settings import SETTINGS


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m course_utils.cli.settings",
        description=__doc__.split("\n")[0],
    ).parse_args(argv)
    width = max(len(n) for n in SETTINGS)
    for s in SETTINGS.values():
        value = os.environ.get(s.name)
        shown = (
            f"= {value}"
            if value
            else f"(default {s.default})"
            if s.default
            else "(unset)"
        )
        print(f"{s.name:<{width}}  {shown:<34}  {s.about}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
