"""The top tier's runtime and settings: fast mode, device and seeds, every COURSE_* variable documented."""

from __future__ import annotations


import pytest
import torch

from course_utils import runtime


DTYPES = [torch.float32, torch.float64]


# ------------------------------------------------------------------ runtime
@pytest.mark.parametrize(
    "env,expected",
    [
        ({}, False),
        ({"CI": "true"}, True),
        ({"NBGRADER_EXECUTION": "autograde"}, True),
        ({"COURSE_FAST": "1"}, True),
        ({"CI": "true", "COURSE_FAST": "0"}, False),
    ],
)
def test_fast_mode(monkeypatch, env, expected):
    for var in ("CI", "NBGRADER_EXECUTION", "COURSE_FAST"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert runtime.fast_mode() is expected


def test_pick_device_and_seed(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if (
        not torch.cuda.is_available()
        and getattr(torch.backends, "mps", None)
        and torch.backends.mps.is_available()
    ):
        expected = "mps"
    assert runtime.pick_device().type == expected
    assert runtime.pick_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            runtime.pick_device("cuda")
    runtime.seed_everything(3)
    a = torch.randn(2)
    runtime.seed_everything(3)
    assert torch.equal(a, torch.randn(2))
    assert torch.equal(
        torch.randn(2, generator=runtime.generator(5)),
        torch.randn(2, generator=runtime.generator(5)),
    )


def test_every_course_variable_is_documented_in_settings():
    import re

    from course_utils import settings
    from tests.helpers import ROOT

    used = set()
    for path in [
        *ROOT.glob("course_utils/**/*.py"),
        *ROOT.glob("benchmarks/*.py"),
        *ROOT.glob("tools/*"),
        ROOT / "Makefile",
        ROOT / "autograde" / "nbgrader_config.py",
    ]:
        used |= set(
            re.findall(
                r"\bCOURSE_[A-Z0-9_]+\b", path.read_text(errors="replace")
            )
        )
    undocumented = sorted(used - set(settings.SETTINGS))
    assert not undocumented, (
        f"document these in course_utils/settings.py: {undocumented}"
    )
    assert all(name in settings.__doc__ for name in settings.SETTINGS), (
        "the module docstring's table is incomplete"
    )
