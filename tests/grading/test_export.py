"""`make grades`: per-assignment CSVs and a Canvas import, read from nbgrader's gradebook.

The gradebook is built with nbgrader's own API (two graded cells, three students, one late,
one with a failed grading run in the parallel grader's status file); what `make collect` saw
(Canvas's LATE mark, a learner who handed in only a PDF) comes from a real collect of a zip.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from course_utils.cli import export as export_cli
from course_utils.grading import export
from course_utils.grading.config import load_config
from course_utils.grading.feedback import generate as generate_feedback
from course_utils.grading.status import read_status
from tests.helpers import ROOT
from tests.grading.test_collect import make_zip, notebook, run_collect

AID = "01_qkv_retrieval"
# nbgrader's own add_submission trips SQLAlchemy's autoflush warning; it is harmless here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Object of type:sqlalchemy.exc.SAWarning"
)


@pytest.fixture
def course(tmp_path, monkeypatch):
    # the config's default: sqlite in the course
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    # alembic
    monkeypatch.setenv(
        "PATH",
        f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    course = tmp_path / "autograde"
    course.mkdir()
    shutil.copy2(ROOT / "autograde" / "nbgrader_config.py", course)
    cfg = load_config(course)
    due = dt.datetime(2026, 3, 1, 12, 0)
    with Gradebook(
        cfg.CourseDirectory.db_url, course_id=cfg.CourseDirectory.course_id
    ) as gb:
        gb.add_assignment(AID, duedate=due)
        # nothing submitted yet
        gb.add_assignment(
            "02_self_attention", duedate=due + dt.timedelta(days=7)
        )
        gb.add_notebook(AID, AID)
        gb.add_grade_cell("softmax", AID, AID, max_score=4, cell_type="code")
        gb.add_grade_cell(
            "retrieve", AID, AID, max_score=6, cell_type="code"
        )
        scores = {"asmith": (4, 6), "2222": (4, 1.5), "zoe-muller": (0, 0)}
        for sid, (a, b) in scores.items():
            gb.add_student(sid)
            late = sid == "2222"
            sub = gb.add_submission(
                AID,
                sid,
                timestamp=due + dt.timedelta(hours=30 if late else -1),
            )
            for grade in sub.notebooks[0].grades:
                grade.auto_score = a if grade.name == "softmax" else b
                grade.needs_manual_grade = False
            if late:
                sub.notebooks[0].late_submission_penalty = 1.0
        gb.add_student("nobody")  # in the gradebook, never submitted
        gb.db.commit()
    (course / "roster.csv").write_text(
        "student_id,canvas_id,moodle_name,email,name,sis_user_id,sis_login_id,section\n"
        'asmith,1234,,alice@example.org,"Smith, Alice",S-1,asmith,Lab A\n'
        'rosteronly,9999,,,"Only, Roster",,,\n'
    )
    (course / "lms_students.csv").write_text(
        "student_id,lms,lms_id,name\n2222,canvas,2222,jonesbob\n"
    )
    (course / "status").mkdir()
    (course / "status" / f"{AID}.json").write_text(
        json.dumps(
            {
                "zoe-muller": {
                    "sha256": "0" * 64,
                    "state": "failed",
                    "reasons": ["memory limit (2 GiB) exceeded"],
                    "flags": ["rebinds course_utils.grading.checks"],
                    "seconds": 12.5,
                    "graded_at": "2026-03-02T10:00:00",
                },
                "asmith": {
                    "sha256": "1" * 64,
                    "state": "graded",
                    "reasons": [],
                    "flags": [],
                    "seconds": 30.1,
                    "graded_at": "2026-03-02T10:00:00",
                },
            }
        )
    )
    return course


def read(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_per_assignment_csv(course):
    res = export.export(course)
    # 02 has no submission: never exported as zeros
    assert res["assignments"] == [AID]
    assert not (course / "grades" / "02_self_attention.csv").exists()
    rows = {
        r["student_id"]: r for r in read(course / "grades" / f"{AID}.csv")
    }
    assert list(rows) == [
        "2222",
        "asmith",
        "nobody",
        "rosteronly",
        "zoe-muller",
    ]
    assert rows["asmith"] == dict(
        student_id="asmith",
        score="10",
        max_score="10",
        late_penalty="0",
        raw_score="10",
        submitted_at="2026-03-01 11:00:00",
        flags="",
    )
    assert (
        rows["2222"]["score"],
        rows["2222"]["raw_score"],
        rows["2222"]["late_penalty"],
    ) == ("4.5", "5.5", "1")
    assert (
        rows["zoe-muller"]["flags"]
        == "memory limit (2 GiB) exceeded; rebinds course_utils.grading.checks"
    )
    assert (
        rows["nobody"]["flags"]
        == rows["rosteronly"]["flags"]
        == "no submission"
    )
    assert rows["nobody"]["score"] == "0"


def test_status_from_pods_is_merged(course):
    # On Kubernetes each pod writes status/<index>/<id>.json; the newest entry per student wins.
    (course / "status" / "3").mkdir()
    (course / "status" / "3" / f"{AID}.json").write_text(
        json.dumps(
            {
                "asmith": {
                    "state": "failed",
                    "reasons": ["time limit (900 s) exceeded"],
                    "flags": [],
                    "graded_at": "2026-03-05T08:00:00",
                }
            }
        )
    )
    export.export(course)
    rows = {
        r["student_id"]: r for r in read(course / "grades" / f"{AID}.csv")
    }
    assert rows["asmith"]["flags"] == "time limit (900 s) exceeded"
    assert rows["zoe-muller"]["flags"].startswith("memory limit")


def test_feedback_and_export_read_the_same_status(course):
    # After a cluster run the reasons are in the pods' files only: the learner's page and the
    # grade export both give them (feedback once read the top file alone and lost them).
    for pod, student, reason, when in [
        (
            "0",
            "2222",
            "the kernel died while running cell 3 (test_softmax)",
            "2026-03-04T09:00:00",
        ),
        (
            "1",
            "asmith",
            "time limit: the notebook was still running after 900 s",
            "2026-03-05T08:00:00",
        ),
    ]:
        (course / "status" / pod).mkdir()
        (course / "status" / pod / f"{AID}.json").write_text(
            json.dumps(
                {
                    student: {
                        "sha256": "2" * 64,
                        "state": "failed",
                        "reasons": [
                            f"{reason}; details in status/{AID}.logs/{student}.log"
                        ],
                        "flags": [],
                        "seconds": 3.0,
                        "graded_at": when,
                    }
                }
            )
        )
    status = read_status(course, AID)
    assert {s: status[s]["state"] for s in status} == {
        "2222": "failed",
        "asmith": "failed",
        "zoe-muller": "failed",
    }

    export.export(course)
    rows = {
        r["student_id"]: r for r in read(course / "grades" / f"{AID}.csv")
    }
    pages = {
        p.parent.parent.name: p.read_text(encoding="utf-8")
        for p in generate_feedback(
            course, AID, students=["2222", "asmith", "zoe-muller"]
        )
    }
    for student, entry in status.items():
        reason = entry["reasons"][0].split("; details in ")[0]
        assert rows[student]["flags"].startswith(entry["reasons"][0]), (
            student,
            rows[student],
        )
        assert (
            "could not be graded" in pages[student]
            and reason in pages[student]
        ), (student, reason)
        # the instructor's log is not the learner's business
        assert "details in" not in pages[student]


def test_canvas_csv(course):
    res = export.export(course)
    with (course / "grades" / "canvas.csv").open(newline="") as fh:
        table = list(csv.reader(fh))
    assert table[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        AID,
    ]
    assert table[1] == ["    Points Possible", "", "", "", "", "10"]
    body = {r[1]: r for r in table[2:]}
    assert body["1234"] == [
        "Smith, Alice",
        "1234",
        "S-1",
        "asmith",
        "Lab A",
        "10",
    ]
    assert body["2222"] == ["jonesbob", "2222", "", "", "", "4.5"]
    assert body["9999"][-1] == "0"
    assert res["no_canvas_id"] == ["nobody", "zoe-muller"]


def test_canvas_assignment_ids_and_cli(course, capsys):
    (course / "canvas_assignments.csv").write_text(
        f"assignment,canvas_assignment_id,canvas_name\n{AID},55501,Chapter 1: retrieval\n"
    )
    assert export_cli.main(["--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "canvas.csv" in out and "nobody, zoe-muller" in out
    header = (course / "grades" / "canvas.csv").read_text().splitlines()[0]
    assert header.endswith(",Chapter 1: retrieval (55501)")
    assert (
        export_cli.main(["--course", str(course), "--assignment", "99_nope"])
        == 2
    )
    assert "not in the gradebook: 99_nope" in capsys.readouterr().err


@pytest.mark.parametrize(
    "roster", [True, False], ids=["roster", "no_roster"]
)
def test_what_collect_saw_reaches_the_grades(course, roster):
    # Canvas's LATE mark becomes a flag; a learner who handed in only a PDF is in no gradebook
    # and gets a 0 row saying what they handed in, roster or not; a roster learner absent from
    # the zip gets "no submission"; a graded learner whose latest upload is no notebook is flagged.
    if not roster:
        (course / "roster.csv").unlink()
    for aid in (AID, "02_self_attention"):
        (course.parent / "notebooks" / aid).mkdir(parents=True)
        (course.parent / "notebooks" / aid / f"{aid}.ipynb").write_text(
            notebook("release")
        )
    zp = make_zip(
        course.parent / "submissions.zip",
        [
            (
                f"jonesbob_LATE_2222_5679_{AID}.ipynb",
                notebook("bob"),
                (2026, 3, 2, 18, 0, 0),
            ),
            (
                "leecarol_3333_5680_answers.pdf",
                "%PDF-1.7",
                (2026, 3, 1, 9, 0, 0),
            ),
            (
                "smithalice_1234_5690_notes.txt",
                "my notes",
                (2026, 3, 1, 9, 0, 0),
            ),
        ],
    )
    run_collect(course.parent, zp)
    export.export(course)

    rows = {
        r["student_id"]: r for r in read(course / "grades" / f"{AID}.csv")
    }
    assert rows["2222"]["flags"] == "late (Canvas)"
    assert (rows["3333"]["score"], rows["3333"]["flags"]) == (
        "0",
        f"no submission (handed in answers.pdf, no notebook of {AID})",
    )
    notes = f"handed in notes.txt, no notebook of {AID}"
    assert ("rosteronly" in rows) == roster
    if roster:  # Canvas user 1234 is asmith, graded before
        assert rows["rosteronly"]["flags"] == "no submission"
        assert (rows["asmith"]["score"], rows["asmith"]["flags"]) == (
            "10",
            f"latest collect: {notes}",
        )
    else:  # nothing ties Canvas user 1234 to asmith: a learner of their own
        assert (
            rows["asmith"]["flags"] == ""
            and rows["1234"]["flags"] == f"no submission ({notes})"
        )
    with (course / "grades" / "canvas.csv").open(newline="") as fh:
        canvas = {r[1]: r for r in list(csv.reader(fh))[2:]}
    assert canvas["3333"] == ["leecarol", "3333", "", "", "", "0"]
