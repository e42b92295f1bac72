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


@pytest.fixture(scope="session")
def installed_env(tmp_path_factory) -> Path:
    """A virtual environment with the course's wheel installed (non-editable, no dependencies:
    PyTorch and the rest come from this environment's site-packages through a .pth file, so
    the test needs no network and no second copy of PyTorch)."""
    tmp = tmp_path_factory.mktemp("install")
    wheels = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels), str(ROOT)], check=True, capture_output=True, text=True)
    env = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # Plain path entries: the editable install's finder (a .pth hook) is not run from here.
    (site / "course_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    wheel = next(wheels.glob("course_utils-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, text=True)
    return python


def test_results_resolve_from_a_wheel_install(installed_env, tmp_path):
    code = (
        "import course_utils, course_utils.results as r, pathlib, json\n"
        "print(json.dumps({'package': course_utils.__file__, 'results': str(r.RESULTS_DIR)}))\n"
        "names = sorted(p.stem for p in r.RESULTS_DIR.glob('*.json'))\n"
        "for n in names: r.read_result(n)\n"
        "print(len(names), 'results read')\n"
    )
    out = subprocess.run([str(installed_env), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    where = json.loads(out.stdout.splitlines()[0])
    assert not where["package"].startswith(str(ROOT)), f"the repository's copy was imported: {where}"
    assert not where["results"].startswith(str(ROOT)), f"results were read from the repository: {where}"
    committed = len(list((ROOT / "results").glob("*.json")))
    assert out.stdout.splitlines()[1] == f"{committed} results read", out.stdout
    models = list(Path(where["results"]).glob("*.pth"))
    assert len(models) == len(list((ROOT / "results").glob("*.pth"))), "model files missing from the install"
