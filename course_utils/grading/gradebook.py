"""What grading reads and writes in the gradebook itself, besides nbgrader's own autograde: that the
assignment is there, a submission's score, and the zero scores of a failed submission (set
here and nowhere else)."""

from __future__ import annotations

from pathlib import Path

from .config import gradebook_address, load_config


def assignment_gradebook(
    root: Path, assignment_id: str, env: dict
) -> tuple[str, str]:
    """The gradebook's (url, course id), once the assignment is known to be in it.

    One query through SQLAlchemy rather than nbgrader's ``Gradebook``: importing nbgrader takes
    the driver seconds before any worker starts.  An assignment in the gradebook means its
    tables exist (``nbgrader generate_assignment`` made them), so the workers never race to
    create them."""
    import sqlalchemy

    db_url, course_id = gradebook_address(load_config(root, env), root)
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as db:
            found = db.execute(
                sqlalchemy.text(
                    "SELECT 1 FROM assignment WHERE name = :name"
                ),
                {"name": assignment_id},
            ).first()
    except sqlalchemy.exc.OperationalError as exc:
        if "no such table" not in str(exc):
            raise SystemExit(
                f"cannot open the gradebook ({db_url.split('?')[0]}): {exc.orig}"
            ) from None
        found = None  # a new, empty gradebook
    # PostgreSQL: relation "assignment" does not exist
    except sqlalchemy.exc.ProgrammingError:
        found = None
    finally:
        engine.dispose()
    if found is None:
        raise SystemExit(
            f"assignment {assignment_id!r} is not in the gradebook ({db_url.split('?')[0]}): "
            f"run 'make release' (nbgrader generate_assignment {assignment_id}) first"
        ) from None
    return db_url, course_id


def zero_scores(
    db_url: str, course_id: str, assignment_id: str, student: str
) -> list[str]:
    """Set the automatic scores of a failed submission to 0, so that it keeps no stale or
    partial ones.  Returns what to add to its reasons: [] when done, else why it could not be."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(db_url, course_id) as gb:
            try:
                submission = gb.find_submission(assignment_id, student)
            except MissingEntry:
                return []
            for nb in submission.notebooks:
                for g in nb.grades:
                    g.auto_score = 0
                    g.needs_manual_grade = False
            gb.db.commit()
    except (
        Exception
    ) as exc:  # the failure is recorded either way, with this too
        return [f"could not set its scores to 0: {exc}"]
    return []


def score_text(
    db_url: str, course_id: str, assignment_id: str, student: str
) -> str | None:
    """'got/max' of a graded submission, for the progress line (None when unreadable)."""
    from nbgrader.api import Gradebook

    try:
        with Gradebook(db_url, course_id) as gb:
            s = gb.find_submission(assignment_id, student)
            return f"{s.score:g}/{s.max_score:g}"
    except Exception:  # only for the progress line
        return None
