"""nbgrader's own feedback made as private as the course's (autograde/nbgrader_config.py).

An instructor used to nbgrader runs ``nbgrader generate_feedback``; it renders the autograded
notebook, in which the hidden tests are back in place and every failed test shows its
traceback, which quotes the hidden test's code.  ``HideTests`` runs among nbgrader's feedback
preprocessors: every autograded test cell keeps its visible lines and loses its hidden block,
and every error keeps only ``ename: evalue`` (for the course's checks: what was wrong, and a
hint), as the course's own feedback page does (course_utils.grading.feedback).
"""

from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from .markers import HIDDEN, strip_hidden_tests

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NOTICE = "# (hidden tests: not shown; their results are in the points and messages)"


def _private_error(output) -> None:
    """An error output reduced to its message: the traceback is replaced by ``ename: evalue``."""
    message = ": ".join(
        _ANSI.sub("", x)
        for x in (output.get("ename"), output.get("evalue"))
        if x
    )
    output["traceback"] = [message]


class HideTests(Preprocessor):
    """Hidden tests out of every cell's source; tracebacks out of every error output."""

    enabled = Bool(
        True,
        help="nbconvert runs a preprocessor only when enabled; this one always",
    ).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            if HIDDEN.search(cell.source):
                visible = strip_hidden_tests(cell.source)
                cell.source = f"{visible}\n{NOTICE}" if visible else NOTICE
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    _private_error(output)
        return cell, resources
