"""The course's nbgrader configuration, loaded in one place: where the course directory is, its
``nbgrader_config.py``, and the gradebook and source notebooks that file names."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

CONFIG_FILE = "nbgrader_config.py"


def course_root(course_dir: str | os.PathLike) -> Path:
    """nbgrader's course directory (the folder with nbgrader_config.py): ``course_dir`` itself
    or its ``autograde/`` folder."""
    course_dir = Path(course_dir).resolve()
    for candidate in (course_dir, course_dir / "autograde"):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise SystemExit(
        f"no {CONFIG_FILE} in {course_dir} or {course_dir / 'autograde'}: "
        "run this from the repository root, or pass the course directory"
    )


@contextmanager
def environment(extra: dict | None):
    """``os.environ`` with ``extra`` added, restored afterwards."""
    saved = dict(os.environ)
    os.environ.update(extra or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_config(root: str | os.PathLike, env: dict | None = None):
    """The traitlets config of ``root/nbgrader_config.py``, run as nbgrader runs it; ``env`` is
    added to the environment meanwhile (the file reads COURSE_DB_URL, COURSE_CELL_TIMEOUT,
    COURSE_KERNEL_STARTUP_TIMEOUT)."""
    from traitlets.config.loader import PyFileConfigLoader

    if not (Path(root) / CONFIG_FILE).is_file():
        raise FileNotFoundError(
            f"{root}/{CONFIG_FILE} not found: pass --course <the course directory>"
        )
    with environment(env):
        return PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()


def gradebook_address(config, root: Path) -> tuple[str, str]:
    """(database URL, course id) of the gradebook ``config`` names; without them, SQLite in the
    course directory and nbgrader's default course id."""
    section = config.CourseDirectory
    return (
        section.get("db_url") or f"sqlite:///{Path(root) / 'gradebook.db'}",
        section.get("course_id") or "default_course",
    )


def source_folder(root: Path, assignment_id: str) -> Path:
    """The assignment's folder of source notebooks (nbgrader's ``source_directory``), found
    without importing nbgrader (``format_path`` with the course's default layout)."""
    config = load_config(root)
    source = config.CourseDirectory.get("source_directory", "source")
    return (
        Path(config.CourseDirectory.get("root", str(root)))
        / source
        / assignment_id
    ).resolve()
