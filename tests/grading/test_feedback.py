"""Private feedback (course_utils.grading.feedback): points and messages, never hidden tests.

The pages of every chapter, for every kind of submission, are searched for hidden-test lines
and tracebacks in the end-to-end grading test (tests/e2e/test_grading_e2e.py); here, the pieces.
"""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_output

from course_utils.grading.feedback import error_message, render


def test_render_escapes_and_reports_failure():
    page = render(
        "01_x",
        "01_x",
        "ada",
        [
            ("test_a", 0.0, 2.0, "CheckFailed: expected <1> got <2>"),
            ("test_b", 1.0, 1.0, "passed"),
        ],
        failure=["the kernel died while running cell 3"],
    )
    assert "&lt;1&gt;" in page and "<1>" not in page
    assert (
        "1 of 3 points" in page
        and "could not be graded" in page
        and "kernel died" in page
    )
    assert (
        '<html lang="en">' in page and '<th scope="col">Points</th>' in page
    )


def test_message_drops_tracebacks():
    cell = new_code_cell(
        "### BEGIN HIDDEN TESTS\nassert secret_check()\n### END HIDDEN TESTS"
    )
    cell.outputs = [
        new_output(
            "error",
            ename="CheckFailed",
            evalue="\x1b[31mexpected 1, got 2\x1b[0m",
            traceback=[
                "assert secret_check()",
                "CheckFailed: expected 1, got 2",
            ],
        ),
        new_output("stream", name="stdout", text="assert secret_check()"),
    ]
    assert error_message(cell) == "CheckFailed: expected 1, got 2"


def test_nbgrader_feedback_preprocessor_hides_tests_and_tracebacks():
    from course_utils.grading.private_feedback import NOTICE, HideTests

    cell = new_code_cell(
        "check(f)\n### BEGIN HIDDEN TESTS\nassert secret_check(f)\n### END HIDDEN TESTS"
    )
    cell.outputs = [
        new_output(
            "error",
            ename="CheckFailed",
            evalue="\x1b[31mexpected 1, got 2\x1b[0m",
            traceback=[
                "\x1b[31massert secret_check(f)",
                "CheckFailed: expected 1, got 2",
            ],
        )
    ]
    only_hidden = new_code_cell(
        "### BEGIN HIDDEN TESTS\nassert secret_check(g)\n### END HIDDEN TESTS"
    )
    answer = new_code_cell("def f():\n    return 1")
    answer.outputs = [
        new_output(
            "error",
            ename="ZeroDivisionError",
            evalue="division by zero",
            traceback=[
                "Traceback (most recent call last)",
                "1/0",
                "ZeroDivisionError",
            ],
        )
    ]
    from nbformat.v4 import new_notebook

    # as nbconvert calls it
    HideTests()(new_notebook(cells=[cell, only_hidden, answer]), {})
    assert (
        cell.source == f"check(f)\n{NOTICE}" and only_hidden.source == NOTICE
    )
    assert cell.outputs[0]["traceback"] == ["CheckFailed: expected 1, got 2"]
    assert answer.source == "def f():\n    return 1"
    assert answer.outputs[0]["traceback"] == [
        "ZeroDivisionError: division by zero"
    ]
