"""The reasons in a grading status, in words an instructor (and, in the feedback, a learner) acts
on: why a submission could not be graded, or what cost a graded one points."""

from __future__ import annotations

import re
from pathlib import Path

from .limits import gib

MEMORY_ERROR = re.compile(
    r"MemoryError|OutOfMemoryError|not enough memory|can't allocate memory|"
    r"Cannot allocate memory|std::bad_alloc",
    re.I,
)
NO_START = (
    "the kernel failed to start twice (it died or gave no answer within the start-up limit, "
    "Execute.startup_timeout), before any cell ran: the machine, not the submission; check its "
    "memory and load, then grade this student again"
)


def cell_name(cell, index: int) -> str:
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    # counted from 1, as the tamper scan does
    return f"cell {index + 1}" + (f" ({gid})" if gid else "")


def graded_reasons(
    autograded: Path, cell_timeout, mem_limit: int | None
) -> list[str]:
    """What an instructor should know about a graded submission: cells that ran out of
    memory or past the per-cell limit (their tests lost the points)."""
    import nbformat

    reasons = []
    for path in sorted(autograded.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            for out in (
                cell.get("outputs", []) if cell.cell_type == "code" else []
            ):
                if out.get("output_type") != "error":
                    continue
                text = ": ".join(
                    x for x in (out.get("ename"), out.get("evalue")) if x
                )
                if MEMORY_ERROR.search(text):
                    limit = (
                        f" (the limit is {gib(mem_limit)})"
                        if mem_limit
                        else ""
                    )
                    reasons.append(
                        f"out of memory in {cell_name(cell, i)}{limit}: "
                        f"{text.splitlines()[0][:200]}"
                    )
                elif out.get("ename") == "CellTimeoutError":
                    reasons.append(
                        f"{cell_name(cell, i)} ran past the per-cell limit of "
                        f"{cell_timeout} s and was interrupted"
                    )
    return reasons


def kernel_died(log_text: str) -> bool:
    """Whether the student's nbgrader log (``log_text``) says that its kernel died."""
    return "DeadKernelError" in log_text or "Kernel died" in log_text


def kernel_never_started(
    error: str | None,
    log_text: str,
    cell_reached: bool,
    watchdog_reason: str | None,
) -> bool:
    """Whether a failed grading failed before any of the submission's cells ran: its kernel died
    while starting or gave no answer within nbclient's start-up limit (``log_text``: the
    student's nbgrader log).  Such a failure is the machine's, never the learner's."""
    if not error or cell_reached or watchdog_reason:
        return False
    return kernel_died(log_text) or "Kernel didn't respond" in log_text


def failure_reason(
    error: str,
    log_text: str,
    cell: str | None,
    watchdog_reason: str | None,
    no_start: bool,
    submitted: str | Path,
) -> str:
    """Why grading the submission in ``submitted`` failed with ``error``: the watchdog's reason,
    a kernel that never started or died (in ``cell``, the one running), an unreadable notebook,
    or the exception nbgrader logged."""
    from .collect import unreadable_reason

    where = cell or "its first cell"
    if watchdog_reason:
        return f"{watchdog_reason} (in {where})"
    if no_start:
        return NO_START
    if kernel_died(log_text):
        return (
            f"the kernel died while running {where} (the code exits Python, kills "
            f"its own process, or crashed it); nothing after that cell ran"
        )
    if unreadable := unreadable_reason(submitted):
        return f"grading failed: {unreadable}"  # the cause and the fix, not nbformat's error
    # nbgrader logs the traceback, then "There was an error processing assignment '<id>' for
    # student ...": the line before that is the exception itself.
    lines = log_text.splitlines()
    end = next(
        (
            i
            for i, ln in enumerate(lines)
            if "There was an error processing assignment '" in ln
        ),
        len(lines),
    )
    last = [ln.strip() for ln in lines[:end] if ln.strip()]
    return f"grading failed: {(last[-1] if last and end < len(lines) else error)[:300]}"
