"""The class edition (tools/class_edition.py): built from the one source, it holds no answer, its
package installs on its own, and its notebooks run there: with the release's stubs only the
visible tests (and cells that call a stub) fail, with their messages; with the solutions pasted
in, everything passes.  Its book's links point at its own files."""

from __future__ import annotations

import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import nbformat
import pytest
import torch

from tools import class_edition

ROOT = Path(__file__).resolve().parents[2]
URL, HUB = (
    "https://github.com/example-school/attention-class",
    "https://hub.example.edu",
)
# The first test builds the edition: every chapter run twice (fast and full mode) with the recorder
# on.  No xdist_group: the build is the suite's longest fixture, and a group would chain it and every
# test after it on one worker that shares the CPU with the other, so the whole suite waits on that
# chain.  Without a group, a worker that reaches the fixture while the other builds waits on the
# file lock (leaving the build the CPU), and the tests after it spread over both workers.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3000),
]


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    """One build per test run: pytest-xdist workers share it (a file lock), and a worker that tears
    the module down between two batches of tests finds it again."""
    import filelock

    root = tmp_path_factory.getbasetemp()
    # the workers' common folder
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    out, done = (
        root / "class-edition" / "attention-class",
        root / "class-edition" / "built",
    )
    with filelock.FileLock(str(root / "class-edition.lock")):
        if not done.is_file():
            class_edition.build(
                out, url=URL, hub=HUB, html=True, log=lambda *a: None
            )
            done.write_text("built\n")
    return out


def test_it_holds_no_answer(edition):
    assert class_edition.check(edition) == []
    stand_ins = (
        edition / "course_utils" / "references" / "attention.py"
    ).read_text()
    assert (
        'return replay("attention.attend", queries=queries, keys=keys, values=values)'
        in stand_ins
    )
    assert (
        not (edition / "solutions").exists()
        and not (edition / "autograde").exists()
    )
    assert not (
        edition / "course_utils" / "grading" / "autograde.py"
    ).exists()


def test_the_check_finds_what_would_give_answers_away(edition, tmp_path):
    """The check is not vacuous: an answer renamed and reformatted, a marker, a stored output and a
    solution's output on a book page are each found."""
    leaky = tmp_path / "leaky"
    shutil.copytree(edition, leaky)
    (leaky / "course_utils" / "helpers.py").write_text(
        "import torch\n\n\ndef lookup(a, b, c):\n"
        "    '''Renamed and reformatted.'''\n"
        "    check_qkv('attend', a, b, c)\n"
        "    s = a @ b.transpose(-2, -1)\n"
        "    w = softmax(s, dim=-1)\n"
        "    return w @ c, w\n"
    )
    (leaky / "book" / "notes.md").write_text("### BEGIN HIDDEN TESTS\n")
    nb_path = (
        leaky / "notebooks" / "01_qkv_retrieval" / "01_qkv_retrieval.ipynb"
    )
    nb = nbformat.read(nb_path, as_version=4)
    code = [
        c
        for c in nb.cells
        if c.cell_type == "code"
        and "course-setup" not in c.metadata.get("tags", [])
    ]
    code[0].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="hello\n")
    ]
    nbformat.write(nb, nb_path)
    page_path = leaky / "book" / "chapters" / "01_qkv_retrieval.ipynb"
    page, source = (
        nbformat.read(p, as_version=4)
        for p in (
            page_path,
            ROOT
            / "solutions"
            / "01_qkv_retrieval"
            / "01_qkv_retrieval.ipynb",
        )
    )
    shown = next(
        c
        for c in source.cells
        if c.cell_type == "code"
        and c.get("outputs")
        and c.metadata.get("nbgrader", {}).get("grade")
    )
    target = next(c for c in page.cells if c.cell_type == "code")
    target.outputs = shown.outputs
    nbformat.write(page, page_path)
    problems = "\n".join(class_edition.check(leaky))
    assert (
        "helpers.py:line 4: lookup is the course's answer to attend"
        in problems
    ), problems
    assert (
        "notes.md: holds the nbgrader marker '### BEGIN HIDDEN TESTS'"
        in problems
    ), problems
    assert (
        "01_qkv_retrieval.ipynb: cell" in problems
        and "carries stored outputs" in problems
    ), problems
    assert "shows an output a solution made" in problems, problems


def _links(page: nbformat.NotebookNode) -> list[str]:
    box = next(
        c.source
        for c in page.cells
        if c.cell_type == "markdown" and "Do the exercises" in c.source
    )
    return (
        re.findall(r"\]\((https?://[^)]+)\)", box)
        + [html.unescape(u) for u in re.findall(r'href="([^"]+)"', box)]
        + re.findall(r"<(\.\./\.\./[^>]+)>", box)
    )


def test_every_page_links_to_its_own_notebook(edition):
    owner_repo = URL.removeprefix("https://github.com/")
    for cid in class_edition.EDITION_CHAPTERS:
        page = nbformat.read(
            edition / "book" / "chapters" / f"{cid}.ipynb", as_version=4
        )
        links = _links(page)
        target = f"notebooks/{cid}/{cid}.ipynb"
        assert (edition / target).is_file()
        download = [u for u in links if u.startswith("../../")]
        assert download == [f"../../{target}"], links
        assert (edition / "book" / "chapters" / download[0]).resolve() == (
            edition / target
        ).resolve()
        colab = [u for u in links if "colab.research.google.com" in u]
        assert colab == [
            f"https://colab.research.google.com/github/{owner_repo}/blob/main/{target}"
        ], links
        hub = [u for u in links if u.startswith(HUB)]
        assert len(hub) == 1, links
        query = parse_qs(urlparse(hub[0]).query)
        assert query["repo"] == [URL] and query["branch"] == ["main"], query
        assert query["urlpath"] == [f"lab/tree/attention-class/{target}"], (
            query
        )
        html = (
            edition / "_build" / "html" / "book" / "chapters" / f"{cid}.html"
        ).read_text()
        download = re.findall(
            r'href="([^"]*/_downloads/[^"]*\.ipynb)"', html
        )
        assert download, f"{cid}: the built page has no download link"
        shipped = (
            edition / "_build" / "html" / "book" / "chapters" / download[0]
        ).resolve()
        assert shipped.read_bytes() == (edition / target).read_bytes(), (
            f"{cid}: the download is not the edition's notebook"
        )
        assert colab[0] in html and hub[0].replace("&", "&amp;") in html, (
            f"{cid}: the built page lacks a link"
        )
        assert "Show solution" not in html and "\u2713" not in html, (
            f"{cid}: the built page shows a solution's work"
        )
    config = (edition / "_config.yml").read_text()
    assert URL in config
    # the setup cell installs this edition's package
    for cid in class_edition.EDITION_CHAPTERS:
        nb = nbformat.read(
            edition / "notebooks" / cid / f"{cid}.ipynb", as_version=4
        )
        setup = next(
            c
            for c in nb.cells
            if "course-setup" in c.metadata.get("tags", [])
        )
        assert f"course-utils @ git+{URL}@main" in setup.source


# ------------------------------------------------------------------------------- a fresh venv


@pytest.fixture(scope="module")
def learner_python(edition, tmp_path_factory) -> Path:
    """A virtual environment outside the repository with the class edition's package installed
    (not editable).  Third-party libraries come from this environment's site-packages, added as a
    plain path: its .pth files (the reader's editable course_utils among them) are not read."""
    where = tmp_path_factory.mktemp("learner")
    venv = where / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
    )
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [
                str(python),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "third_party.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    copy = where / "attention-class"
    shutil.copytree(edition, copy)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(copy),
        ],
        check=True,
        cwd=where,
        env=_learner_env(),
    )
    # nothing left to import from but the installed package
    shutil.rmtree(copy)
    return python


def _learner_env() -> dict:
    """This environment without what would let the learner's processes find the repository."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "COURSE_RESULTS_DIR")
    }


def test_the_package_installs_alone(learner_python):
    probe = subprocess.run(
        [
            str(learner_python),
            "-c",
            "import importlib.util, course_utils, course_utils.references.attention as a\n"
            "from course_utils.results import find_results_dir\n"
            "print(course_utils.__file__); print(find_results_dir())\n"
            "print(importlib.util.find_spec('course_utils.grading.autograde'))",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=learner_python.parents[2],
        env=_learner_env(),
    ).stdout.splitlines()
    assert "site-packages" in probe[0] and not probe[0].startswith(
        str(ROOT)
    ), probe
    assert probe[1].endswith("share/attention-course/results"), probe
    assert probe[2] == "None", probe


def _run(
    learner_python: Path, nb: nbformat.NotebookNode, cid: str, where: Path
) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    kernels = where / "jupyter" / "kernels" / "learner"
    kernels.mkdir(parents=True, exist_ok=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    str(learner_python),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "learner",
                "language": "python",
            }
        )
    )
    run_dir = where / cid
    shutil.copytree(ROOT / "notebooks" / cid, run_dir, dirs_exist_ok=True)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(
        _learner_env(), JUPYTER_PATH=str(where / "jupyter"), COURSE_FAST="1"
    )
    try:
        NotebookClient(
            nb,
            timeout=600,
            kernel_name="learner",
            allow_errors=True,
            resources={"metadata": {"path": str(run_dir)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def _errors(nb) -> list[tuple[int, dict, str]]:
    found = []
    for i, cell in enumerate(nb.cells):
        for out in (
            cell.get("outputs", []) if cell.cell_type == "code" else []
        ):
            if out.output_type == "error":
                found.append(
                    (
                        i,
                        cell.metadata.get("nbgrader", {}),
                        f"{out.ename}: {out.evalue}",
                    )
                )
    return found


@pytest.mark.parametrize("cid", class_edition.EDITION_CHAPTERS)
def test_notebooks_run_in_the_learners_environment(
    cid, learner_python, edition, tmp_path
):
    # With the release's stubs: a visible test fails with its message; a cell that calls a stub
    # fails with NotImplementedError; nothing else fails (no missing module, file or stored call).
    stubs = _run(
        learner_python,
        nbformat.read(
            edition / "notebooks" / cid / f"{cid}.ipynb", as_version=4
        ),
        cid,
        tmp_path / "stubs",
    )
    errors = _errors(stubs)
    assert errors, f"{cid}: with the stubs, no visible test failed"
    for index, grader, error in errors:
        visible_test = grader.get("grade") and not grader.get("solution")
        if visible_test:
            assert error.startswith(
                ("CheckFailed", "AssertionError", "NotImplementedError")
            ) or _after_a_failure(stubs, index, error), (cid, index, error)
        else:
            assert error.startswith(
                "NotImplementedError"
            ) or _after_a_failure(stubs, index, error), (
                f"{cid}: cell {index} failed with the stubs in a way a learner cannot fix: {error}"
            )
    tests = [
        i
        for i, c in enumerate(stubs.cells)
        if c.cell_type == "code"  # test cells with visible code
        and c.metadata.get("nbgrader", {}).get("grade")
        and not c.metadata["nbgrader"].get("solution")
        and ast.parse(c.source).body
    ]
    assert {i for i, *_ in errors} >= set(tests), (
        f"{cid}: visible tests that passed on stubs: {set(tests) - {i for i, *_ in errors}}"
    )
    # With the solutions pasted in: every cell runs and every visible test passes.
    solved = _run(
        learner_python, _pasted(edition, cid), cid, tmp_path / "solved"
    )
    assert _errors(solved) == [], (
        f"{cid}: with the solutions pasted in: {_errors(solved)}"
    )
    passed = "".join(
        o.get("text", "")
        for c in solved.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert passed.count("\u2713") >= len(tests), (
        f"{cid}: fewer passed messages than visible tests"
    )


def _pasted(edition: Path, cid: str) -> nbformat.NotebookNode:
    nb = nbformat.read(
        edition / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )
    solved = class_edition.pasted_solutions(cid)
    answers = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in solved.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    return nb


def _after_a_failure(nb, index: int, error: str) -> bool:
    """The cell reads a name that an earlier cell, which failed (on a stub, or after one), binds:
    a learner who fixes the stub fixes this too.  A missing module or file never counts."""
    from course_utils.grading.markers import reads_and_binds

    if error.startswith(
        ("ModuleNotFoundError", "ImportError", "FileNotFoundError")
    ):
        return False
    reads = reads_and_binds(nb.cells[index].source)[0]
    failed = {i for i, *_ in _errors(nb) if i < index}
    return any(
        reads & reads_and_binds(nb.cells[i].source)[1] for i in failed
    )


# ------------------------------------------------------------------------------- the twins


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_multihead_twin_is_the_reference_computed_by_pytorch(dtype):
    """Same seed, same weights; in eval mode the same outputs and weights for every mask shape the
    course allows, queries that may attend to nothing included; unbatched inputs too."""
    from course_utils.models.twins import MultiHeadAttention as Twin
    from course_utils.references.multihead import (
        MultiHeadAttention as Reference,
    )

    tol = (
        dict(atol=1e-6, rtol=1e-5)
        if dtype == torch.float32
        else dict(atol=1e-12, rtol=1e-12)
    )
    for bias, qkv_bias in ((True, None), (False, None), (False, True)):
        torch.manual_seed(0)
        reference = (
            Reference(16, 4, dropout=0.3, bias=bias, qkv_bias=qkv_bias)
            .to(dtype)
            .eval()
        )
        torch.manual_seed(0)
        twin = (
            Twin(16, 4, dropout=0.3, bias=bias, qkv_bias=qkv_bias)
            .to(dtype)
            .eval()
        )
        assert reference.state_dict().keys() == twin.state_dict().keys()
        assert all(
            torch.equal(a, b)
            for a, b in zip(
                reference.state_dict().values(), twin.state_dict().values()
            )
        )
        g = torch.Generator().manual_seed(1)
        x, y = (
            torch.randn(3, 5, 16, generator=g, dtype=dtype),
            torch.randn(3, 7, 16, generator=g, dtype=dtype),
        )
        blocked = torch.ones(3, 5, 7, dtype=torch.bool)
        blocked[1, 2] = False  # sequence 1, query 2 may attend to nothing
        masks = [
            None,
            torch.rand(5, 7, generator=g) > 0.4,
            blocked,
            torch.rand(3, 1, 7, generator=g) > 0.3,
            torch.rand(3, 4, 5, 7, generator=g) > 0.6,
            torch.zeros(5, 7, dtype=torch.bool),
        ]
        for mask in masks:
            (out_r, w_r), (out_t, w_t) = (
                reference(x, y, y, mask),
                twin(x, y, y, mask),
            )
            torch.testing.assert_close(out_t, out_r, **tol)
            torch.testing.assert_close(w_t, w_r, **tol)
        torch.testing.assert_close(
            twin(x[0], y[0], y[0])[0], reference(x[0], y[0], y[0])[0], **tol
        )


@pytest.mark.parametrize(
    "config",
    [
        dict(
            img_size=16,
            patch_size=4,
            num_classes=10,
            dim=24,
            depth=2,
            num_heads=3,
            mlp_dim=48,
            dropout=0.2,
        ),
        dict(
            img_size=32,
            patch_size=4,
            num_classes=10,
            dim=32,
            depth=1,
            num_heads=4,
            mlp_dim=64,
            dropout=0.1,
            stem_channels=(16,),
            qkv_bias=False,
        ),
    ],
)
def test_the_vit_twins_are_the_reference_computed_by_torchvision(config):
    """Same seed, same parameters under the same names; in eval mode the same logits and attention
    maps; in train mode, under one seed, the same dropout masks as the course's readable path (the
    one a learner's block takes); gradients reach every parameter."""
    from course_utils.grading import checks
    from course_utils.models import twins
    from course_utils.references import vit

    torch.manual_seed(0)
    reference = vit.ViT(**config)
    torch.manual_seed(0)
    twin = twins.ViT(**config)
    assert list(reference.state_dict()) == list(twin.state_dict())
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            reference.state_dict().values(), twin.state_dict().values()
        )
    )
    # the course's head starts at zero: give it something to say
    with torch.no_grad():
        reference.head.weight.normal_()
        twin.head.weight.copy_(reference.head.weight)
    images = torch.randn(
        3,
        3,
        config["img_size"],
        config["img_size"],
        generator=torch.Generator().manual_seed(1),
    )
    reference.eval(), twin.eval()
    torch.testing.assert_close(
        twin(images), reference(images), atol=1e-5, rtol=1e-5
    )
    for a, b in zip(
        twin.attention_maps(images), reference.attention_maps(images)
    ):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)

    reference, twin = reference.double().train(), twin.double().train()
    torch.testing.assert_close(
        checks.seeded(twin, images.double()),
        checks.seeded(reference, images.double()),
        atol=1e-12,
        rtol=1e-12,
    )
    twin.float()(images).sum().backward()
    assert all(p.grad is not None for p in twin.parameters())


def test_the_encoder_block_twin_drops_out_as_a_learners_block_does():
    """A learner's block in the class edition uses the MultiHeadAttention twin; under one seed the
    EncoderBlock twin (the visible test's reference there) drops the same entries."""
    from course_utils.grading import checks
    from course_utils.models import twins
    from torch import nn

    class Learners(twins.EncoderBlock):
        def forward(self, x):
            h = self.norm1(x)
            x = x + self.drop1(self.attn(h, h, h)[0])
            return x + self.mlp(self.norm2(x))

    torch.manual_seed(0)
    twin = twins.EncoderBlock(16, 4, 32, dropout=0.2).double()
    learners = Learners(16, 4, 32, dropout=0.2).double()
    learners.load_state_dict(twin.state_dict())
    assert isinstance(
        learners.attn, twins.MultiHeadAttention
    ) and not isinstance(learners, nn.TransformerEncoderLayer)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    torch.testing.assert_close(
        checks.seeded(lambda t: twin.weighed(t)[0], x),
        checks.seeded(learners, x),
        atol=1e-12,
        rtol=1e-12,
    )
    torch.testing.assert_close(
        checks.seeded(twin, x),
        checks.seeded(learners, x),
        atol=1e-12,
        rtol=1e-12,
    )


def test_replay_finds_a_call_exactly_by_its_digest_and_within_tolerance_by_search(
    tmp_path, monkeypatch
):
    """Thousands of stored calls (a schedule asked for every step) are found by digest; a call
    whose floats differ in the last bits is found by the tolerant search; others miss."""
    from course_utils import replay

    stored = [
        {
            "arguments": replay.pack(
                {"step": s, "total": 5000, "rate": 0.5}
            ),
            "result": replay.pack(s / 5000),
        }
        for s in range(5000)
    ]
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    stored.append(
        {
            "arguments": replay.pack({"step": x, "total": 1, "rate": 0.5}),
            "result": replay.pack(x.sum()),
        }
    )
    torch.save({"f": stored}, tmp_path / "m.pt")
    monkeypatch.setattr(replay, "FIXTURES", tmp_path)
    replay._calls.cache_clear(), replay._index.cache_clear()
    try:
        assert all(
            replay.replay("m.f", step=s, total=5000, rate=0.5) == s / 5000
            for s in range(0, 5000, 7)
        )
        torch.testing.assert_close(
            replay.replay("m.f", step=x * (1 + 1e-7), total=1, rate=0.5),
            x.sum(),
        )
        with pytest.raises(replay.ReplayMiss, match="these are new"):
            replay.replay("m.f", step=5000, total=5000, rate=0.5)
        with pytest.raises(replay.ReplayMiss):
            replay.replay("m.f", step=3, total=5000, rate=0.25)
    finally:
        replay._calls.cache_clear(), replay._index.cache_clear()
