"""The course's published answers recognised up to names and formatting (course_utils/grading/copies.py):
a pasted reference or solution is flagged whatever its names, comments and layout; an honest answer
written another way, and a definition too small to tell, are not."""

from __future__ import annotations

import ast
import textwrap

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course_utils.grading.copies import (
    MIN_NODES,
    answers_in,
    copied_answers,
    course_answers,
    definitions,
    fingerprint,
    graded_names,
)
from tests.helpers import (
    chapter_ids,
    reference_definitions,
    solution_notebook,
)


def _answer(source: str, gid: str) -> nbformat.NotebookNode:
    return new_code_cell(
        source,
        metadata={
            "nbgrader": {
                "solution": True,
                "grade": False,
                "grade_id": gid,
                "locked": False,
            }
        },
    )


def _reference_source(name: str) -> str:
    try:
        return reference_definitions()[name]
    except KeyError:
        raise LookupError(name) from None


def test_a_renamed_reformatted_copy_has_the_fingerprint_of_its_original():
    import re

    original = _reference_source("masked_softmax")
    node = definitions(original)["masked_softmax"]
    assert sum(1 for _ in ast.walk(node)) >= MIN_NODES
    # other names (torch too, imported as th), no docstring or comments, other quotes and layout
    copied = original
    for old, new in (
        ("scores", "s"),
        ("mask", "allowed"),
        ("filled", "f"),
        ("top", "m"),
        ("torch", "th"),
    ):
        copied = re.sub(rf"\b{old}\b", new, copied)
    tree = ast.parse(copied)
    tree.body[0].body = tree.body[0].body[1:]  # the docstring
    copied = ast.unparse(tree).replace("'-inf'", '"-inf"')
    assert (
        "Softmax of" not in copied
        and "# " not in copied
        and "allowed" in copied
    )
    assert fingerprint(definitions(copied)["masked_softmax"]) == fingerprint(
        node
    )


def test_other_code_with_the_same_names_differs():
    a = textwrap.dedent("""
        def f(x, mask=None, dim=-1):
            if mask is not None:
                x = x.masked_fill(~mask, float("-inf"))
            y = x - x.amax(dim=dim, keepdim=True)
            y = torch.where(torch.isfinite(y), y, torch.full_like(y, float("-inf")))
            e = y.exp()
            total = e.sum(dim=dim, keepdim=True)
            out = e / torch.where(total > 0, total, torch.ones_like(total))
            return out
    """)
    # another answer (a wrong one)
    b = a.replace("x.amax(dim=dim, keepdim=True)", "x.max()")
    # positional argument
    c = a.replace("e.sum(dim=dim, keepdim=True)", "e.sum(dim, keepdim=True)")
    fa, fb, fc = (fingerprint(definitions(s)["f"]) for s in (a, b, c))
    assert fa is not None and len({fa, fb, fc}) == 3


def test_a_definition_too_small_to_tell_is_never_compared():
    small = "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n"
    assert fingerprint(definitions(small)["causal_mask"]) is None


@pytest.mark.parametrize("cid", chapter_ids())
def test_the_published_answers_are_flagged_and_named(cid):
    """Pasting the reader's edition (the solution the book shows, or the package's reference)
    is flagged once per exercise, with the exercise named; the release's stubs are not."""
    source = solution_notebook(cid)
    answers, exercises = course_answers(source), graded_names(source)
    assert answers, f"{cid}: no graded definition large enough to compare"
    flags = copied_answers(source, answers, exercises)
    shown = {
        name
        for c in source.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
        for name, node in definitions(c.source).items()
        if name in exercises and fingerprint(node)
    }
    assert (
        shown
        and len(flags) == len(shown)
        and all("published answer" in f for f in flags)
    ), flags
    for name in shown:
        assert any(
            f.startswith(f"{name} ({exercises[name]})") for f in flags
        ), (name, flags)
    stub = new_notebook(
        cells=[
            _answer("# YOUR CODE HERE\nraise NotImplementedError()", g)
            for g in set(exercises.values())
        ]
    )
    assert copied_answers(stub, answers, exercises) == []
    pasted = []
    for name, gid in exercises.items():
        try:
            pasted.append(_answer(_reference_source(name), gid))
        except LookupError:  # an exercise the package has no reference for
            continue
    got = copied_answers(new_notebook(cells=pasted), answers, exercises)
    large = {
        name
        for name in answers
        if any(
            c.source.startswith((f"def {name}(", f"class {name}("))
            and fingerprint(definitions(c.source)[name])
            for c in pasted
        )
    }
    assert {f.split(" ")[0] for f in got} == large


def test_an_honest_answer_written_another_way_is_not_flagged():
    source = solution_notebook("01_qkv_retrieval")
    answers, exercises = course_answers(source), graded_names(source)
    mine = textwrap.dedent('''
        def additive_attention(queries, keys, values, W_q, W_k, w_v):
            """My own: one query at a time."""
            rows, maps = [], []
            for q in queries.unbind(-2):
                hidden = torch.tanh((q @ W_q).unsqueeze(-2) + keys @ W_k)
                scores = hidden @ w_v
                weights = torch.exp(scores - scores.max(-1, keepdim=True).values)
                weights = weights / weights.sum(-1, keepdim=True)
                maps.append(weights)
                rows.append((weights.unsqueeze(-2) @ values).squeeze(-2))
            return torch.stack(rows, -2), torch.stack(maps, -2)
    ''')
    gid = exercises["additive_attention"]
    assert (
        copied_answers(
            new_notebook(cells=[_answer(mine, gid)]), answers, exercises
        )
        == []
    )


def test_answers_in_finds_an_answer_under_any_name(tmp_path):
    source = solution_notebook("06_masking")
    answers = course_answers(source)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "helpers.py").write_text(
        "import torch\n\n\n"
        + _reference_source("masked_softmax").replace(
            "def masked_softmax(", "def _weights("
        )
        + "\n"
    )
    (tmp_path / "pkg" / "fine.py").write_text(
        "def causal_mask(n):\n    return None\n"
    )
    nb = new_notebook(
        cells=[
            new_code_cell("x = 1"),
            new_code_cell(_reference_source("greedy_decode")),
        ]
    )
    nbformat.write(nb, tmp_path / "book.ipynb")
    assert answers_in(tmp_path, answers) == [
        "book.ipynb:cell 2, line 1: greedy_decode is the course's answer to greedy_decode",
        "pkg/helpers.py:line 4: _weights is the course's answer to masked_softmax",
    ]
