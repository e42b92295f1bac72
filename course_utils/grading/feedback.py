"""Private feedback for each learner: every test's points and message, never hidden-test code.

    python -m course_utils.cli.feedback ID [--student S ...] [--course .]

(``make feedback ID=<id>``) writes ``autograde/feedback/<student>/<ID>/<notebook>.html`` from
the gradebook and the autograded notebooks.  nbgrader's own ``generate_feedback`` renders the
autograded notebook, which has the hidden tests put back and shows their code in tracebacks;
this page shows, for each autograded test cell, its name, points got / max and the message of
its error (``ename: evalue``: for the course's checks, what was wrong, expected vs got, and a
hint).  A submission that could not be graded gets the reason from its grading status instead
(``status.py``, which the grade export reads too: every pod's after a Kubernetes run).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat

from .config import course_root, load_config
from .status import FAILED, read_status

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_MESSAGE = 3000  # characters: a message, not a dump
_STYLE = """
body { font-family: system-ui, sans-serif; line-height: 1.5; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #1a1a1a; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; font-weight: bold; padding: .5rem 0; }
th, td { border: 1px solid #767676; padding: .4rem .6rem; text-align: left; vertical-align: top; }
td.points { white-space: nowrap; }
pre { white-space: pre-wrap; margin: 0; font-family: ui-monospace, monospace; }
.failed { border: 2px solid #b00020; padding: .5rem 1rem; }
"""


def error_message(cell) -> str | None:
    """``ename: evalue`` of each error the cell produced (tracebacks are dropped: they quote
    the hidden tests' code)."""
    messages = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            text = ": ".join(
                x for x in (out.get("ename"), out.get("evalue")) if x
            )
            messages.append(_ANSI.sub("", text)[:_MAX_MESSAGE])
    return "\n".join(messages) or None


def _test_cells(gb, notebook) -> list[str]:
    """Names of the autograded test cells (grade cells with code that are not answers)."""
    answers = {c.name for c in notebook.solution_cells}
    return [
        c.name
        for c in notebook.grade_cells
        if c.cell_type == "code" and c.name not in answers
    ]


def _order(source: Path) -> dict[str, int]:
    if not source.is_file():
        return {}
    nb = nbformat.read(source, as_version=4)
    return {
        c.metadata.get("nbgrader", {}).get("grade_id"): i
        for i, c in enumerate(nb.cells)
    }


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


def render(
    assignment_id: str,
    notebook_id: str,
    student: str,
    rows: list[tuple[str, float, float, str]],
    failure: list[str] | None = None,
    graded_at: str | None = None,
    notes: list[str] | None = None,
) -> str:
    """The feedback page; ``rows`` are (test name, points, max points, message); ``failure``
    why the notebook could not be graded; ``notes`` what else the grader saw (a cell that ran
    out of memory or time)."""
    esc = html.escape
    got, total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    parts = [
        f"<h1>Feedback: {esc(notebook_id)}</h1>\n",
        f"<p>Learner: {esc(student)}. Assignment: {esc(assignment_id)}."
        + (f" Graded: {esc(graded_at)}." if graded_at else "")
        + "</p>\n",
        f"<p><strong>Score of the automatic tests: {got:g} of {total:g} points.</strong></p>\n",
    ]
    if failure:
        parts.append(
            '<section class="failed" aria-labelledby="failed">\n<h2 id="failed">Your notebook could '
            "not be graded</h2>\n<ul>\n"
            + "".join(f"<li>{esc(r)}</li>\n" for r in failure)
            + "</ul>\n<p>Its tests score 0. Put right what the list above names, run the "
            "notebook from the top (Kernel, Restart and Run All) to check it, and submit "
            "again.</p>\n</section>\n"
        )
    if notes:
        parts.append(
            '<section aria-labelledby="notes">\n<h2 id="notes">Notes from the grader</h2>\n<ul>\n'
            + "".join(f"<li>{esc(r)}</li>\n" for r in notes)
            + "</ul>\n</section>\n"
        )
    parts.append(
        "<table>\n<caption>Each test, its points and what it found</caption>\n<thead>\n<tr>"
        '<th scope="col">Test</th><th scope="col">Points</th><th scope="col">Result</th>'
        "</tr>\n</thead>\n<tbody>\n"
    )
    for name, points, max_points, message in rows:
        parts.append(
            f'<tr><th scope="row">{esc(name)}</th><td class="points">{points:g} / {max_points:g}</td>'
            f"<td><pre>{esc(message)}</pre></td></tr>\n"
        )
    parts.append("</tbody>\n</table>\n")
    return _page(f"Feedback: {notebook_id} ({student})", "".join(parts))


def _learner_reasons(reasons: list[str]) -> list[str]:
    # The status file's reasons end with where the instructor finds the log; not for learners.
    return [re.sub(r"; details in \S+$", "", r) for r in reasons]


def generate(
    course_dir,
    assignment_id: str,
    students: list[str] | None = None,
    env_extra: dict | None = None,
) -> list[Path]:
    """Write the feedback pages of ``assignment_id``; return their paths."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.coursedir import CourseDirectory

    root = course_root(course_dir)
    coursedir = CourseDirectory(config=load_config(root, env_extra))
    status = read_status(root, assignment_id)
    written = []
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            assignment = gb.find_assignment(assignment_id)
        except MissingEntry:
            raise SystemExit(
                f"assignment {assignment_id!r} is not in the gradebook: release and grade it first "
                f"(make release; make autograde ID={assignment_id})"
            ) from None
        submissions = {
            s.student.id: s for s in gb.assignment_submissions(assignment_id)
        }
        wanted = students or sorted(submissions)
        missing = sorted(set(wanted) - set(submissions))
        if missing:
            raise SystemExit(
                f"no graded submission of {assignment_id} for {', '.join(missing)}: "
                f"run make autograde ID={assignment_id} first"
            )
        for student in wanted:
            info = status.get(student, {})
            failed = info.get("state") == FAILED
            for notebook in assignment.notebooks:
                grades = {
                    g.name: g
                    for nb in submissions[student].notebooks
                    if nb.name == notebook.name
                    for g in nb.grades
                }
                source = (
                    Path(
                        coursedir.format_path(
                            coursedir.source_directory, ".", assignment_id
                        )
                    )
                    / f"{notebook.name}.ipynb"
                )
                order = _order(source)
                names = sorted(
                    _test_cells(gb, notebook),
                    key=lambda n: (order.get(n, 1 << 30), n),
                )
                graded = (
                    Path(
                        coursedir.format_path(
                            coursedir.autograded_directory,
                            student,
                            assignment_id,
                        )
                    )
                    / f"{notebook.name}.ipynb"
                )
                cells = {}
                if graded.is_file() and not failed:
                    nb = nbformat.read(graded, as_version=4)
                    cells = {
                        c.metadata.get("nbgrader", {}).get("grade_id"): c
                        for c in nb.cells
                    }
                rows = []
                for name in names:
                    g = grades.get(name)
                    points, max_points = (
                        (g.score or 0.0, g.max_score) if g else (0.0, 0.0)
                    )
                    message = (
                        error_message(cells[name]) if name in cells else None
                    )
                    if message is None:
                        message = (
                            "passed"
                            if points == max_points
                            else "not graded"
                            if failed or name not in cells
                            else "no points"
                        )
                    rows.append(
                        (name, float(points), float(max_points), message)
                    )
                page = render(
                    assignment_id,
                    notebook.name,
                    student,
                    rows,
                    failure=_learner_reasons(info.get("reasons", []))
                    if failed
                    else None,
                    graded_at=info.get("graded_at"),
                    notes=None
                    if failed
                    else _learner_reasons(info.get("reasons", [])),
                )
                out = (
                    Path(
                        coursedir.format_path(
                            coursedir.feedback_directory,
                            student,
                            assignment_id,
                        )
                    )
                    / f"{notebook.name}.html"
                )
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(page, encoding="utf-8")
                written.append(out)
    return written
