"""Which stored outputs of the solution notebooks nbval does not compare, and why: the one place.

Every other output must come out the same on any CPU (x86-64 with or without AVX-512 or native
bf16, ARM) and any thread count: numbers are computed so that their printed digits are stable
(float64 where it is cheap, no more digits than the computation holds).  tools/check_notebooks.py
proves it on one machine by running the notebooks a second time with other kernels; its
``--perturb`` audit finds outputs that a machine's own kernels happen to keep.

A cell may mask its output (the ``nbval-ignore-output`` tag) only for one of the reasons below,
and only if it is listed here; the notebook check (this module is its pytest plugin) refuses to
start when a tag and this table disagree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TIMING = "timing: wall-clock times of this machine, at this moment"
TRAINING = (
    "training: fast mode (tests, CI, grading) trains less than the run whose output is stored, "
    "and a trained model's numbers follow the CPU's kernels step by step"
)
DATA = (
    "data: names or measures the CIFAR-10 copy found on this machine, or the synthetic stand-in "
    "where there is none"
)
REASONS = (TIMING, TRAINING, DATA)

# (chapter, cell id) -> why its output is not compared
MASKED: dict[tuple[str, str], str] = {
    (
        "03_scaling",
        "e22f20be",
    ): TIMING,  # time per call of the (n, n) attention, n = 64 .. 4096
    (
        "04_multi_head",
        "3111a310",
    ): TRAINING,  # one head against two on the previous/next-token task
    (
        "04_multi_head",
        "toy-heads-paired",
    ): TRAINING,  # the two models' worse outputs, read seed by seed
    (
        "04_multi_head",
        "toy-neighbour-weights",
    ): TRAINING,  # what the trained heads attend to
    (
        "04_multi_head",
        "toy-head-ablation",
    ): TRAINING,  # the trained heads' losses, each head removed
    (
        "04_multi_head",
        "toy-one-head-blend",
    ): TRAINING,  # where one head's weaker output puts its probability
    (
        "05_positional_encoding",
        "2560e300",
    ): TRAINING,  # the toy task without and with positions
    ("06_masking", "3bd0c020"): TRAINING,  # the live seq2seq training log
    (
        "06_masking",
        "kv-cache-live-timing",
    ): TIMING,  # decoding with and without the KV cache, timed here
    ("07_vit_cifar10", "c8e05f90"): DATA,  # which images were loaded
    (
        "07_vit_cifar10",
        "own-block-share",
    ): DATA,  # the trained tokenizer's gradients on six of those images
    (
        "07_vit_cifar10",
        "35ee1c0a",
    ): TRAINING,  # the smoke run, stopped and resumed
    (
        "07_vit_cifar10",
        "own-vit-train",
    ): TRAINING,  # the learner's ViT on the laptop recipe
}

TAG = "nbval-ignore-output"


def masked_in(notebook: Path) -> set[tuple[str, str]]:
    """(chapter, cell id) of every cell of ``notebook`` tagged to mask its output."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    return {
        (notebook.stem, cell.get("id"))
        for cell in nb.cells
        if cell.cell_type == "code" and TAG in cell.metadata.get("tags", [])
    }


def disagreements(notebooks: list[Path]) -> list[str]:
    """What the notebooks' tags and MASKED disagree on, one line each (empty: they agree)."""
    problems = []
    for notebook in notebooks:
        tagged = masked_in(notebook)
        listed = {key for key in MASKED if key[0] == notebook.stem}
        for chapter, cid in sorted(tagged - listed):
            problems.append(
                f"{chapter}, cell {cid}: tagged {TAG} but not listed in tests/stored_outputs.py "
                "MASKED with its reason (timings and training runs only; compute any other "
                "number so that its printed digits are stable)"
            )
        for chapter, cid in sorted(listed - tagged):
            problems.append(
                f"{chapter}, cell {cid}: listed in tests/stored_outputs.py MASKED, "
                f"but the cell is not tagged {TAG} (or no longer exists)"
            )
    return problems


def notebooks_under(paths: list[Path]) -> list[Path]:
    """The notebooks in ``paths`` (notebook files, and folders searched through)."""
    found = []
    for path in paths:
        if path.is_dir():
            found += [
                p
                for p in sorted(path.rglob("*.ipynb"))
                if ".ipynb_checkpoints" not in p.parts
            ]
        elif path.suffix == ".ipynb":
            found.append(path)
    return found


def pytest_configure(config):
    """Refuse to start when the notebooks given and MASKED disagree.  Checked once, where the run
    starts (not in pytest-xdist's workers, which would turn the refusal into an internal error)."""
    if hasattr(config, "workerinput"):
        return
    here = Path(config.invocation_params.dir)
    paths = [here / arg.split("::")[0] for arg in config.args]
    problems = disagreements(notebooks_under(paths))
    if problems:
        raise pytest.UsageError(
            "stored outputs masked without a listed reason:\n  "
            + "\n  ".join(problems)
        )
