"""What `make test` runs: four checks, each to its end whatever the others did, then one summary.

0. ruff: lint and format (the settings are in pyproject.toml), seconds;
1. the notebook check with this machine's kernels (tools/check_notebooks.py);
2. the notebook check again with the kernels another CPU would use (``--other-kernels``);
3. the test suite (tests/), on ``--workers`` pytest-xdist workers.

Exits 1 if any check failed.  The last lines say which checks were skipped and why (a learner's
machine without Chromium, PostgreSQL or a GPU runs the rest).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--workers",
        default=os.environ.get("TEST_WORKERS", "2"),
        help="pytest-xdist workers for tests/",
    )
    args = ap.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        skips = Path(tmp) / "skips.txt"
        ruff = [py, "-m", "ruff"]
        lint = shlex.join([*ruff, "check", "."])
        fmt = shlex.join([*ruff, "format", "--check", "."])
        checks = [
            ("ruff lint and format", ["sh", "-c", f"{lint} && {fmt}"]),
            (
                "notebooks, this machine's kernels",
                [py, "tools/check_notebooks.py"],
            ),
            (
                "notebooks, other kernels",
                [py, "tools/check_notebooks.py", "--other-kernels"],
            ),
            (
                "test suite",
                [
                    py,
                    "-m",
                    "pytest",
                    "tests",
                    "-n",
                    str(args.workers),
                    "--dist",
                    "loadgroup",
                    "--durations=40",
                    "--skips-file",
                    str(skips),
                ],
            ),
        ]
        results = []
        for name, command in checks:
            print(f"\n==== {name}: {' '.join(command[1:])}", flush=True)
            start = time.monotonic()
            code = subprocess.call(command, cwd=ROOT)
            results.append((name, code, time.monotonic() - start))
        skipped = skips.read_text().splitlines() if skips.is_file() else []
    print("\n==== make test: summary")
    for name, code, seconds in results:
        verdict = "passed" if code == 0 else f"FAILED (exit {code})"
        print(f"  {name:36s} {verdict:18s} {_clock(seconds)}")
    for line in skipped:
        print(f"  {line}")
    failed = [name for name, code, _ in results if code != 0]
    if failed:
        print(f"make test: failed: {', '.join(failed)}")
    print(
        f"checks: {len(results) - len(failed)} passed, {len(failed)} failed"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
