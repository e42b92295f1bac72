"""The property tests' profile: the same examples on every CI run, new ones elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT

PROBE = (
    "import tests.conftest; from hypothesis import settings; "
    "print(settings.default.derandomize, settings.default.print_blob)"
)


def _profile(**env: str) -> str:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "HYPOTHESIS_PROFILE")
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_ci_draws_fixed_examples_and_a_desk_run_explores():
    assert _profile(CI="true") == ["True", "True"]
    assert _profile() == ["False", "True"]
    assert _profile(CI="true", HYPOTHESIS_PROFILE="explore") == [
        "False",
        "True",
    ]
