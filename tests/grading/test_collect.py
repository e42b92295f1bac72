"""`make collect`: Canvas and Moodle submission zips land in nbgrader's submitted/ folder.

Each test builds a tiny course (the real nbgrader config, two released notebooks) and a fake
LMS zip with the awkward cases: a late resubmission, a copy suffix, Colab's copy name, another
assignment's notebook, stray files, a learner the roster does not know, a learner who handed in
only a PDF, and a truncated upload (collected, reported, and failed with its cause by the grader).
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import collect
from tests.helpers import ROOT, grading_sandbox

AID = "01_qkv_retrieval"


def notebook(tag: str) -> str:
    return nbformat.writes(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(tag)])
    )


def make_course(tmp_path: Path, roster: list[dict] | None = None) -> Path:
    course = tmp_path / "course"
    (course / "autograde").mkdir(parents=True)
    shutil.copy2(
        ROOT / "autograde" / "nbgrader_config.py", course / "autograde"
    )
    for aid in (AID, "02_self_attention"):
        (course / "notebooks" / aid).mkdir(parents=True)
        (course / "notebooks" / aid / f"{aid}.ipynb").write_text(
            notebook("release")
        )
    if roster:
        with (course / "autograde" / "roster.csv").open(
            "w", newline=""
        ) as fh:
            w = csv.DictWriter(fh, fieldnames=collect.ROSTER_COLUMNS)
            w.writeheader()
            w.writerows(roster)
    return course


def make_zip(path: Path, entries: list[tuple[str, str, tuple]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text, when in entries:
            zf.writestr(zipfile.ZipInfo(name, date_time=when), text)
    return path


def run_collect(course: Path, zip_path: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "course_utils.cli.collect",
            str(zip_path),
            AID,
            "--course",
            str(course / "autograde"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def submitted(course: Path, student: str) -> Path:
    return course / "autograde" / "submitted" / student / AID


def report(course: Path) -> dict:
    return json.loads(
        (
            course / "autograde" / "downloaded" / AID / "collect_report.json"
        ).read_text()
    )


def test_file_names():
    assert collect.parse_lms_path(
        "z/smithalice_LATE_1234_5678_x-2.ipynb"
    ) == dict(
        lms="canvas",
        lms_id="1234",
        name="smithalice",
        original="x-2.ipynb",
        late=True,
        number=5678,
        plugin="file",
        area="submission",
    )
    m = collect.parse_lms_path(
        "z/Ann Lee_77_assignsubmission_file_/sub/x.ipynb"
    )
    assert (m["lms"], m["lms_id"], m["name"], m["original"]) == (
        "moodle",
        "77",
        "Ann Lee",
        "x.ipynb",
    )
    assert (
        collect.parse_lms_path("z/Ann Lee_77_assignsubmission_file_x.ipynb")[
            "original"
        ]
        == "x.ipynb"
    )
    assert collect.parse_lms_path("z/01_qkv_retrieval.ipynb") is None
    assert collect.strip_copy_suffix("x-12.ipynb") == ("x.ipynb", 12)
    assert collect.strip_copy_suffix("x (1).ipynb") == ("x.ipynb", 1)
    assert collect.strip_copy_suffix("01_qkv_retrieval.ipynb") == (
        "01_qkv_retrieval.ipynb",
        0,
    )
    # Colab's download name for a copy, with an underscore or (Moodle keeps it) a space.
    assert collect.strip_copy_suffix("Copy_of_01_qkv_retrieval.ipynb") == (
        "01_qkv_retrieval.ipynb",
        0,
    )
    assert collect.strip_copy_suffix("Copy of Copy of x (2).ipynb") == (
        "x.ipynb",
        2,
    )
    assert (
        collect.parse_lms_path("smithalice_1234_5678_Copy_of_x.ipynb")[
            "original"
        ]
        == "Copy_of_x.ipynb"
    )
    assert (
        collect.slug(" Zoë  Müller-Lüdenscheidt ")
        == "zoe-muller-ludenscheidt"
    )


def test_canvas_zip(tmp_path):
    course = make_course(
        tmp_path,
        roster=[
            dict(student_id="asmith", canvas_id="1234", name="Smith, Alice")
        ],
    )
    zp = make_zip(
        tmp_path / "submissions.zip",
        [
            (
                f"smithalice_1234_5678_{AID}.ipynb",
                notebook("alice on time"),
                (2026, 3, 1, 10, 0, 0),
            ),
            (
                f"smithalice_LATE_1234_5690_{AID}-1.ipynb",
                notebook("alice late"),
                (2026, 3, 3, 9, 0, 0),
            ),
            (
                f"jonesbob_2222_5679_{AID}.ipynb",
                notebook("bob"),
                (2026, 3, 1, 11, 0, 0),
            ),
            (
                "jonesbob_2222_5679_02_self_attention.ipynb",
                notebook("bob, wrong chapter"),
                (2026, 3, 1, 11, 0, 0),
            ),
            (
                "leecarol_3333_5680_my_answers.ipynb",
                notebook("carol renamed it"),
                (2026, 3, 1, 12, 0, 0),
            ),
            ("readme.txt", "not a submission", (2026, 3, 1, 12, 0, 0)),
        ],
    )
    out = run_collect(course, zp).stdout
    assert f"{AID}: collected 2 submission(s), skipped 4 file(s)" in out, out

    alice = submitted(course, "asmith")
    # the newest wins
    assert "alice late" in (alice / f"{AID}.ipynb").read_text()
    assert (
        alice / "timestamp.txt"
    ).read_text().strip() == "2026-03-03 09:00:00"
    # not in the roster: default id, reported
    bob = submitted(course, "2222")
    assert "bob" in (bob / f"{AID}.ipynb").read_text()
    assert (
        bob / "timestamp.txt"
    ).read_text().strip() == "2026-03-01 11:00:00"
    assert not (course / "autograde" / "submitted" / "3333").exists()

    rep = report(course)
    reasons = {Path(s["file"]).name: s["reason"] for s in rep["skipped"]}
    assert reasons[f"smithalice_1234_5678_{AID}.ipynb"].startswith(
        "older than"
    )
    assert (
        reasons["jonesbob_2222_5679_02_self_attention.ipynb"]
        == "notebook of another assignment (02_self_attention)"
    )
    assert (
        "not a notebook of 01_qkv_retrieval"
        in reasons["leecarol_3333_5680_my_answers.ipynb"]
    )
    assert "not named like" in reasons["readme.txt"]
    assert rep["unknown"] == [
        dict(
            lms="canvas", lms_id="2222", name="jonesbob", student_id="2222"
        ),
        dict(
            lms="canvas", lms_id="3333", name="leecarol", student_id="3333"
        ),
    ]
    assert "not in the roster" in out and "LATE in Canvas" in out
    # Carol handed in no notebook of this assignment: listed, so that the grades give her a row.
    assert rep["no_notebook"] == [
        dict(
            student_id="3333",
            lms="canvas",
            lms_id="3333",
            name="leecarol",
            files=["my_answers.ipynb"],
            late=False,
        )
    ]
    assert rep["unreadable"] == []
    with (course / "autograde" / collect.LMS_STUDENTS).open() as fh:
        ids = {r["student_id"]: r["lms_id"] for r in csv.DictReader(fh)}
    assert ids == {"asmith": "1234", "2222": "2222", "3333": "3333"}


def test_moodle_zip(tmp_path):
    course = make_course(
        tmp_path,
        roster=[dict(student_id="asmith", moodle_name="alice  SMITH")],
    )
    folder = "{}_{}_assignsubmission_file_/"
    zp = make_zip(
        tmp_path / "COURSE-Attention-01-1234.zip",
        [
            (
                folder.format("Alice Smith", 501) + f"{AID}.ipynb",
                notebook("alice"),
                (2026, 3, 1, 10, 0, 0),
            ),
            (
                folder.format("Zoë Müller", 502) + f"{AID}.ipynb",
                notebook("zoe first"),
                (2026, 3, 1, 10, 0, 0),
            ),
            (
                folder.format("Zoë Müller", 502) + f"{AID} (1).ipynb",
                notebook("zoe second"),
                (2026, 3, 2, 8, 30, 0),
            ),
            (
                "Bob Jones_503_assignsubmission_onlinetext_/onlinetext.html",
                "<p>hi</p>",
                (2026, 3, 1, 10, 0, 0),
            ),
            (
                f"Carol Lee_504_assignsubmission_file_{AID}.ipynb",
                notebook("carol flat"),
                (2026, 3, 1, 9, 0, 0),
            ),
            (
                folder.format("Carol Lee", 504) + "02_self_attention.ipynb",
                notebook("carol ch2"),
                (2026, 3, 1, 9, 0, 0),
            ),
            (
                folder.format("Ann Lee", 505) + f"Copy of {AID}.ipynb",
                notebook("ann from colab"),
                (2026, 3, 1, 9, 0, 0),
            ),
            (
                folder.format("Ben Ode", 506) + "report.pdf",
                "%PDF-1.7",
                (2026, 3, 1, 9, 0, 0),
            ),
        ],
    )
    out = run_collect(course, zp).stdout
    assert f"{AID}: collected 4 submission(s), skipped 4 file(s)" in out, out
    assert (
        "alice" in (submitted(course, "asmith") / f"{AID}.ipynb").read_text()
    )
    zoe = submitted(course, "zoe-muller")
    assert "zoe second" in (zoe / f"{AID}.ipynb").read_text()
    assert (
        zoe / "timestamp.txt"
    ).read_text().strip() == "2026-03-02 08:30:00"
    assert (
        "carol flat"
        in (submitted(course, "carol-lee") / f"{AID}.ipynb").read_text()
    )
    assert (
        "ann from colab"
        in (submitted(course, "ann-lee") / f"{AID}.ipynb").read_text()
    )
    rep = report(course)
    assert {u["student_id"] for u in rep["unknown"]} == {
        "zoe-muller",
        "carol-lee",
        "ann-lee",
        "bob-jones",
        "ben-ode",
    }
    assert any("onlinetext" in s["reason"] for s in rep["skipped"])
    # Learners who handed in no notebook (an online text, a PDF) stay in the record.
    assert [(n["student_id"], n["files"]) for n in rep["no_notebook"]] == [
        ("ben-ode", ["report.pdf"]),
        ("bob-jones", ["onlinetext.html"]),
    ]


def test_same_name_moodle_learners_stay_apart(tmp_path):
    course = make_course(tmp_path)  # no roster: nobody is "unknown"
    zp = make_zip(
        tmp_path / "moodle.zip",
        [
            (
                f"Ann Lee_11_assignsubmission_file_/{AID}.ipynb",
                notebook("ann 11"),
                (2026, 3, 1, 10, 0, 0),
            ),
            (
                f"Ann Lee_12_assignsubmission_file_/{AID}.ipynb",
                notebook("ann 12"),
                (2026, 3, 1, 10, 0, 0),
            ),
        ],
    )
    run_collect(course, zp)
    assert (
        "ann 11"
        in (submitted(course, "ann-lee-11") / f"{AID}.ipynb").read_text()
    )
    assert (
        "ann 12"
        in (submitted(course, "ann-lee-12") / f"{AID}.ipynb").read_text()
    )
    assert report(course)["unknown"] == []


def test_bad_roster_names_the_fix(tmp_path):
    course = make_course(tmp_path)
    (course / "autograde" / "roster.csv").write_text(
        "name,canvas_id\nAlice,1\n"
    )
    with pytest.raises(ValueError, match="student_id"):
        collect.read_roster(course / "autograde" / "roster.csv")


def test_notebook_problem_names_the_cause(tmp_path):
    good = notebook("fine")
    cases = {
        "truncated": (good[: len(good) // 2], "ends early"),
        "cut_in_a_character": (
            '{"cells": ["Zo\u00eb'.encode()[:-1],
            "ends early",
        ),
        "empty": ("  \n", "empty"),
        "pdf": (b"%PDF-1.7\n\xff\xfe\x00 binary", "not text"),
        "edited": (
            '{"cells": [], oops}',
            "not valid JSON (line 1, column 15",
        ),
        "json_only": ('{"answer": 42}', "not a Jupyter notebook"),
        "fine": (good, None),
    }
    for name, (content, words) in cases.items():
        path = tmp_path / f"{name}.ipynb"
        path.write_bytes(
            content if isinstance(content, bytes) else content.encode()
        )
        problem = collect.notebook_problem(path)
        assert (problem is None) if words is None else (words in problem), (
            name,
            problem,
        )

    # The grader's reason, which the learner reads on the feedback page: the cause and the fix,
    # the file's own name, and never a folder of the instructor's machine.
    folder = tmp_path / "submitted" / "ada" / AID
    folder.mkdir(parents=True)
    assert collect.unreadable_reason(folder) is None
    (folder / f"{AID}.ipynb").write_text(good[:100])
    reason = collect.unreadable_reason(folder)
    assert reason.startswith(
        f"{AID}.ipynb is not a readable notebook: the file ends early"
    ), reason
    assert (
        "submit that file" in reason
        and str(tmp_path) not in reason
        and "/" not in reason.replace("(File, Download)", "")
    )


def test_canvas_edge_cases_without_roster(tmp_path):
    # no roster: every learner gets the default id
    course = make_course(tmp_path)
    good = notebook("alice from colab")
    zp = make_zip(
        tmp_path / "submissions.zip",
        [
            (
                f"smithalice_1234_5678_Copy_of_{AID}.ipynb",
                good,
                (2026, 3, 1, 10, 0, 0),
            ),
            (
                f"jonesbob_2222_5679_{AID}.ipynb",
                notebook("bob")[:150],
                (2026, 3, 1, 11, 0, 0),
            ),
            (
                "leecarol_LATE_3333_5680_answers.pdf",
                "%PDF-1.7",
                (2026, 3, 2, 12, 0, 0),
            ),
            (
                "leecarol_LATE_3333_5681_answers-1.pdf",
                "%PDF-1.7",
                (2026, 3, 2, 12, 5, 0),
            ),
        ],
    )
    out = run_collect(course, zp).stdout
    assert f"{AID}: collected 2 submission(s), skipped 2 file(s)" in out, out

    assert (
        "alice from colab"
        in (submitted(course, "1234") / f"{AID}.ipynb").read_text()
    )
    # The truncated upload is collected (Bob is graded, and fails with the cause) and reported now.
    assert (submitted(course, "2222") / f"{AID}.ipynb").is_file()
    rep = report(course)
    assert [(u["student_id"], u["reason"]) for u in rep["unreadable"]] == [
        (
            "2222",
            "not a readable notebook: the file ends early (the upload was cut off?); "
            "ask the learner to upload it again",
        )
    ]
    assert (
        "1 collected notebook(s) cannot be opened" in out
        and "ask the learner to upload it again" in out
    )

    # Carol handed in PDFs only, late: she stays in the record, with what she handed in.
    assert not (course / "autograde" / "submitted" / "3333").exists()
    assert rep["no_notebook"] == [
        dict(
            student_id="3333",
            lms="canvas",
            lms_id="3333",
            name="leecarol",
            files=["answers-1.pdf", "answers.pdf"],
            late=True,
        )
    ]
    assert (
        "1 learner(s) handed in no notebook" in out and "answers.pdf" in out
    )
    with (course / "autograde" / collect.LMS_STUDENTS).open() as fh:
        assert {r["student_id"] for r in csv.DictReader(fh)} == {
            "1234",
            "2222",
            "3333",
        }


@pytest.mark.slow
def test_grading_a_truncated_upload_names_the_cause(tmp_path):
    """Through the grader and the feedback page: the reason names the cause and the fix, and
    the learner's page shows no folder of the instructor's machine."""
    from course_utils.grading.autograde import grade
    from course_utils.grading.feedback import generate
    from tests.conftest import nbgrader

    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / AID, course / "solutions" / AID)
    (course / "autograde").mkdir()
    shutil.copy2(
        ROOT / "autograde" / "nbgrader_config.py", course / "autograde"
    )
    nbgrader(course, "generate_assignment", AID, "--force")
    released = (course / "notebooks" / AID / f"{AID}.ipynb").read_text()
    zp = make_zip(
        tmp_path / "submissions.zip",
        [
            (
                f"jonesbob_2222_5679_{AID}.ipynb",
                released[: len(released) // 3],
                (2026, 3, 1, 11, 0, 0),
            )
        ],
    )
    run_collect(course, zp)

    status = grade(
        course,
        AID,
        jobs=1,
        progress=lambda line: None,
        sandbox=grading_sandbox(),
    )
    (reason,) = status["2222"]["reasons"]
    assert status["2222"]["state"] == "failed"
    assert (
        "not a readable notebook: the file ends early" in reason
        and "NotJSONError" not in reason
    ), reason
    (page,) = generate(course, AID)
    text = page.read_text()
    assert (
        "the file ends early (the upload was cut off?)" in text
        and "submit that file" in text
    )
    assert (
        str(tmp_path) not in text
        and "Fix the cause" not in text
        and "NotJSONError" not in text
    )
