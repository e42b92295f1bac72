"""The course package as a learner outside the repository gets it: a wheel built from the
repository, installed non-editable into a fresh environment, run from a folder elsewhere."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("install")]


def _venv_sharing_dependencies(folder: Path) -> Path:
    """A virtual environment at ``folder`` without the course package: PyTorch and the rest come
    from this environment's site-packages through a .pth file (plain path entries, so the
    editable install's finder is not run from there), with no pip or setuptools of its own.
    Returns its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)],
        check=True,
    )
    python = folder / "bin" / "python"
    site = Path(
        subprocess.run(
            [
                str(python),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "course_deps.pth").write_text(
        sysconfig.get_path("purelib") + "\n"
    )
    return python


@pytest.fixture(scope="session")
def installed_env(tmp_path_factory) -> Path:
    """A virtual environment with the course's wheel installed (non-editable, no dependencies:
    PyTorch and the rest come from this environment's site-packages through a .pth file, so
    the test needs no network and no second copy of PyTorch)."""
    tmp = tmp_path_factory.mktemp("install")
    wheels = tmp / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    python = _venv_sharing_dependencies(tmp / "venv")
    wheel = next(wheels.glob("course_utils-*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return python


def test_results_resolve_from_a_wheel_install(installed_env, tmp_path):
    code = (
        "import course_utils, course_utils.results as r, pathlib, json\n"
        "print(json.dumps({'package': course_utils.__file__, 'results': str(r.RESULTS_DIR)}))\n"
        "names = sorted(p.stem for p in r.RESULTS_DIR.glob('*.json'))\n"
        "for n in names: r.read_result(n)\n"
        "print(len(names), 'results read')\n"
        "import course_utils.experiments.recipes as e, course_utils.experiments.sweep as s\n"  # what a Colab notebook reads
        "print(len(e.RECIPES), 'recipes', len(s.BUDGETS), 'budgets')\n"
    )
    out = subprocess.run(
        [str(installed_env), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    where = json.loads(out.stdout.splitlines()[0])
    assert not where["package"].startswith(str(ROOT)), (
        f"the repository's copy was imported: {where}"
    )
    assert not where["results"].startswith(str(ROOT)), (
        f"results were read from the repository: {where}"
    )
    committed = len(list((ROOT / "results").glob("*.json")))
    assert out.stdout.splitlines()[1] == f"{committed} results read", (
        out.stdout
    )
    from course_utils.experiments import recipes, sweep

    assert (
        out.stdout.splitlines()[2]
        == f"{len(recipes.RECIPES)} recipes {len(sweep.BUDGETS)} budgets"
    ), out.stdout
    models = list(Path(where["results"]).glob("*.pth"))
    assert len(models) == len(list((ROOT / "results").glob("*.pth"))), (
        "model files missing from the install"
    )


def _setup_cell(nb) -> str:
    cells = [
        c for c in nb.cells if "course-setup" in c.metadata.get("tags", [])
    ]
    assert len(cells) == 1, (
        "a chapter notebook must open with exactly one setup cell (tools/setup_cell.py)"
    )
    return cells[0].source


def test_setup_cell_installs_the_package_when_missing(
    installed_env, tmp_path
):
    """In an environment without the course package, the student notebook's setup cell installs
    it (here from a wheel named by COURSE_PACKAGE, without the network) and says so."""
    import nbformat

    nb = nbformat.read(
        ROOT / "notebooks" / "01_qkv_retrieval" / "01_qkv_retrieval.ipynb",
        as_version=4,
    )
    env_dir = tmp_path / "bare"
    python = _venv_sharing_dependencies(env_dir)
    wheel = next(installed_env.parents[2].glob("wheels/course_utils-*.whl"))
    code = (
        _setup_cell(nb)
        + "\nimport course_utils.grading.checks\nprint('imported', course_utils.grading.checks.__name__)\n"
    )
    env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PIP_NO_INDEX": "1",
        "COURSE_PACKAGE": str(wheel),
    }
    first = subprocess.run(
        [str(python), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    assert (
        "Installing the course package" in first.stdout
        and "imported course_utils.grading.checks" in first.stdout
    )
    again = subprocess.run(
        [str(python), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    # idempotent
    assert "nothing to do" in again.stdout, again.stdout + again.stderr


def test_setup_cell_says_in_one_sentence_what_to_do(tmp_path):
    """Without an address, or when pip cannot install (offline, a wrong address), the setup cell
    ends in one message that names the fix (the exact %env line), not in pip's traceback; a
    repository's plain web address is turned into the requirement pip needs."""
    sys.path.insert(0, str(ROOT / "tools"))
    from setup_cell import TEMPLATE

    env_dir = tmp_path / "bare"
    python = _venv_sharing_dependencies(env_dir)
    env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PIP_NO_INDEX": "1",
        "GIT_TERMINAL_PROMPT": "0",
    }

    def run(default: str, **extra) -> str:
        proc = subprocess.run(
            [str(python), "-c", TEMPLATE.format(default=default)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=300,
        )
        assert proc.returncode != 0, proc.stdout
        return proc.stderr.strip().splitlines()[-1]

    missing = run("")
    assert (
        missing.startswith("ModuleNotFoundError: course_utils is missing")
        and "%env COURSE_PACKAGE=" in missing
    )
    # refused at once: like no network
    offline = run("", COURSE_PACKAGE="https://127.0.0.1:9/owner/course")
    assert offline.startswith(
        "ModuleNotFoundError: could not install the course package from "
        "course-utils @ git+https://127.0.0.1:9/owner/course (pip: "
    ), offline
    assert (
        "connect to the internet" in offline
        and "%env COURSE_PACKAGE=" in offline
    )


READS_RESULTS = [
    "01_qkv_retrieval",
    "03_scaling",
    "06_masking",
    "07_vit_cifar10",
    "08_tuning",
]


@pytest.mark.parametrize("cid", READS_RESULTS)
def test_student_notebook_runs_outside_the_repository(
    cid, installed_env, tmp_path, monkeypatch
):
    """The student notebook, copied out of the repository and run in fast mode with the wheel
    installed, gets to its first exercise stub; no import and no read_result fails anywhere."""
    import json
    import re

    import nbformat
    from nbclient import NotebookClient

    kernels = tmp_path / "jupyter" / "kernels" / "course-wheel"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    str(installed_env),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "course (wheel)",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("COURSE_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("COURSE_RESULTS_DIR", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.read(
        ROOT / "notebooks" / cid / f"{cid}.ipynb", as_version=4
    )
    NotebookClient(
        nb,
        kernel_name="course-wheel",
        timeout=300,
        allow_errors=True,
        resources={"metadata": {"path": str(work)}},
    ).execute()
    errors = [
        (i, o.ename, o.evalue)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert errors, f"{cid}: no cell failed, but the exercises are stubs"
    assert errors[0][1] in ("NotImplementedError", "CheckFailed"), (
        f"{cid}: first error is not a stub: {errors[0]}"
    )
    broken = [
        e
        for e in errors
        if e[1]
        in ("ModuleNotFoundError", "ImportError", "FileNotFoundError")
    ]
    assert not broken, (
        f"{cid}: outside the repository these cells fail: {broken}"
    )
    named = set(
        re.findall(
            r"read_result\(\s*[\"']([\w.-]+)[\"']",
            "\n".join(c.source for c in nb.cells),
        )
    )
    # a result the repository does not hold yet is one the notebook reads only once it exists (its
    # run above would have failed otherwise): the installed package must ship every other one
    names = {n for n in named if (ROOT / "results" / f"{n}.json").is_file()}
    assert names, f"{cid}: no result named in the notebook is in results/"
    code = (
        "import course_utils.results as r\n"
        f"for n in {sorted(names)!r}: r.read_result(n)\n"
        "print('ok')"
    )
    out = subprocess.run(
        [str(installed_env), "-c", code],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.strip() == "ok", (
        f"{cid}: read_result fails outside the repository: {out.stderr[-2000:]}"
    )
