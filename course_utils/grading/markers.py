"""nbgrader's markers in the course's notebooks: the one home for finding and removing them.

``### BEGIN SOLUTION`` ... ``### END SOLUTION`` wraps an answer (the release replaces it with
``STUB``); ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS`` wraps tests a learner never
sees.  The book's pages (tools/book_pages.py) and the tests that prove nothing leaks use these.
"""
from __future__ import annotations

import re

__all__ = ["MARKERS", "STUB", "HIDDEN", "SOLUTION", "strip_hidden_tests", "strip_solution_markers",
           "replace_solutions_with_stub"]

MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # as autograde/nbgrader_config.py's code_stub
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)  # group 1: the hidden code
SOLUTION = re.compile(r"### BEGIN SOLUTION(.*?)### END SOLUTION", re.S)  # group 1: the answer
_HIDDEN_WITH_INDENT = re.compile(r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*", re.S)
_SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
_SOLUTION_BLOCK = re.compile(r"^([ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)


def strip_hidden_tests(source: str) -> str:
    """``source`` without its hidden tests (markers included)."""
    return _HIDDEN_WITH_INDENT.sub("", source).strip("\n")


def strip_solution_markers(source: str) -> str:
    """``source`` with its answers kept and the solution markers removed (the book shows answers)."""
    return _SOLUTION_MARKER.sub("", source).strip("\n")


def replace_solutions_with_stub(source: str) -> str:
    """Each solution block becomes ``STUB``, indented like the block (as nbgrader's release does)."""
    return _SOLUTION_BLOCK.sub(lambda m: "\n".join(m.group(1) + line for line in STUB.splitlines()), source)
