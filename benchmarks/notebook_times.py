"""How long each chapter's notebook takes to run on this machine, cell by cell (the Setup page quotes it).

    python -m benchmarks.notebook_times                 # every chapter, full mode: results/notebook_times.json
    python -m benchmarks.notebook_times --chapters 04_multi_head     # a trial: prints, writes nothing

Runs each solution notebook from top to bottom in a fresh kernel with ``COURSE_FAST=0`` (the
full versions of the expensive cells, as a learner runs them) and records every cell's wall
time from the kernel's own timestamps, plus the machine and its load before and after: a
laptop learner reads "how long will this take me" from it.  The notebooks are run from a
temporary copy; nothing in ``solutions/`` changes.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_utils.results import write_result

ROOT = Path(__file__).resolve().parents[1]
SLOW_CELL_S = 5.0  # cells at least this long are listed by name; the rest only count in the total


def _seconds(cell) -> float | None:
    timing = cell.metadata.get("execution", {})
    start, end = (
        timing.get("iopub.execute_input"),
        timing.get("shell.execute_reply"),
    )
    if not (start and end):
        return None
    parse = _dt.datetime.fromisoformat
    return (
        parse(end.replace("Z", "+00:00"))
        - parse(start.replace("Z", "+00:00"))
    ).total_seconds()


def _first_line(source: str) -> str:
    lines = [
        ln
        for ln in source.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    return (lines[0] if lines else source.splitlines()[0] if source else "")[
        :80
    ]


def time_chapter(cid: str) -> dict:
    """Run one chapter in full mode; ``{total_s, cells: [{index, seconds, first_line}]}``."""
    with tempfile.TemporaryDirectory(prefix=f"time-{cid}-") as tmp:
        folder = Path(tmp) / cid
        shutil.copytree(ROOT / "solutions" / cid, folder)
        nb = nbformat.read(folder / f"{cid}.ipynb", as_version=4)
        env = dict(
            os.environ,
            COURSE_FAST="0",
            MPLBACKEND="Agg",
            PYTHONPATH=str(ROOT),
        )
        env.pop("CI", None)
        start = time.perf_counter()
        NotebookClient(
            nb,
            timeout=-1,
            kernel_name="python3",
            resources={"metadata": {"path": str(folder)}},
            record_timing=True,
            env=env,
        ).execute()
        wall = time.perf_counter() - start
    cells, section = [], ""
    for i, c in enumerate(nb.cells):
        # the section a cell belongs to names it for a reader
        if c.cell_type == "markdown":
            section = next(
                (
                    ln.lstrip("#").strip()
                    for ln in c.source.splitlines()
                    if ln.startswith("## ")
                ),
                section,
            )
        elif (s := _seconds(c)) is not None:
            cells.append(
                {
                    "index": i,
                    "seconds": round(s, 2),
                    "section": section,
                    "first_line": _first_line(c.source),
                }
            )
    return {
        "total_s": round(sum(c["seconds"] for c in cells), 1),
        "wall_s": round(wall, 1),
        "slow_cells": [c for c in cells if c["seconds"] >= SLOW_CELL_S],
        "code_cells": len(cells),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--chapters",
        nargs="+",
        default=None,
        help="chapter ids (default: all)",
    )
    args = parser.parse_args(argv)
    chapters = args.chapters or sorted(
        p.name
        for p in (ROOT / "solutions").iterdir()
        if (p / f"{p.name}.ipynb").is_file()
    )
    if args.chapters:
        for cid in args.chapters:
            print(cid, time_chapter(cid))
        return 0
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    out = {
        "mode": "full (COURSE_FAST=0), fresh kernel per chapter",
        "slow_cell_s": SLOW_CELL_S,
        "chapters": {},
    }
    for cid in chapters:
        out["chapters"][cid] = time_chapter(cid)
        print(
            f"{cid:24s} {out['chapters'][cid]['total_s']:7.1f} s", flush=True
        )
    out["load_average_1min"] = {
        "start": round(load_before, 2),
        "end": round(os.getloadavg()[0], 2),
    }
    path = write_result(
        "notebook_times",
        out,
        dataset="as each chapter loads it (CIFAR-10 JPEG copy where present)",
        wall_time_s=time.perf_counter() - start,
    )
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
