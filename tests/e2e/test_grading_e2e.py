"""End to end through nbgrader on a temporary copy of the course: release, then autograde
submissions and read the gradebook.

- the reference solution scores full marks;
- the untouched release scores 0 on every autograded test, and autograde still completes;
- each seeded mistake (tests/mutations/) loses points in its exercise's tests (one or more of
  the ``test_<exercise>*`` parts) and nowhere else;
- each seeded correct variant (tests/mutations/) keeps full marks, and so does a correct answer
  that prints to stdout and stderr and triggers warnings every time it is called;
- a notebook that rebinds the course's checks and references cannot fool the hidden tests;
- a notebook that rebinds torch, Tensor or builtins functions, or swallows errors, loses the
  hidden tests' points or is flagged by the static scan (``course_utils.grading.tamper``);
- an infinite loop costs only the exercise it is in (the per-cell timeout interrupts it; the loop
  here sleeps, so the cells it holds leave the CPU to the other graders, and
  tests/grading/test_forkserver.py interrupts one that spins);
- feedback shows no hidden-test code and no traceback.

Grading runs through the course's parallel grader (``course_utils.grading.autograde``), as an
instructor's ``make autograde`` does.  Mistakes in *different* exercises share a submission
(the k-th mistake of every exercise goes into submission k, which must lose exactly those
exercises): exercises are graded independently, so this proves the same as one submission per
mistake, with a fraction of the notebooks.  Correct variants are grouped the same way.
"""

from __future__ import annotations

import json
import re
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from tests.conftest import nbgrader
from tests.helpers import (
    ROOT,
    chapter_ids,
    grading_sandbox,
    hidden_test_lines_of,
    reference_definitions,
    solution_notebook,
)
from course_utils.grading.autograde import grade
from course_utils.grading.feedback import generate as generate_feedback
from tests.mutations import MUTATIONS, VARIANTS

_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
# Seconds per cell while grading the looping submission (the default is 60): the import cell needs
# ~3-7 s, and the slowest test cell (chapter 06's beam search, a correct per-source loop) ~8 s on an
# idle machine and up to three times that with two graders per core and ATen's portable kernels.
TIMEOUT = 30
ARTIFACTS = ROOT / "test-artifacts"
# the kernels in bubblewrap wherever it can start
SANDBOX = grading_sandbox()


def _reference_sources(cid: str) -> dict[str, str]:
    return {
        c.metadata["nbgrader"]["grade_id"]: _MARKER.sub("", c.source)
        for c in solution_notebook(cid).cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def _submission(course, cid, edit=None) -> nbformat.NotebookNode:
    """The release with every solution cell filled in from the reference, then ``edit``-ed."""
    nb = nbformat.read(
        course / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )
    reference = _reference_sources(cid)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = reference[gid]
    if edit:
        edit(nb)
    return nb


def _mutate(mutation):
    def edit(nb):
        cells = [
            c
            for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")
            == mutation.exercise
        ]
        assert len(cells) == 1, f"no solution cell {mutation.exercise!r}"
        if mutation.old is None:
            cells[0].source = mutation.new
            return
        assert cells[0].source.count(mutation.old) == 1, (
            f"mutation {mutation.name}: {mutation.old!r} must occur exactly once in the solution of {mutation.exercise}"
        )
        cells[0].source = cells[0].source.replace(mutation.old, mutation.new)

    return edit


def _groups(mutations) -> list[list]:
    """Round robin by exercise: group k holds the k-th mutation of every exercise that has one."""
    by_exercise: dict[str, list] = {}
    for m in mutations:
        by_exercise.setdefault(m.exercise, []).append(m)
    depth = max((len(v) for v in by_exercise.values()), default=0)
    return [
        [ms[k] for ms in by_exercise.values() if k < len(ms)]
        for k in range(depth)
    ]


def _mutate_all(group):
    def edit(nb):
        for m in group:
            _mutate(m)(nb)

    return edit


def _first_function(nb):
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get(
            "solution"
        ) and cell.source.lstrip().startswith("def "):
            return i, cell
    raise AssertionError("no solution cell defines a function")


def _perturb(nb, tamper: bool = False):
    """Scale the outputs of the first graded function by 1.5 (a wrong answer); with ``tamper``,
    also disable every check the notebook can reach and rebind the references to it."""
    i, cell = _first_function(nb)
    name = re.match(r"\s*def (\w+)", cell.source).group(1)
    code = (
        f"_honest_{name} = {name}\n"
        f"def {name}(*args, **kwargs):\n"
        f"    out = _honest_{name}(*args, **kwargs)\n"
        f"    return tuple(o * 1.5 for o in out) if isinstance(out, tuple) else out * 1.5\n"
    )
    if tamper:
        code += (
            "import sys, course_utils.grading.checks\n"
            "for _n in ('assert_close', 'assert_shape', 'compare', 'rows_sum_to_one', 'passed', 'forbid_calls'):\n"
            "    setattr(course_utils.grading.checks, _n, lambda *a, **k: None)\n"
            "for _m in list(sys.modules.values()):\n"
            f"    if getattr(_m, '__name__', '').startswith('course_utils') and hasattr(_m, {name!r}):\n"
            f"        setattr(_m, {name!r}, {name})\n"
        )
    nb.cells.insert(i + 1, new_code_cell(code))
    return cell.metadata["nbgrader"]["grade_id"]


def _noisy(nb):
    """Wrap the first graded function so that every call prints to stdout and stderr and warns."""
    i, cell = _first_function(nb)
    name = re.match(r"\s*def (\w+)", cell.source).group(1)
    nb.cells.insert(
        i + 1,
        new_code_cell(
            "import sys, warnings, functools\n"
            f"_quiet_{name} = {name}\n"
            f"@functools.wraps(_quiet_{name})\n"
            f"def {name}(*args, **kwargs):\n"
            "    print('debug: called with', len(args), 'arguments')\n"
            "    print('debug on stderr', file=sys.stderr)\n"
            "    warnings.warn('a warning the answer triggers')\n"
            f"    return _quiet_{name}(*args, **kwargs)\n"
        ),
    )


# Ways a notebook could try to disable the hidden tests, each added to the perturbed (wrong)
# answer: (student id, code).  The in-kernel integrity check fails the hidden tests for the
# first three; the static scan flags all four.  Neither depends on the chapter, so they run in
# a chapter of functions and a chapter of modules (the course_utils rebinding runs in all).
TAMPERING_CHAPTERS = ("01_qkv_retrieval", "07_vit_cifar10")
TAMPERING = [
    (
        "tamper-isclose",
        "import torch\ntorch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)\n",
    ),
    (
        "tamper-tensor-all",
        "import torch\nsetattr(torch.Tensor, 'all', lambda self, *a, **k: torch.tensor(True))\n",
    ),
    ("tamper-builtins", "import builtins\nbuiltins.abs = lambda x: 0 * x\n"),
    (
        "tamper-swallow-errors",
        "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)\n",
    ),
]


def _tamper_with(code: str):
    def edit(nb):
        _perturb(nb)
        i, _ = _first_function(nb)
        nb.cells.insert(i + 2, new_code_cell(code))

    return edit


def _loop_last_function(nb):
    cells = [
        c
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
        and c.source.lstrip().startswith("def ")
    ]
    cell = cells[-1]
    cell.source = re.sub(
        r'(\n    """.*?"""\n)',
        r"\1    import time\n\n    while True:\n        time.sleep(0.5)\n",
        cell.source,
        count=1,
        flags=re.S,
    )
    assert "while True" in cell.source
    return cell.metadata["nbgrader"]["grade_id"]


def _pasted_reference(course, cid) -> nbformat.NotebookNode:
    """The release with each answer cell holding the package's own definition of its graded
    names (``course_utils/references``, which the reader's edition installs), pasted as is."""
    from course_utils.grading.copies import graded_names

    found = reference_definitions()
    nb = nbformat.read(
        course / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )
    by_exercise: dict[str, list[str]] = {}
    for name, gid in graded_names(solution_notebook(cid)).items():
        if name in found:
            by_exercise.setdefault(gid, []).append(found[name])
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if (
            cell.metadata.get("nbgrader", {}).get("solution")
            and gid in by_exercise
        ):
            cell.source = "\n\n".join(by_exercise[gid])
    return nb


def _write(course, cid, student, nb):
    path = (
        course / "autograde" / "submitted" / student / cid / f"{cid}.ipynb"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _scores(course, cid) -> dict[str, dict[str, float]]:
    """{student: {test grade id: score}} for the autograded test cells."""
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, float]] = {}
    with Gradebook(
        f"sqlite:///{course / 'autograde' / 'gradebook.db'}"
    ) as gb:
        for submission in gb.assignment_submissions(cid):
            nb = submission.notebooks[0]
            out[submission.student.id] = {
                g.name: g.score
                for g in nb.grades
                if g.cell.name.startswith("test_")
            }
    return out


def _max_points(cid) -> dict[str, float]:
    return {
        c.metadata["nbgrader"]["grade_id"]: float(
            c.metadata["nbgrader"]["points"]
        )
        for c in solution_notebook(cid).cells
        if c.metadata.get("nbgrader", {}).get("grade")
        and c.cell_type == "code"
    }


def _of_exercise(grade_id: str, exercise: str) -> bool:
    return grade_id == f"test_{exercise}" or grade_id.startswith(
        f"test_{exercise}_"
    )


@pytest.mark.slow
@pytest.mark.parametrize("cid", chapter_ids())
def test_autograde_end_to_end(cid, course):
    full = _max_points(cid)
    assert full, f"{cid} has no autograded tests"
    mutations = MUTATIONS.get(cid, [])
    graded = {
        c.metadata["nbgrader"]["grade_id"]
        for c in solution_notebook(cid).cells
        if c.metadata.get("nbgrader", {}).get("solution")
        and c.cell_type == "code"
    }
    missing = graded - {m.exercise for m in mutations}
    assert not missing, (
        f"tests/mutations.py seeds no mistake for {sorted(missing)} of {cid}"
    )

    _write(course, cid, "reference", _submission(course, cid))
    _write(
        course,
        cid,
        "untouched",
        nbformat.read(
            course / "notebooks" / cid / f"{cid}.ipynb", as_version=4
        ),
    )
    mistake_groups = _groups(mutations)
    for k, group in enumerate(mistake_groups):
        _write(
            course,
            cid,
            f"mistakes-{k}",
            _submission(course, cid, _mutate_all(group)),
        )
    variants = VARIANTS.get(cid, [])
    variant_groups = _groups(variants)
    for k, group in enumerate(variant_groups):
        _write(
            course,
            cid,
            f"variants-{k}",
            _submission(course, cid, _mutate_all(group)),
        )
    _write(course, cid, "noisy", _submission(course, cid, _noisy))
    perturbed_target = _first_function(_submission(course, cid))[1].metadata[
        "nbgrader"
    ]["grade_id"]
    _write(course, cid, "perturbed", _submission(course, cid, _perturb))
    _write(
        course,
        cid,
        "tamper",
        _submission(course, cid, lambda nb: _perturb(nb, tamper=True)),
    )
    tampering = TAMPERING if cid in TAMPERING_CHAPTERS else []
    for student, code in tampering:
        _write(
            course,
            cid,
            student,
            _submission(course, cid, _tamper_with(code)),
        )
    _write(course, cid, "pasted-reference", _pasted_reference(course, cid))
    looping = _submission(course, cid)
    loop_target = _loop_last_function(looping)
    _write(course, cid, "loop", looping)

    start = time.perf_counter()
    # answer_within: about three times the slowest submission seen here (a worker's start-up
    # included), so a stuck worker is replaced, and its student graded again, well inside the
    # test's own time limit.
    status = grade(
        course,
        cid,
        jobs=2,
        force=True,
        env_extra={"COURSE_CELL_TIMEOUT": str(TIMEOUT)},
        progress=lambda line: None,
        answer_within=600,
        sandbox=SANDBOX,
    )
    wall = time.perf_counter() - start
    failed = {
        s: st["reasons"]
        for s, st in status.items()
        if st["state"] != "graded"
    }
    assert not failed, f"submissions the grader could not grade: {failed}"
    seconds = sorted(st["seconds"] for st in status.values())
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"grading-times-{cid}.json").write_text(
        json.dumps(
            {
                "submissions": len(status),
                "wall_s (2 jobs)": round(wall, 1),
                "per submission s (median, max)": [
                    seconds[len(seconds) // 2],
                    seconds[-1],
                ],
                "mutations": len(mutations),
                "variants": len(variants),
                "tampering": len(tampering) + 1,
            },
            indent=1,
        )
    )

    scores = _scores(course, cid)
    assert scores["reference"] == full, (
        f"the reference solution did not get full marks: {scores['reference']} vs {full}"
    )
    assert set(scores["untouched"]) == set(full) and not any(
        scores["untouched"].values()
    ), f"the untouched release scored points: {scores['untouched']}"

    def expect_loss_of(*exercises: str) -> dict[str, float]:
        return {
            g: (0.0 if any(_of_exercise(g, e) for e in exercises) else p)
            for g, p in full.items()
        }

    wrong = []
    for k, group in enumerate(mistake_groups):
        got = scores[f"mistakes-{k}"]
        for (
            m
        ) in group:  # name the mistake whose exercise kept all its points
            own = {
                g: p for g, p in got.items() if _of_exercise(g, m.exercise)
            }
            if all(p == full[g] for g, p in own.items()):
                wrong.append(
                    f"  {m.name} (in {m.exercise}) was not caught: {own}"
                )
        others = {
            g: p
            for g, p in got.items()
            if not any(_of_exercise(g, m.exercise) for m in group)
            and p != full[g]
        }
        if others:
            wrong.append(
                f"  mistakes {[m.name for m in group]} also cost points elsewhere: {others}"
            )
    assert not wrong, (
        "seeded mistakes must lose points in their exercise's tests and nowhere else:\n"
        + "\n".join(wrong)
        + f"\nfull marks: {full}"
    )
    docked = {
        tuple(v.name for v in group): {
            g: p for g, p in scores[f"variants-{k}"].items() if p != full[g]
        }
        for k, group in enumerate(variant_groups)
        if scores[f"variants-{k}"] != full
    }
    assert not docked, (
        f"correct variants that lost points (variants graded together: the tests named): {docked}"
    )
    assert scores["noisy"] == full, (
        f"an answer that prints and warns lost points: {scores['noisy']}"
    )

    def lost_points_in(student: str, exercise: str) -> bool:
        return any(
            p < full[g]
            for g, p in scores[student].items()
            if _of_exercise(g, exercise)
        )

    assert lost_points_in("perturbed", perturbed_target), (
        f"a wrong {perturbed_target} (outputs x1.5) was not caught: {scores['perturbed']}"
    )
    assert scores["tamper"] == scores["perturbed"], (
        f"disabling course_utils checks and rebinding references changed the grade: {scores['tamper']} "
        f"(the same wrong answer without tampering: {scores['perturbed']})"
    )
    for student, _ in tampering:
        assert status[student]["flags"], f"the grader did not flag {student}"
        # errors swallowed: nothing in the kernel can fail; flagged
        if student != "tamper-swallow-errors":
            assert lost_points_in(student, perturbed_target) and sum(
                scores[student].values()
            ) <= sum(scores["perturbed"].values()), (
                f"{student} gained points by tampering: {scores[student]} vs {scores['perturbed']}"
            )
    # Flags: no honest submission is flagged for tampering; pasting the reader's edition (the
    # solution the book shows, or the package's reference) is flagged, by exercise, and a correct
    # variant is not flagged for the exercise it rewrote (copies.py).
    from course_utils.grading.copies import (
        course_answers,
        fingerprint,
        graded_names,
        definitions,
    )

    def copied(student: str) -> set[str]:
        return {
            f.split(" ")[0]
            for f in status[student]["flags"]
            if "published answer" in f
        }

    honest = [
        "reference",
        "noisy",
        *(f"variants-{k}" for k in range(len(variant_groups))),
    ]
    tampering_flags = {
        s: [f for f in status[s]["flags"] if "published answer" not in f]
        for s in honest
    }
    assert not any(tampering_flags.values()), tampering_flags
    answers, exercises = (
        course_answers(solution_notebook(cid)),
        graded_names(solution_notebook(cid)),
    )
    shown = {
        name
        for c in solution_notebook(cid).cells
        if c.metadata.get("nbgrader", {}).get("solution")
        for name, node in definitions(c.source).items()
        if name in exercises and fingerprint(node)
    }
    assert copied("reference") == shown, (
        f"the book's solutions pasted in: flagged {copied('reference')}, not {shown}"
    )
    pasted = {
        name
        for name, node in definitions(
            "\n".join(
                c.source
                for c in _pasted_reference(course, cid).cells
                if c.metadata.get("nbgrader", {}).get("solution")
            )
        ).items()
        if name in answers and fingerprint(node) in answers[name]
    }
    assert pasted and copied("pasted-reference") == pasted, (
        copied("pasted-reference"),
        pasted,
    )
    rewritten = {
        f"variants-{k}": {
            n for n, g in exercises.items() for v in group if g == v.exercise
        }
        for k, group in enumerate(variant_groups)
    }
    assert not any(copied(s) & names for s, names in rewritten.items()), {
        s: copied(s) & names for s, names in rewritten.items()
    }
    assert scores["loop"] == expect_loss_of(loop_target), (
        f"an infinite loop in {loop_target} should cost only its own tests: {scores['loop']}"
    )

    # Feedback for everyone, the untouched release included: points and messages, never the
    # hidden tests' code or a traceback.
    pages = generate_feedback(course, cid)
    assert len(pages) == len(status), (
        f"feedback pages: {len(pages)} for {len(status)} submissions"
    )
    hidden = hidden_test_lines_of(cid)
    import html as _html

    for page in pages:
        text = _html.unescape(page.read_text(encoding="utf-8"))
        leaked = [line for line in hidden if line in text]
        assert (
            not leaked
            and "Traceback" not in text
            and "HIDDEN TESTS" not in text
        ), (
            f"{page}: feedback shows hidden tests or a traceback: {leaked[:3]}"
        )

    # nbgrader's own command, as an instructor used to nbgrader runs it: as private (its HTML
    # highlights code in spans, so the text is read without its style sheets and tags).
    nbgrader(course, "generate_feedback", cid, "--force")
    pages = sorted(
        (course / "autograde" / "feedback").glob(f"*/{cid}/{cid}.html")
    )
    assert len(pages) == len(status), (
        f"nbgrader's feedback pages: {len(pages)} for {len(status)} submissions"
    )
    for page in pages:
        text = re.sub(
            r"(?s)<(style|script)\b.*?</\1>",
            "",
            page.read_text(encoding="utf-8"),
        )
        text = _html.unescape(re.sub(r"<[^>]+>", "", text))
        # Whole lines: this page shows the visible tests, and a hidden line can be part of a visible one.
        shown = {line.strip() for line in text.splitlines()}
        leaked = [line for line in hidden if line in shown]
        assert (
            not leaked
            and "Traceback" not in text
            and "HIDDEN TESTS" not in text
        ), (
            f"{page}: nbgrader generate_feedback shows hidden tests or a traceback: {leaked[:3]}"
        )
