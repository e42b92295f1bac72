"""LMS submission zips (Canvas, Moodle) -> nbgrader's ``submitted/<student>/<id>/`` folder.

``make collect ZIP=subs.zip ID=01_qkv_retrieval`` runs ``python -m course_utils.cli.collect``,
which copies the zip into ``autograde/downloaded/<id>/archive/``, runs ``nbgrader zip_collect``
(configured in ``autograde/nbgrader_config.py`` to use the two plugins below) and prints what
was collected and what was skipped, with the reason for each skipped file.

The file names the two LMSs write (checked against their documentation and source):

- Canvas, "Download Submissions": ``<sortablename>_<userid>_<number>_<original name>``, with
  ``LATE_`` after the sortable name for a late submission (``smithalice_LATE_1234_5678_x.ipynb``).
  Canvas renames a file that a learner uploads twice to ``x-1.ipynb``, ``x-2.ipynb``.
- Moodle, "Download all submissions": one folder per participant and submission plugin,
  ``<Full Name>_<participant id>_assignsubmission_file_/<original name>`` (or, with "download
  as folders" off, the same prefix glued to the file name).  Moodle's participant id is
  per-assignment, so it never identifies a learner across assignments.

Learner -> nbgrader student id: the roster ``autograde/roster.csv`` when it names the learner
(columns in ``ROSTER_COLUMNS``); otherwise the Canvas user id (numeric, stable for the life
of the account), or for Moodle a slug of the full name (``Zoë Müller`` -> ``zoe-muller``).
Learners missing from an existing roster are collected under that default id and reported.

A learner's copy of the notebook counts as the notebook: Canvas's ``x-1.ipynb``, a browser's
``x (1).ipynb`` and Colab's download name ``Copy_of_x.ipynb`` (``Copy of x.ipynb``) are
``x.ipynb``.  A collected notebook that Jupyter cannot open (a truncated upload) is still
collected, so that its learner is graded (and fails with the cause), and the report lists it.
A learner whose files hold no notebook of the assignment (a PDF only) is listed in the report
under ``no_notebook``; ``make grades`` gives them a "no submission" row.  The report,
``downloaded/<id>/collect_report.json``, is the one record of what each collect found per
assignment (Canvas's ``LATE_`` mark included), which the grade export reads; which LMS account
each student id is lives in ``lms_students.csv``.

Several files for the same student and notebook (a resubmission, a late copy): the newest
wins, by the submission time, then by Canvas's ``-N`` resubmission suffix, then by Canvas's
file number (both only grow).  The newest is what the learner last chose to hand in, and it
carries the time nbgrader's late penalty must see.  Neither LMS writes the submission time
into a file name, so the time is the zip entry's (which the LMS sets from the stored file);
``CourseExtractor`` keeps it as the extracted file's modification time, and nbgrader writes
it to ``timestamp.txt``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
import shutil
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from dateutil.tz import gettz
from traitlets import Unicode

from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from nbgrader.utils import find_all_notebooks

ROSTER_COLUMNS = (
    "student_id",
    "canvas_id",
    "moodle_name",
    "email",
    "name",
    "sis_user_id",
    "sis_login_id",
    "section",
)
"""Columns of ``autograde/roster.csv``.  Only ``student_id`` is required; ``canvas_id`` (the
numeric Canvas user id) and ``moodle_name`` (the full name as Moodle prints it) match learners
in submission zips; ``name``, ``sis_user_id``, ``sis_login_id`` and ``section`` fill the
Canvas gradebook import (``course_utils.grading.export``); ``email`` is for people."""

LMS_STUDENTS = "lms_students.csv"
"""Written by every collect into the course directory: which LMS learner each student id is
(``student_id,lms,lms_id,name``), so that the grade export can name Canvas users.  Every
learner seen in a zip is recorded, with or without a notebook."""

REPORT = "collect_report.json"
"""Written by every collect into ``downloaded/<id>/``: ``collected`` (with Canvas's ``late``
mark), ``skipped`` (file and reason), ``unknown`` (learners an existing roster lacks),
``unreadable`` (collected notebooks Jupyter cannot open) and ``no_notebook`` (learners who
handed in no notebook of the assignment, with their files)."""

CANVAS = re.compile(
    r"^(?P<sortable>[^/]+?)_(?P<late>LATE_)?(?P<user>\d+)_(?P<number>\d+)_(?P<rest>.+)$"
)
MOODLE = re.compile(
    r"^(?P<name>[^/]+?)_(?P<participant>\d+)_assign(?P<area>submission|feedback)"
    r"_(?P<plugin>[a-z]+)_(?P<rest>.*)$"
)
# Copies a learner made before uploading: Canvas's "x-1.ipynb", a browser's "x (1).ipynb".
COPY_SUFFIX = re.compile(r"(?:-(?P<canvas>\d+)|\s*\((?P<browser>\d+)\))$")
# Colab names a copy of a notebook "Copy of x" and downloads it as "Copy_of_x.ipynb".
COLAB_PREFIX = re.compile(r"^(?:copy[ _]of[ _])+", re.I)
TRUNCATED = "the file ends early (the upload was cut off?)"
RESUBMIT = "download the notebook from Jupyter or Colab again (File, Download) and submit that file"


def slug(name: str) -> str:
    """A file-system-safe, stable student id from a full name: ``Zoë  Müller`` -> ``zoe-muller``."""
    ascii_name = (
        unicodedata.normalize("NFKD", name)
        .encode("ascii", "ignore")
        .decode()
    )
    return (
        re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
        or "unnamed"
    )


def _norm_name(name: str) -> str:
    return " ".join(name.casefold().split())


def report_path(course: Path, assignment: str) -> Path:
    """Where collect writes, and the grade export reads, an assignment's collect report."""
    return Path(course) / "downloaded" / assignment / REPORT


def read_report(course: Path, assignment: str) -> dict:
    """The assignment's collect report; {} when it was never collected from an LMS zip."""
    path = report_path(course, assignment)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path} is not valid JSON ({err}); run `make collect` for {assignment} again"
        ) from err


def notebook_problem(path: str | os.PathLike) -> str | None:
    """Why the file at ``path`` is not a notebook Jupyter can open, in words for the learner
    (it never names a folder); None when it is one."""
    data = Path(path).read_bytes()
    if not data.strip():
        return "the file is empty (the upload failed, or the notebook was never saved)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        # cut off inside a character
        if err.reason == "unexpected end of data":
            return TRUNCATED
        return (
            "the file is not text (another kind of file renamed to .ipynb?)"
        )
    # a notebook is one JSON object: a cut-off file lacks its end
    if not text.rstrip().endswith("}"):
        return TRUNCATED
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        return (
            f"the file is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}; "
            f"edited outside Jupyter?)"
        )
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("nbformat"), int)
        or (raw["nbformat"] >= 4 and not isinstance(raw.get("cells"), list))
    ):
        return "the file is JSON but not a Jupyter notebook (no notebook format version or no cells)"
    return None


def unreadable_reason(folder: str | os.PathLike) -> str | None:
    """The reason, cause and fix, why a submitted folder's notebooks cannot be graded (a
    learner reads it on the feedback page: file names only); None when all can be read."""
    problems = [
        f"{nb.name} is not a readable notebook: {why}"
        for nb in sorted(Path(folder).glob("*.ipynb"))
        if (why := notebook_problem(nb))
    ]
    return "; ".join(problems + [RESUBMIT]) if problems else None


def read_roster(path: Path) -> list[dict]:
    """Rows of the roster CSV (missing file: empty list).  Raises ``ValueError`` naming the fix."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or "student_id" not in reader.fieldnames:
            raise ValueError(
                f"{path}: the roster needs a header row with a 'student_id' column "
                f"(known columns: {', '.join(ROSTER_COLUMNS)})"
            )
        rows = [
            {k: (v or "").strip() for k, v in row.items() if k}
            for row in reader
        ]
    missing = [i + 2 for i, row in enumerate(rows) if not row["student_id"]]
    if missing:
        raise ValueError(
            f"{path}: empty student_id on line(s) {missing}; fill them or delete the rows"
        )
    return rows


@dataclass
class Candidate:
    """One extracted file that a learner handed in through an LMS."""

    path: str  # absolute path in the extracted folder
    rel: str  # path relative to the extracted folder, for messages
    lms: str  # "canvas" or "moodle"
    lms_id: str  # Canvas user id, or Moodle participant id
    name: str  # Canvas sortable name, or Moodle full name
    original: str  # the learner's own file name
    notebook: str  # original with copy prefixes and suffixes removed
    copy_number: int  # Canvas "-N" / browser "(N)" suffix, 0 when none
    file_number: (
        int  # Canvas's second number (grows with time), 0 for Moodle
    )
    late: bool  # Canvas marked it LATE_
    timestamp: dt.datetime  # submission time, timezone-aware
    student_id: str = ""
    notes: list[str] = field(default_factory=list)

    def order(self):
        return (self.timestamp, self.copy_number, self.file_number, self.rel)


def parse_lms_path(rel: str) -> dict | None:
    """The LMS, learner and original file name that a path inside the extracted folder names.

    The first path component that matches a Canvas or Moodle prefix decides (the zip's own
    folder comes first and matches neither; a learner's own zip inside Canvas's zip becomes a
    folder named after it, and then the notebook's own name is the last component).
    """
    parts = Path(rel).parts
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        m = MOODLE.match(part)
        if m and (last or m["rest"] == ""):
            return dict(
                lms="moodle",
                lms_id=m["participant"],
                name=m["name"].strip(),
                original=m["rest"] if last else parts[-1],
                late=False,
                number=0,
                plugin=m["plugin"],
                area=m["area"],
            )
        m = CANVAS.match(part)
        if m:
            return dict(
                lms="canvas",
                lms_id=m["user"],
                name=m["sortable"],
                original=m["rest"] if last else parts[-1],
                late=bool(m["late"]),
                number=int(m["number"]),
                plugin="file",
                area="submission",
            )
    return None


def strip_copy_suffix(filename: str) -> tuple[str, int]:
    """The file a learner's copy stands for, and the copy's number: ``x-2.ipynb`` ->
    (``x.ipynb``, 2); ``x (1).ipynb`` -> (``x.ipynb``, 1); Colab's ``Copy_of_x.ipynb`` and
    ``Copy of x.ipynb`` -> (``x.ipynb``, 0); else (name, 0)."""
    stem, ext = os.path.splitext(filename)
    stem = COLAB_PREFIX.sub("", stem) or stem
    m = COPY_SUFFIX.search(stem)
    if not m:
        return stem + ext, 0
    return stem[: m.start()] + ext, int(m["canvas"] or m["browser"])


class CourseExtractor(ExtractorPlugin):
    """nbgrader's extractor, keeping each zip entry's time as the extracted file's mtime.

    nbgrader unpacks with setuptools, which stamps files with the unpacking time; the
    collector needs the LMS's time to fill ``timestamp.txt`` (late penalties).
    """

    def extract(self, archive_path: str, extracted_path: str) -> None:
        super().extract(archive_path, extracted_path)
        collector = getattr(self.parent, "collector_plugin_inst", None)
        tz = gettz(getattr(collector, "zip_timezone", "UTC"))
        for root, _, files in os.walk(archive_path):
            for name in files:
                src = os.path.join(root, name)
                dest_dir = os.path.join(
                    extracted_path, os.path.relpath(root, archive_path)
                )
                stem, ext = os.path.splitext(name)
                if ext in self.zip_ext and zipfile.is_zipfile(src):
                    with zipfile.ZipFile(src) as zf:
                        _stamp(zf, os.path.join(dest_dir, stem), tz)
                elif os.path.exists(os.path.join(dest_dir, name)):
                    shutil.copystat(src, os.path.join(dest_dir, name))


def _stamp(zf: zipfile.ZipFile, dest: str, tz) -> None:
    """Set the mtime of every file extracted from ``zf`` into ``dest`` to its entry's time."""
    for info in zf.infolist():
        if info.is_dir():
            continue
        target = os.path.join(dest, info.filename)
        when = dt.datetime(*info.date_time, tzinfo=tz).timestamp()
        if os.path.exists(target):
            os.utime(target, (when, when))
        stem, ext = os.path.splitext(target)
        # nbgrader unpacked a learner's own zip next to it, into <stem>/
        if ext == ".zip":
            try:
                with zipfile.ZipFile(io.BytesIO(zf.read(info))) as inner:
                    _stamp(inner, stem, tz)
            except zipfile.BadZipFile:
                pass


class CourseCollector(FileNameCollectorPlugin):
    """Collects Canvas and Moodle submission files; configured in ``nbgrader_config.py``.

    nbgrader calls :meth:`collect` once per extracted file.  The first call plans the whole
    folder (so that the newest of several files can win and each skipped file gets a reason),
    writes ``downloaded/<id>/collect_report.json`` and ``lms_students.csv``, and every call
    then answers from the plan.
    """

    roster = Unicode(
        "roster.csv",
        help="Roster CSV, relative to the course directory "
        "(columns: see course_utils.grading.collect.ROSTER_COLUMNS).",
    ).tag(config=True)
    zip_timezone = Unicode(
        "UTC",
        help="Time zone of the times stored in the LMS's zip "
        "(zip entries carry no zone).",
    ).tag(config=True)

    _plan: dict | None = None

    # --------------------------------------------------------------- nbgrader's entry point
    def collect(self, submitted_file: str) -> dict | None:
        if self._plan is None:
            self._plan = self.plan()
        return self._plan["answers"].get(os.path.abspath(submitted_file))

    # --------------------------------------------------------------- planning
    def _coursedir(self):
        app = self.parent
        if app is None or not hasattr(app, "coursedir"):
            raise RuntimeError(
                "CourseCollector runs inside `nbgrader zip_collect` (it needs the course directory)"
            )
        return app

    def plan(self) -> dict:
        app = self._coursedir()
        cd = app.coursedir
        aid = cd.assignment_id
        extracted = app._format_collect_path(app.extracted_directory)
        root = Path(cd.root)
        release_root = Path(cd.format_path(cd.release_directory, ".", "."))
        ours = set(
            find_all_notebooks(
                cd.format_path(cd.release_directory, ".", aid)
            )
        )
        if not ours:
            raise RuntimeError(
                f"no released notebook for assignment {aid!r} in {release_root}: "
                f"check the id, or run `make release` first"
            )
        others = {
            nb: d.name
            for d in release_root.iterdir()
            if d.is_dir() and d.name != aid
            for nb in find_all_notebooks(str(d))
        }
        tz = gettz(self.zip_timezone)
        if tz is None:
            raise ValueError(
                f"CourseCollector.zip_timezone={self.zip_timezone!r} is not a time zone name"
            )

        skipped: list[dict] = []
        handed_in: list[
            Candidate
        ] = []  # every file a learner handed in, notebook or not
        candidates: list[
            Candidate
        ] = []  # the notebooks of this assignment among them
        for dirpath, _, files in os.walk(extracted):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, extracted)
                info = parse_lms_path(rel)
                if info is None:
                    skipped.append(
                        dict(
                            file=rel,
                            reason="not named like a Canvas or Moodle submission",
                        )
                    )
                    continue
                if info["area"] != "submission":
                    skipped.append(
                        dict(
                            file=rel,
                            reason=f"Moodle {info['plugin']} {info['area']}, not a submitted file",
                        )
                    )
                    continue
                notebook, copy_number = strip_copy_suffix(info["original"])
                c = Candidate(
                    path=os.path.abspath(path),
                    rel=rel,
                    lms=info["lms"],
                    lms_id=info["lms_id"],
                    name=info["name"],
                    original=info["original"],
                    notebook=notebook,
                    copy_number=copy_number,
                    file_number=info["number"],
                    late=info["late"],
                    timestamp=dt.datetime.fromtimestamp(
                        os.path.getmtime(path), tz
                    ),
                )
                handed_in.append(c)
                if info["plugin"] != "file":
                    reason = f"Moodle {info['plugin']} {info['area']}, not a submitted file"
                elif os.path.splitext(notebook)[1] not in self.valid_ext:
                    reason = "not a notebook"
                elif notebook not in ours:
                    reason = (
                        f"notebook of another assignment ({others[notebook]})"
                        if notebook in others
                        else f"not a notebook of {aid} (expected {', '.join(sorted(ours))})"
                    )
                else:
                    candidates.append(c)
                    continue
                skipped.append(dict(file=rel, reason=reason))

        # Every learner gets an id, so that one who handed in no notebook still gets a grade row.
        unknown = self._assign_student_ids(handed_in, root / self.roster)

        # Newest wins per (student, notebook); see the module docstring for why.
        best: dict[tuple[str, str], Candidate] = {}
        for c in sorted(candidates, key=Candidate.order):
            key = (c.student_id, c.notebook)
            if key in best:
                skipped.append(
                    dict(
                        file=best[key].rel,
                        reason=f"older than {c.rel} for student {c.student_id}",
                    )
                )
            best[key] = c

        answers = {
            c.path: dict(
                student_id=c.student_id,
                file_id=c.notebook,
                timestamp=c.timestamp.isoformat(),
            )
            for c in best.values()
        }
        chosen = sorted(
            best.values(), key=lambda c: (c.student_id, c.notebook)
        )
        collected = [
            dict(
                student_id=c.student_id,
                lms=c.lms,
                lms_id=c.lms_id,
                name=c.name,
                file=c.rel,
                timestamp=c.timestamp.isoformat(),
                late=c.late,
                notes=c.notes,
            )
            for c in chosen
        ]
        # Collected all the same (the learner is graded, and fails with the cause), and reported
        # now, while the learner can still upload it again.
        unreadable = [
            dict(
                student_id=c.student_id,
                file=c.rel,
                reason=f"not a readable notebook: {why}; ask the learner to upload it again",
            )
            for c in chosen
            if (why := notebook_problem(c.path))
        ]
        with_notebook = {c.student_id for c in chosen}
        no_notebook: dict[str, dict] = {}
        for c in sorted(handed_in, key=lambda c: (c.student_id, c.original)):
            if c.student_id in with_notebook:
                continue
            entry = no_notebook.setdefault(
                c.student_id,
                dict(
                    student_id=c.student_id,
                    lms=c.lms,
                    lms_id=c.lms_id,
                    name=c.name,
                    files=[],
                    late=False,
                ),
            )
            if c.original not in entry["files"]:
                entry["files"].append(c.original)
            entry["late"] = entry["late"] or c.late
        report = dict(
            assignment=aid,
            collected=collected,
            skipped=skipped,
            unknown=unknown,
            unreadable=unreadable,
            no_notebook=list(no_notebook.values()),
        )
        path = report_path(root, aid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1))
        update_lms_students(root / LMS_STUDENTS, handed_in)
        for line in summary_lines(report):
            self.log.info(line)
        return dict(answers=answers, report=report)

    def _assign_student_ids(
        self, candidates: list[Candidate], roster_path: Path
    ) -> list[dict]:
        """Fill ``student_id`` of every candidate; return the learners an existing roster lacks."""
        roster = read_roster(roster_path)
        by_canvas = {
            r["canvas_id"]: r["student_id"]
            for r in roster
            if r.get("canvas_id")
        }
        by_moodle = {
            _norm_name(r["moodle_name"]): r["student_id"]
            for r in roster
            if r.get("moodle_name")
        }
        unknown: dict[tuple[str, str], dict] = {}
        # Two Moodle learners with the same name get different participant ids: keep them apart.
        slugs: dict[str, set[str]] = {}
        for c in candidates:
            if c.lms == "moodle" and _norm_name(c.name) not in by_moodle:
                slugs.setdefault(slug(c.name), set()).add(c.lms_id)
        for c in candidates:
            if c.lms == "canvas":
                sid = by_canvas.get(c.lms_id)
                default = c.lms_id
            else:
                sid = by_moodle.get(_norm_name(c.name))
                default = slug(c.name)
                if len(slugs.get(default, ())) > 1:
                    default = f"{default}-{c.lms_id}"
                    c.notes.append(
                        f"two Moodle learners named {c.name!r}: id carries the participant id"
                    )
            if sid is None:
                sid = default
                if roster:
                    unknown[(c.lms, c.lms_id)] = dict(
                        lms=c.lms,
                        lms_id=c.lms_id,
                        name=c.name,
                        student_id=sid,
                    )
                    c.notes.append("not in the roster")
            c.student_id = sid
        return list(unknown.values())


def update_lms_students(path: Path, chosen) -> None:
    """Merge ``student_id -> LMS learner`` of this collect into ``lms_students.csv``."""
    rows: dict[tuple[str, str], dict] = {}
    if path.exists():
        with path.open(newline="", encoding="utf-8") as fh:
            rows = {
                (r["student_id"], r["lms"]): r for r in csv.DictReader(fh)
            }
    for c in chosen:
        rows[(c.student_id, c.lms)] = dict(
            student_id=c.student_id, lms=c.lms, lms_id=c.lms_id, name=c.name
        )
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(
            fh, fieldnames=["student_id", "lms", "lms_id", "name"]
        )
        w.writeheader()
        w.writerows(
            sorted(rows.values(), key=lambda r: (r["student_id"], r["lms"]))
        )


def summary_lines(report: dict) -> list[str]:
    """The human summary of a collect report."""
    lines = [
        f"{report['assignment']}: collected {len(report['collected'])} submission(s), "
        f"skipped {len(report['skipped'])} file(s)"
    ]
    shown = (
        report["collected"]
        if len(report["collected"]) <= 40
        else report["collected"][:30]
    )
    for c in shown:
        extra = ", ".join(
            (["LATE in Canvas"] if c["late"] else []) + c["notes"]
        )
        lines.append(
            f"  collected {c['student_id']:<16} {c['timestamp']}  {c['file']}"
            + (f"  ({extra})" if extra else "")
        )
    if len(shown) < len(report["collected"]):
        lines.append(
            f"  ... and {len(report['collected']) - len(shown)} more (all in collect_report.json)"
        )
    for s in report["skipped"]:
        lines.append(f"  skipped   {s['file']}: {s['reason']}")
    if report.get("unreadable"):
        lines.append(
            f"  {len(report['unreadable'])} collected notebook(s) cannot be opened (grading will fail "
            f"them, naming the cause):"
        )
        for u in report["unreadable"]:
            lines.append(
                f"    {u['student_id']:<16} {u['file']}: {u['reason']}"
            )
    if report.get("no_notebook"):
        lines.append(
            f"  {len(report['no_notebook'])} learner(s) handed in no notebook of {report['assignment']} "
            f"(`make grades` gives them a 'no submission' row):"
        )
        for n in report["no_notebook"]:
            late = " (LATE in Canvas)" if n["late"] else ""
            lines.append(
                f"    {n['student_id']:<16} {n['lms']} {n['name']!r}: {', '.join(n['files'])}{late}"
            )
    if report["unknown"]:
        lines.append(
            f"  {len(report['unknown'])} learner(s) not in the roster, given a default id "
            f"(add them to roster.csv and collect again to rename):"
        )
        for u in report["unknown"]:
            lines.append(
                f"    {u['lms']} {u['lms_id']} {u['name']!r} -> {u['student_id']}"
            )
    return lines
