"""Grades from nbgrader's gradebook, in the forms an LMS imports (``make grades``).

Writes, into ``<course>/grades/``:

- ``<id>.csv`` per assignment: ``student_id, score, max_score, late_penalty, raw_score,
  submitted_at, flags``.  ``score`` is what the learner gets: ``raw_score`` (the autograded
  points, plus any manual points) minus nbgrader's ``late_penalty``, never below 0.  ``flags``
  joins, with "; ", the ``reasons`` and ``flags`` of the grading status (``status.py``: a
  failed run's reason, tampering found; every pod's on Kubernetes), what ``make collect``
  recorded in ``downloaded/<id>/collect_report.json`` ("late (Canvas)" for Canvas's ``LATE_``
  mark; the files of a learner who handed in no notebook), "no submission", and "needs manual
  grading".
- ``canvas.csv``: a Canvas gradebook import (Grades > Import): ``Student, ID, SIS User ID,
  SIS Login ID, Section``, a "Points Possible" row, then one column per assignment.  Canvas
  matches learners on ``ID`` (the Canvas user id) and assignments on the column title:
  ``<name> (<canvas assignment id>)`` updates an existing Canvas assignment, a bare name
  creates a new one.  Map assignment ids to Canvas ids in ``canvas_assignments.csv``
  (``assignment,canvas_assignment_id[,canvas_name]``) to update the ones already in Canvas.

Only assignments with at least one submission are exported, so that importing never writes
zeros for work that is not due yet.  Every student known to the gradebook, the roster or a
collect report (a learner who handed in only a PDF is in no gradebook) gets a row; a student
without a submission scores 0 with the flag "no submission", followed by what they handed in
when the collect saw files of theirs.  Canvas user
ids come from ``roster.csv`` (``canvas_id``), then from what ``make collect`` recorded
(``lms_students.csv``), then from the gradebook's ``lms_user_id``; students without one are
left out of ``canvas.csv`` and listed.

The gradebook is the one ``nbgrader_config.py`` names (``COURSE_DB_URL`` there selects a shared
PostgreSQL gradebook); ``--db-url`` overrides it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from .collect import LMS_STUDENTS, read_report, read_roster
from .config import gradebook_address, load_config
from .status import read_status

COLUMNS = [
    "student_id",
    "score",
    "max_score",
    "late_penalty",
    "raw_score",
    "submitted_at",
    "flags",
]
CANVAS_FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def _num(x: float) -> str:
    return f"{x:.10g}"


@dataclass
class Row:
    student_id: str
    score: float
    max_score: float
    late_penalty: float
    raw_score: float
    submitted_at: str
    flags: list[str]

    def csv(self) -> dict:
        return dict(
            student_id=self.student_id,
            score=_num(self.score),
            max_score=_num(self.max_score),
            late_penalty=_num(self.late_penalty),
            raw_score=_num(self.raw_score),
            submitted_at=self.submitted_at,
            flags="; ".join(self.flags),
        )


def collect_flags(
    report: dict,
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """From a collect report: {student: ["late (Canvas)"]} for Canvas's ``LATE_`` mark, and
    {student: what they handed in} for learners whose files held no notebook."""
    late = {
        c["student_id"]: ["late (Canvas)"]
        for c in report.get("collected", [])
        if c.get("late")
    }
    handed = {}
    for n in report.get("no_notebook", []):
        handed[n["student_id"]] = (
            f"handed in {', '.join(n['files'])}, no notebook of {report['assignment']}"
        )
        if n.get("late"):
            late[n["student_id"]] = ["late (Canvas)"]
    return late, handed


def assignment_rows(
    gb: Gradebook,
    assignment,
    students: list[str],
    status: dict,
    report: dict | None = None,
) -> list[Row]:
    """One row per student for one nbgrader ``Assignment``; ``report`` is its collect report."""
    late, handed = collect_flags(report or {})
    rows = []
    for sid in students:
        st = status.get(sid, {})
        flags = [
            str(x)
            for x in (st.get("reasons") or []) + (st.get("flags") or [])
        ]
        flags += late.get(sid, [])
        try:
            sub = gb.find_submission(assignment.name, sid)
        except MissingEntry:
            if not st:
                flags.append(
                    f"no submission ({handed[sid]})"
                    if sid in handed
                    else "no submission"
                )
            rows.append(
                Row(sid, 0.0, assignment.max_score, 0.0, 0.0, "", flags)
            )
            continue
        # graded from an earlier collect; the latest zip held no notebook of theirs
        if sid in handed:
            flags.append(f"latest collect: {handed[sid]}")
        raw = sub.score or 0.0
        penalty = sub.late_submission_penalty or 0.0
        if sub.needs_manual_grade:
            flags.append("needs manual grading")
        when = sub.timestamp.isoformat(" ") if sub.timestamp else ""
        rows.append(
            Row(
                sid,
                max(0.0, raw - penalty),
                assignment.max_score,
                penalty,
                raw,
                when,
                flags,
            )
        )
    return rows


def canvas_ids(
    course: Path, roster: list[dict], gb: Gradebook
) -> dict[str, dict]:
    """student id -> {ID, Student, SIS User ID, SIS Login ID, Section} for Canvas."""
    out: dict[str, dict] = {}
    for s in gb.students:
        if s.lms_user_id:
            name = ", ".join(x for x in (s.last_name, s.first_name) if x)
            out[s.id] = {"ID": s.lms_user_id, "Student": name}
    path = course / LMS_STUDENTS
    if path.exists():
        with path.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["lms"] == "canvas":
                    out[r["student_id"]] = {
                        "ID": r["lms_id"],
                        "Student": r["name"],
                    }
    for r in roster:
        if r.get("canvas_id"):
            out[r["student_id"]] = {
                "ID": r["canvas_id"],
                "Student": r.get("name")
                or out.get(r["student_id"], {}).get("Student", ""),
                "SIS User ID": r.get("sis_user_id", ""),
                "SIS Login ID": r.get("sis_login_id", ""),
                "Section": r.get("section", ""),
            }
    return out


def canvas_titles(course: Path, assignments: list[str]) -> dict[str, str]:
    """Column titles Canvas matches: ``name (canvas id)`` when ``canvas_assignments.csv`` maps it."""
    titles = {a: a for a in assignments}
    path = course / "canvas_assignments.csv"
    if path.exists():
        with path.open(newline="", encoding="utf-8-sig") as fh:
            for r in csv.DictReader(fh):
                a, cid = (
                    r.get("assignment", "").strip(),
                    r.get("canvas_assignment_id", "").strip(),
                )
                if a in titles and cid:
                    titles[a] = (
                        f"{(r.get('canvas_name') or a).strip()} ({cid})"
                    )
    return titles


def export(
    course: Path, db_url: str | None = None, only: list[str] | None = None
) -> dict:
    """Write the CSVs; return {"files": [...], "assignments": [...], "no_canvas_id": [...]}."""
    course = course.resolve()
    configured_url, course_id = gradebook_address(
        load_config(course), course
    )
    db_url = db_url or configured_url
    roster = read_roster(course / "roster.csv")
    out_dir = course / "grades"
    out_dir.mkdir(exist_ok=True)
    files, exported = [], {}
    with Gradebook(db_url, course_id=course_id) as gb:
        names = [a.name for a in gb.assignments]
        reports = {a: read_report(course, a) for a in names}
        seen = {
            n["student_id"]
            for r in reports.values()
            for n in r.get("no_notebook", [])
        }
        students = sorted(
            {s.id for s in gb.students}
            | {r["student_id"] for r in roster}
            | seen
        )
        unknown = sorted(set(only or []) - set(names))
        if unknown:
            raise ValueError(
                f"not in the gradebook: {', '.join(unknown)} (known: {', '.join(names) or 'none'}); "
                f"run `make release` to add assignments"
            )
        for a in gb.assignments:
            if (only and a.name not in only) or not a.submissions:
                continue
            rows = assignment_rows(
                gb, a, students, read_status(course, a.name), reports[a.name]
            )
            path = out_dir / f"{a.name}.csv"
            with path.open("w", newline="", encoding="utf-8") as fh:
                w = csv.DictWriter(fh, fieldnames=COLUMNS)
                w.writeheader()
                w.writerows(r.csv() for r in rows)
            files.append(path)
            exported[a.name] = (
                a.max_score,
                {r.student_id: r.score for r in rows},
            )
        ids = canvas_ids(course, roster, gb)

    titles = canvas_titles(course, list(exported))
    path = out_dir / "canvas.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CANVAS_FIXED + [titles[a] for a in exported])
        # Canvas's own export carries this row and its import accepts it back.
        w.writerow(
            ["    Points Possible", "", "", "", ""]
            + [_num(m) for m, _ in exported.values()]
        )
        for sid in students:
            if sid in ids:
                c = ids[sid]
                w.writerow(
                    [
                        c.get("Student", ""),
                        c["ID"],
                        c.get("SIS User ID", ""),
                        c.get("SIS Login ID", ""),
                        c.get("Section", ""),
                    ]
                    + [_num(scores[sid]) for _, scores in exported.values()]
                )
    files.append(path)
    return dict(
        files=files,
        assignments=list(exported),
        no_canvas_id=[s for s in students if s not in ids],
    )
