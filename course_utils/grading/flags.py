"""The flags of a graded submission in its status (for the instructor, never scored): what the
static tamper scan found, the course's published answers pasted in, grading without the sandbox."""

from __future__ import annotations

from pathlib import Path

from .config import source_folder


def tamper_flags(folder: Path) -> list[str]:
    """Flags of the static tamper scan over the submitted notebooks ([] without the scanner)."""
    try:
        from .tamper import scan_notebook
    except ImportError:
        return []
    flags: list[str] = []
    for nb in sorted(folder.glob("*.ipynb")):
        try:
            found = scan_notebook(nb)
        # an unreadable notebook fails grading with its reason
        except Exception:
            continue
        flags += [f for f in found if f not in flags]
    return flags


def copy_flags(folder: Path, answers: dict, exercises: dict) -> list[str]:
    """Flags for graded functions of the submitted notebooks that are the course's published
    answers up to names and formatting (``copies.py``; ``answers``: ``copies.course_answers``)."""
    import nbformat

    from .copies import copied_answers

    flags: list[str] = []
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        # an unreadable notebook fails grading with its reason
        except Exception:
            continue
        flags += [
            f
            for f in copied_answers(nb, answers, exercises)
            if f not in flags
        ]
    return flags


def published_answers(root: Path, assignment_id: str) -> tuple[dict, dict]:
    """(fingerprints of the course's answers, {graded name: exercise}) of the assignment: what
    ``copy_flags`` looks for."""
    import nbformat

    from .copies import course_answers, graded_names

    answers, exercises = {}, {}
    for path in sorted(source_folder(root, assignment_id).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        answers.update(course_answers(nb))
        exercises.update(graded_names(nb))
    return answers, exercises


def submission_flags(
    folder: Path, published: tuple[dict, dict], sandboxed: bool
) -> list[str]:
    """Every flag of the submission in ``folder`` (``published``: ``published_answers``)."""
    from .sandbox import FLAG_UNSANDBOXED

    return (
        tamper_flags(folder)
        + copy_flags(folder, *published)
        + ([] if sandboxed else [FLAG_UNSANDBOXED])
    )
