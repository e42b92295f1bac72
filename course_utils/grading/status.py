"""Grading status, ``status/<id>.json``: its one reader and writer.

It holds ``{student: {"sha256", "state": "graded"|"failed", "reasons": [...], "flags": [...],
"seconds", "graded_at"}}``.  On Kubernetes each pod writes ``status/<index>/<id>.json`` (pods
never share a file: the grader rewrites it whole); ``read_status`` merges those with the top
file, so the grading driver, the feedback pages and the grade export all see one status.  Each
submission's nbgrader log is ``status/<id>.logs/<student>.log``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

from ..files import write_text

GRADED, FAILED = "graded", "failed"


def status_path(root: Path, assignment_id: str) -> Path:
    return root / "status" / f"{assignment_id}.json"


def logs_folder(root: Path, assignment_id: str) -> Path:
    """Where the workers write each submission's nbgrader log and their own."""
    return root / "status" / f"{assignment_id}.logs"


def log_name(assignment_id: str, name: str) -> str:
    """A log in ``logs_folder`` as the reasons name it: from the course directory."""
    return f"status/{assignment_id}.logs/{name}.log"


def read_status(root: Path, assignment_id: str) -> dict:
    """``status/<id>.json`` merged with ``status/*/<id>.json`` (one folder per pod); the latest
    ``graded_at`` wins for each student.  {} when there is none."""
    merged: dict = {}
    pods = sorted((root / "status").glob(f"*/{assignment_id}.json"))
    for path in [status_path(root, assignment_id), *pods]:
        if not path.is_file():
            continue
        try:
            status = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path} is not valid JSON ({err}); regrade the assignment or delete the file"
            ) from err
        for student, entry in status.items():
            if student not in merged or str(
                entry.get("graded_at", "")
            ) >= str(merged[student].get("graded_at", "")):
                merged[student] = entry
    return merged


def write_status(root: Path, assignment_id: str, status: dict) -> None:
    # atomic: readers (a progress display, the next run) never see half a file
    write_text(
        status_path(root, assignment_id),
        json.dumps(dict(sorted(status.items())), indent=1),
    )


def entry(
    sha256: str,
    state: str,
    reasons: list[str],
    flags: list[str],
    seconds: float,
) -> dict:
    """One student's status, graded now."""
    return {
        "sha256": sha256,
        "state": state,
        "reasons": reasons,
        "flags": flags,
        "seconds": seconds,
        "graded_at": dt.datetime.now(dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


def submission_sha256(folder: Path) -> str:
    """sha256 over the submitted notebooks (names and bytes), the test of 'changed'."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def is_current(old: dict | None, sha256: str, autograded: Path) -> bool:
    """Whether a student's status ``old`` still holds for the submission with ``sha256``: the
    same notebooks, and either graded (its ``autograded`` folder is there) or failed (a failed
    submission is not retried until it changes)."""
    return bool(
        old
        and old.get("sha256") == sha256
        and (old.get("state") == FAILED or autograded.is_dir())
    )
