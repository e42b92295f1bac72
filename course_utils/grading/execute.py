"""nbgrader's Execute preprocessor as a grading worker runs it: it remembers which cell runs (to
say where a kernel died), runs each graded test cell in the grader's own namespace
(``test_room.py``) and leaves out the cells tagged ``skip-while-grading`` (``markers.py``)."""

from __future__ import annotations

from pathlib import Path

from .reasons import cell_name

SKIPPED_NOTE = "(not run while grading: this cell shows the course's results and grades nothing)\n"
_running: dict = {}  # the cell being executed, read after a failure: one submission at a time per worker


def running_cell() -> str | None:
    """The name of the cell that ran last since ``forget_running_cell()`` (None: no cell ran)."""
    return _running.get("cell")


def forget_running_cell() -> None:
    _running.clear()


def is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def guarded_execute(preamble: str):
    """The Execute subclass for nbgrader's autograde preprocessors; ``preamble``: the course's
    imports (``course_imports``), which the test cells run after."""
    import nbformat
    from nbgrader.preprocessors import Execute

    from . import test_room
    from .markers import skipped_while_grading

    class GuardedExecute(Execute):
        def preprocess_cell(self, cell, resources, index):
            _running["cell"] = cell_name(cell, index)
            # the course's results, nothing graded (markers.py)
            if skipped_while_grading(cell):
                cell.outputs = [
                    nbformat.v4.new_output(
                        "stream", name="stdout", text=SKIPPED_NOTE
                    )
                ]
                cell.execution_count = None
                return cell, resources
            if cell.cell_type != "code" or not is_test(cell):
                return super().preprocess_cell(cell, resources, index)
            source = cell.source
            cell.source = test_room.wrap(source, preamble)
            try:
                return super().preprocess_cell(cell, resources, index)
            finally:
                cell.source = source  # the graded notebook and its feedback show the test itself

    return GuardedExecute


def course_imports(source_folder: Path) -> str:
    """The top-level imports of the course's own code cells (neither answers nor tests) in the
    source notebooks: what the test cells' module names mean, whatever a submission did to them."""
    import nbformat

    from . import test_room
    from .markers import defined_names

    sources, answers = [], set()
    for path in sorted(source_folder.glob("*.ipynb")):
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type != "code" or is_test(c):
                continue
            if c.get("metadata", {}).get("nbgrader", {}).get("solution"):
                answers |= set(defined_names(c.source))
            else:
                sources.append(c.source)
    return test_room.preamble_of(sources, answers)
