"""The stored outputs do not depend on the CPU: the check with other kernels catches a notebook
that prints a kernel-dependent number, passes its stable version, and masks nothing unlisted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests import stored_outputs
from tests.helpers import ROOT, chapter_ids

CHECK = [sys.executable, str(ROOT / "tools" / "check_notebooks.py")]

# A sum of float32 random normals, printed to the last digit: ATen draws normals with other
# roundings in its default kernels than in AVX2's or AVX-512's, and sums in another order.
FRAGILE = """import torch
g = torch.Generator().manual_seed(0)
print(torch.randn(1000, generator=g).sum().item())"""
# The same quantity in float64, printed to four decimals: every CPU prints the same.
STABLE = """import torch
g = torch.Generator().manual_seed(0)
print(f"{torch.randn(1000, generator=g, dtype=torch.float64).exp().sum().item():.4f}")"""


def _stored(tmp_path: Path, name: str, source: str) -> Path:
    """A notebook of one cell, executed and stored as an author stores a chapter (this machine's kernels)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CHECK, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _own_capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


@pytest.mark.slow
def test_other_kernels_catch_a_number_that_depends_on_them(tmp_path):
    if _own_capability().upper() == "DEFAULT":
        pytest.skip(
            "this CPU runs ATen's default kernels already: no other kernels to compare with"
        )
    fragile = _stored(tmp_path, "fragile", FRAGILE)
    stable = _stored(tmp_path, "stable", STABLE)

    # this machine's kernels: both reproduce
    same = _check(str(fragile), str(stable))
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-2000:]

    other = _check("--other-kernels", str(fragile))
    assert other.returncode != 0, (
        "the kernel-dependent number passed the check with other kernels:\n"
        + other.stdout[-3000:]
    )
    assert "Cell outputs differ" in other.stdout, other.stdout[-3000:]
    assert "ATen's default kernels instead of this CPU's" in other.stdout, (
        other.stdout[:500]
    )

    other = _check("--other-kernels", str(stable))
    assert other.returncode == 0, other.stdout[-3000:] + other.stderr[-2000:]


def test_masked_outputs_are_listed_with_a_reason():
    notebooks = [
        ROOT / "solutions" / cid / f"{cid}.ipynb" for cid in chapter_ids()
    ]
    assert stored_outputs.disagreements(notebooks) == []
    assert set(stored_outputs.MASKED.values()) <= set(stored_outputs.REASONS)


def test_an_unlisted_mask_stops_the_notebook_check(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print(1)")]
    )
    nb.cells[0].metadata["tags"] = [stored_outputs.TAG]
    nb.cells[0].id = "unlisted"
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    path = tmp_path / "masked.ipynb"
    nbformat.write(nb, path)
    # the notebook, and its folder with the other kernels (notebooks side by side: pytest-xdist)
    for args in ([str(path)], ["--other-kernels", str(tmp_path)]):
        proc = _check(*args)
        assert proc.returncode != 0
        assert (
            "masked, cell unlisted: tagged nbval-ignore-output but not listed"
            in proc.stdout + proc.stderr
        ), proc.stdout[-2000:] + proc.stderr[-2000:]
