"""The fast GPU recipe and the one command a short GPU window runs, checked without a GPU."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils import results
from course_utils.experiments.recipes import RECIPES
from course_utils.models.compact import CompactTransformer
from course_utils.training.recipes import build_model

ROOT = Path(__file__).resolve().parents[2]


def _analytic_forward_flops(
    dim: int,
    depth: int,
    mlp: int,
    tokens: int,
    img: int = 32,
    classes: int = 10,
) -> int:
    """Multiply-adds x 2 of CCT's forward pass on one image, written out layer by layer."""
    # the tokenizer's 3x3 convolution, at full resolution before the pool
    conv = img * img * dim * 3 * 9
    # the MLP's two layers
    per_block = (
        tokens * dim * 3 * dim  # q, k, v
        + 2
        * tokens
        * tokens
        * dim  # scores and the weighted sum, all heads together
        + tokens * dim * dim  # output projection
        + 2 * tokens * dim * mlp
    )
    pool_and_head = tokens * dim + dim * classes
    return 2 * (conv + depth * per_block + pool_and_head)


def test_gpu_fast_counts_the_flops_the_architecture_implies():
    from course_utils.experiments.gpu_window import flops_per_image

    recipe = RECIPES["gpu_fast"]
    kw = recipe.model_kwargs
    forward = _analytic_forward_flops(
        kw["dim"], kw["depth"], int(kw["dim"] * kw["mlp_ratio"]), tokens=256
    )
    counted = flops_per_image(recipe)
    # forward + backward: about three forward passes (the first convolution has no input gradient)
    assert 2.9 * forward < counted < 3.0 * forward, (counted, forward)
    assert build_model(recipe).num_tokens == 256, (
        "CCT-7/3x1: a 16x16 grid of tokens"
    )


def test_compact_transformer_shapes_pooling_and_stochastic_depth():
    torch.manual_seed(0)
    model = CompactTransformer(
        dim=32, depth=3, num_heads=2, drop_path=0.5, attn_dropout=0.0
    )
    x = torch.randn(4, 3, 32, 32)
    assert model(x).shape == (4, 10)
    rates = [block.drop.p for block in model.blocks]
    assert rates == pytest.approx([0.0, 0.25, 0.5]), (
        "stochastic depth rises linearly to its value in the last block"
    )
    model.eval()
    assert torch.equal(model(x), model(x)), (
        "evaluation keeps every branch: no randomness"
    )
    model.train()
    assert not torch.equal(model(x), model(x)), (
        "training drops branches at random"
    )
    with pytest.raises(
        ValueError, match=r"expected images \(B, 3, 32, 32\)"
    ):
        model(torch.randn(2, 3, 28, 28))
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        CompactTransformer(dim=30, num_heads=4)


def test_window_plans_the_epochs_that_fit_and_refuses_too_little_time():
    from course_utils.experiments import gpu_window

    recipe = RECIPES["gpu_fast"]
    step_s, steps = 0.03, 87
    epoch_s = steps * step_s * gpu_window.STEP_OVERHEAD
    cut = gpu_window.plan(recipe, 300, step_s, steps)
    assert cut.name == "gpu_fast_cut" and cut.epochs < recipe.epochs
    assert (
        cut.epochs * epoch_s + gpu_window.RESERVE_S
        <= 300
        < (cut.epochs + 1) * epoch_s + gpu_window.RESERVE_S
    )
    assert cut.warmup_epochs == pytest.approx(
        max(1.0, round(recipe.warmup_epochs * cut.epochs / recipe.epochs, 1))
    )
    assert (
        dataclasses.replace(
            cut,
            name=recipe.name,
            epochs=recipe.epochs,
            warmup_epochs=recipe.warmup_epochs,
        )
        == recipe
    ), "only the length is cut"
    assert gpu_window.plan(recipe, 10**6, step_s, steps) is recipe, (
        "never more than the recipe's epochs"
    )
    stored = json.loads(
        (ROOT / "results" / "ch08_gpu_fast_cut.json").read_text()
    )["data"]
    ratio = (
        stored["train_time_s"]
        / stored["epochs"]
        / (
            (stored["train_images"] // stored["recipe"]["batch_size"])
            * stored["window"]["step"]["step_s"]
        )
    )
    assert ratio <= gpu_window.STEP_OVERHEAD, (
        "the planning ratio covers the stored window's epochs"
    )
    with pytest.raises(ValueError, match="fewer than 2 epochs"):
        gpu_window.plan(recipe, 55, step_s, steps)
    assert (
        gpu_window.peak_tflops("NVIDIA H100 80GB HBM3")
        == gpu_window.PEAK_BF16_TFLOPS["H100"]
    )
    assert (
        gpu_window.peak_tflops("NVIDIA H100 PCIe")
        == gpu_window.PEAK_BF16_TFLOPS["H100 PCIe"]
    )
    assert gpu_window.peak_tflops("a CPU") is None


def test_mixing_stops_where_the_recipe_says(tmp_path, monkeypatch):
    """MixUp/CutMix run for the first ``mix_until`` of the epochs, then only label smoothing."""
    from course_utils.training import data as cdata
    from course_utils.training import trainer as trainer_module

    seen = []
    original = trainer_module.Trainer.train_epoch

    def spy(self, batches, *, mix=None, **kw):
        _, target = mix(torch.zeros(64, 3, 32, 32), torch.arange(64) % 10)
        # the least any image keeps of one class
        seen.append(float(target.max(dim=1).values.min()))
        return original(self, batches, mix=mix, **kw)

    monkeypatch.setattr(trainer_module.Trainer, "train_epoch", spy)
    recipe = dataclasses.replace(
        RECIPES["smoke"],
        mixup_alpha=1.0,
        mix_until=0.5,
        fast_epochs=2,
        fast_train=128,
        fast_eval=64,
    )
    data = cdata.split_validation(
        cdata.synthetic_cifar(256, 64), val_size=64
    )
    trainer_module.train(
        recipe,
        tmp_path,
        fast=True,
        data=data,
        log=lambda *_: None,
        evaluate_test=False,
    )
    smooth = 1 - recipe.label_smoothing + recipe.label_smoothing / 10
    assert seen[1] == pytest.approx(smooth), (
        "the second half: one-hot targets, label-smoothed only"
    )
    assert seen[0] < smooth, (
        "the first half: mixed targets (no class keeps its full weight)"
    )


@pytest.mark.parametrize(
    "flags, epochs, run_name",
    [([], 10**6, "gpu_fast_cut"), (["--no-cut"], None, "gpu_fast")],
    ids=["cut-to-fit", "never-cut"],
)
def test_the_window_runs_end_to_end_on_a_stand_in_device(
    tmp_path, flags, epochs, run_name
):
    """Three minutes cannot fit a million epochs of even this tiny model, however fast or idle the
    CPU (gpu_fast's own 150 fit them on an idle one): the window cuts the schedule; with
    ``--no-cut`` it keeps the whole recipe (whose fast mode then ends in time here)."""
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "course_utils.experiments.gpu_window",
            "--minutes",
            "3",
            "--device",
            "cpu",
            "--fast",
            "--bench-steps",
            "1",
            "--seed",
            "0",
            "--out-dir",
            str(out),
            "--set",
            "batch_size=32",
            "fast_train=256",
            "fast_eval=64",
            'model_kwargs={"dim": 32, "depth": 1, "num_heads": 2}',
            "amp=none",
            *([f"epochs={epochs}"] if epochs else []),
            *flags,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (
        "GFLOP per training image" in run.stdout and "finished" in run.stdout
    )
    window = json.loads(
        (out / "runs" / run_name / "window.json").read_text()
    )
    assert (
        window["flops_per_image"] > 0 and window["step"]["images_per_s"] > 0
    )
    assert (window["planned_epochs"] == window["recipe_epochs"]) == bool(
        flags
    )
    assert set(window["time_to_val_acc_s"]) == {"0.94", "0.95"}
    assert (out / "runs" / run_name / "history.json").exists()
    assert not (out / "runs" / run_name / "checkpoint.pt").exists(), (
        "a finished run needs no checkpoint"
    )


def test_each_window_runs_the_next_seed_and_resumes_an_unfinished_one_first(
    tmp_path,
):
    from course_utils.experiments.gpu_window import next_seed

    runs, res = tmp_path / "runs", tmp_path / "results"
    runs.mkdir()
    res.mkdir()
    assert next_seed("gpu_fast", runs, res) == 0
    (res / "ch08_gpu_fast_cut.json").write_text("{}")
    assert next_seed("gpu_fast", runs, res) == 0, (
        "a cut run is not the recipe's run: seed 0 is still to do"
    )
    (res / "ch08_gpu_fast.json").write_text("{}")
    assert next_seed("gpu_fast", runs, res) == 1
    (res / "ch08_gpu_fast_seed1.json").write_text("{}")
    assert next_seed("gpu_fast", runs, res) == 2
    stopped = runs / "gpu_fast_cut_seed1"
    stopped.mkdir()
    (stopped / "checkpoint.pt").write_bytes(b"")
    assert next_seed("gpu_fast", runs, res) == 1, (
        "a run an earlier window stopped goes on first"
    )
    (stopped / "summary.json").write_text("{}")
    (res / "ch08_gpu_fast_seed2.json").write_text("{}")
    assert next_seed("gpu_fast", runs, res) == 2, (
        "every seed done: the last one again"
    )


def test_code_stamp_names_the_commit_only_for_the_same_bytes(
    tmp_path, monkeypatch
):
    for rel, text in {
        "course_utils/a.py": "x = 1\n",
        "benchmarks/b.py": "y = 2\n",
        "pyproject.toml": "[p]\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "course_utils" / "__pycache__").mkdir()
    (
        tmp_path / "course_utils" / "__pycache__" / "a.cpython-312.pyc"
    ).write_bytes(b"\0")
    digest = results.code_digest(tmp_path)
    (tmp_path / results.STAMP_FILE).write_text(
        json.dumps({"commit": "abc123", "digest": digest})
    )
    assert results._stamped(tmp_path) == "abc123"
    (
        tmp_path / "course_utils" / "__pycache__" / "a.cpython-312.pyc"
    ).write_bytes(b"other")
    assert results._stamped(tmp_path) == "abc123", (
        "bytecode caches are not code"
    )
    (tmp_path / "benchmarks" / "b.py").write_text("y = 3\n")
    assert results._stamped(tmp_path) is None, (
        "an edited file: the stamp no longer speaks for the code"
    )
    (tmp_path / "benchmarks" / "b.py").write_text("y = 2\n")
    (tmp_path / "course_utils" / "new.py").write_text("")
    assert results._stamped(tmp_path) is None, "an added file too"
