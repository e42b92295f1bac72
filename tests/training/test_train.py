"""The trainer: a killed run resumes where it stopped and ends exactly where an uninterrupted
run ends; two processes under torchrun (gloo, CPU) match one process on the same global batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT

# CPU-heavy: keep the two runs on one worker
pytestmark = pytest.mark.xdist_group("train")

CMD = [
    sys.executable,
    "-m",
    "course_utils.cli.train",
    "--recipe",
    "smoke",
    "--fast",
]


def _run(args, env=None, **kw):
    env = env or dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        CMD + args,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        **kw,
    )


def _history(out: Path) -> list[dict]:
    return json.loads((out / "history.json").read_text())


def _metrics(history):
    return [
        (
            h["epoch"],
            round(h["train_loss"], 6),
            round(h["val_loss"], 6),
            h["val_acc"],
        )
        for h in history
    ]


@pytest.fixture
def recipes() -> dict:
    """The named recipes (``train`` takes a ``Recipe``, not a name)."""
    from course_utils.experiments.recipes import RECIPES

    return RECIPES


@pytest.mark.slow
def test_killed_run_resumes_and_matches_uninterrupted_run(tmp_path):
    extra = ["--set", "fast_epochs=6"]
    whole = tmp_path / "whole"
    proc = _run(["--out", str(whole), *extra])
    assert proc.returncode == 0, proc.stderr[-3000:]

    killed = tmp_path / "killed"
    child = subprocess.Popen(
        CMD + ["--out", str(killed), *extra],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and child.poll() is None:
        if (killed / "history.json").exists() and len(_history(killed)) >= 2:
            break
        time.sleep(0.05)
    assert child.poll() is None, (
        "the run finished before it could be killed; make it longer"
    )
    child.send_signal(signal.SIGKILL)
    child.wait()
    # The checkpoint is the record a resume trusts; history.json is written just after it, so a
    # kill between the two leaves the file one epoch behind (never ahead, never torn).
    done_before = torch.load(killed / "checkpoint.pt", weights_only=False)[
        "epoch"
    ]
    assert 2 <= done_before < 6
    assert len(_history(killed)) in (done_before - 1, done_before)

    proc = _run(["--out", str(killed), *extra])  # the same command again
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resuming smoke from epoch {done_before}" in proc.stdout
    assert _metrics(_history(killed)) == _metrics(_history(whole))
    a = torch.load(whole / "best_model.pt")
    b = torch.load(killed / "best_model.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_time_limit_stops_between_epochs_and_the_same_command_continues(
    tmp_path, recipes
):
    """--stop-after-minutes: a lent machine's fixed time split over several calls of one command."""
    from course_utils.training.trainer import train

    smoke = recipes["smoke"]
    whole = train(smoke, tmp_path / "whole", fast=True, log=lambda *_: None)
    lines: list[str] = []
    first = train(
        smoke,
        tmp_path / "split",
        fast=True,
        stop_after_s=1e-3,
        log=lines.append,
    )
    # stopped after its first epoch
    assert first["epochs_done"] == 1 and "test_acc" not in first
    assert any(
        "stopping after epoch 1" in line
        and "run the same command again" in line
        for line in lines
    )
    rest = train(
        smoke,
        tmp_path / "split",
        fast=True,
        stop_after_s=3600,
        log=lines.append,
    )
    assert rest["epochs_done"] == whole["epochs_done"] == 3
    assert (
        _metrics(rest["history"]) == _metrics(whole["history"])
        and rest["test_acc"] == whole["test_acc"]
    )
    proc = _run(
        ["--out", str(tmp_path / "cli"), "--stop-after-minutes", "0.00001"]
    )
    assert (
        proc.returncode == 0 and "stopping after epoch 1" in proc.stdout
    ), proc.stderr[-3000:]


@pytest.mark.slow
def test_two_processes_match_one_on_the_same_global_batch(tmp_path):
    # augmentation draws differ per process
    common = [
        "--set",
        "augment=false",
        "fast_epochs=2",
    ]
    single = tmp_path / "single"
    proc = _run(
        ["--out", str(single), *common],
        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    ddp = tmp_path / "ddp"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "course_utils.cli.train",
            "--recipe",
            "smoke",
            "--fast",
            "--out",
            str(ddp),
            *common,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    one, two = _history(single), _history(ddp)
    assert [h["epoch"] for h in one] == [h["epoch"] for h in two]
    for a, b in zip(one, two):
        assert abs(a["val_loss"] - b["val_loss"]) < 1e-4, (a, b)
    wa, wb = (
        torch.load(single / "best_model.pt"),
        torch.load(ddp / "best_model.pt"),
    )
    # The all-reduce sums the two halves' gradients in another order than one process does, and
    # Adam divides by the gradient's RMS, so a weight whose gradient is near zero can differ in
    # its last digits after a few steps; the tolerance leaves room for that, not for a wrong mean.
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=3e-5, rtol=1e-4)


def test_train_takes_a_recipe_not_a_name(tmp_path):
    from course_utils.training.trainer import train

    with pytest.raises(TypeError, match="takes a Recipe"):
        train("smoke", tmp_path / "run", fast=True, log=lambda *_: None)
    assert not (tmp_path / "run").exists()


def test_a_stored_recipe_reads_back_as_the_recipe_it_was(recipes):
    """A results file's or checkpoint's recipe (JSON: lists, not tuples) rebuilds the same Recipe."""
    import json

    from course_utils.training.recipes import as_stored, from_stored

    for name in ("cpu", "gpu_fast", "smoke"):
        stored = json.loads(json.dumps(recipes[name].to_dict()))
        back = from_stored(stored)
        assert back.test_shifts == recipes[name].test_shifts, name
        assert all(type(s) is tuple for s in back.test_shifts), name
        assert as_stored(back) == stored, name
    older = json.loads(json.dumps(recipes["cpu"].to_dict()))
    del older[
        "clean_train_eval"
    ]  # written before the field existed: its default
    assert from_stored(older).clean_train_eval == 0
    with pytest.raises(
        ValueError, match=r"fields Recipe lacks: \['gone'\].*commit"
    ):
        from_stored({**older, "gone": 1})


def test_set_overrides_parse_their_help_example_and_check_types(recipes):
    from course_utils.training.recipes import apply_overrides

    recipe = apply_overrides(
        recipes["cpu"],
        [
            "lr=1e-3",
            "policy=trivial",
            "epochs=3",
            "grad_clip=None",
            "augment=false",
            'model_kwargs={"dim": 64}',
        ],
    )
    assert (
        recipe.lr,
        recipe.policy,
        recipe.epochs,
        recipe.grad_clip,
        recipe.augment,
    ) == (1e-3, "trivial", 3, None, False)
    # the recipe itself is untouched
    assert (
        recipe.model_kwargs == {"dim": 64} and recipes["cpu"].policy is None
    )
    for bad, says in [
        ("epochs=abc", "expects int"),
        ("nope=1", "Recipe has no such field"),
        ("lr", "KEY=VALUE"),
        ("augment=3", "expects bool"),
        ("epochs=None", "not optional"),
        # a misspelt choice fails when the recipe is made, before any data loads
        ("amp=fp32", "amp='fp32' is not a choice.*'bf16'"),
        ("policy=trivialaugment", "'trivial'"),
        ("schedule=cos", "'cosine'"),
        ("optimizer=adam", "'adamw'"),
        ("model=vit2", "'resnet'"),
    ]:
        with pytest.raises(ValueError, match=says):
            apply_overrides(recipes["cpu"], [bad])
    import dataclasses

    with pytest.raises(ValueError, match="compile_mode"):
        dataclasses.replace(recipes["gpu"], compile_mode="fast")


def test_trainer_accepts_a_compiled_net():
    """The gpu recipe compiles its model: the trainer must keep the compiled wrapper (which has no truth value)."""
    from torch import nn

    from course_utils.training.trainer import Trainer

    model = nn.Linear(4, 2)
    net = torch.compile(model)
    trainer = Trainer(
        model, torch.optim.SGD(model.parameters(), lr=0.1), net=net
    )
    assert (
        trainer.net is net
        and Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1)).net
        is model
    )


def test_recipe_compile_mode_reaches_torch_compile_and_old_checkpoints_resume(
    tmp_path, monkeypatch, recipes
):
    """``compile_mode`` is handed to torch.compile (recorded, not compiled: the mode's effect is a
    GPU's to measure), and a checkpoint written before the field existed still resumes."""
    import dataclasses

    from course_utils.training import trainer as T

    modes = []
    monkeypatch.setattr(
        T.torch, "compile", lambda net, mode=None: modes.append(mode) or net
    )
    recipe = dataclasses.replace(
        recipes["smoke"], compile=True, compile_mode="reduce-overhead"
    )
    T.train(
        recipe,
        tmp_path / "run",
        fast=True,
        log=lambda *_: None,
        max_epochs_this_call=1,
    )
    assert modes == ["reduce-overhead"]
    # an older checkpoint: its recipe has no compile_mode; the default (None) is what it ran with
    plain = dataclasses.replace(recipe, compile_mode=None)
    T.train(
        plain,
        tmp_path / "old",
        fast=True,
        log=lambda *_: None,
        max_epochs_this_call=1,
    )
    ckpt_path = tmp_path / "old" / "checkpoint.pt"
    ckpt = torch.load(ckpt_path, weights_only=False)
    del ckpt["recipe"]["compile_mode"]
    torch.save(ckpt, ckpt_path)
    lines = []
    summary = T.train(plain, tmp_path / "old", fast=True, log=lines.append)
    assert (
        any(line.startswith("resuming smoke from epoch 1") for line in lines)
        and summary["epochs_done"] == summary["epochs"] > 1
    )
    # a real difference still refuses
    with pytest.raises(RuntimeError, match="different recipe"):
        T.train(
            dataclasses.replace(plain, lr=plain.lr * 2),
            tmp_path / "old",
            fast=True,
            log=lambda *_: None,
        )


def test_clean_training_accuracy_is_measured_beside_and_changes_nothing(
    tmp_path, recipes
):
    """``clean_train_eval`` adds the accuracy on unaltered training images to each epoch's record, and
    training stays bit for bit what it was without it (the pass draws no random numbers)."""
    import dataclasses

    from course_utils.training import data as cdata
    from course_utils.training.trainer import train

    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=640, n_test=64), val_size=128
    )
    recipe = dataclasses.replace(
        recipes["smoke"],
        epochs=2,
        batch_size=64,
        mixup_alpha=0.8,
        augment=True,
    )
    plain = train(
        recipe,
        tmp_path / "plain",
        data=split,
        evaluate_test=False,
        log=lambda *_: None,
    )
    clean = train(
        dataclasses.replace(recipe, clean_train_eval=200),
        tmp_path / "clean",
        data=split,
        evaluate_test=False,
        log=lambda *_: None,
    )
    assert _metrics(plain["history"]) == _metrics(clean["history"])
    for record in clean["history"]:
        assert (
            0.0 <= record["clean_train_acc"] <= 1.0
            and record["clean_train_loss"] > 0
        )
        assert "clean_train_acc" not in plain["history"][record["epoch"] - 1]
    a, b = (
        torch.load(p / "checkpoint.pt", weights_only=False)["model"]
        for p in (tmp_path / "plain", tmp_path / "clean")
    )
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_precision_probe_leaves_the_model_as_it_was():
    """``amp="auto"`` times forward/backward passes on the model that will train: afterwards its
    weights, norm statistics and gradients are what they were, and the global RNG has not moved."""
    from torch import nn

    from course_utils.training.precision import _time_steps, in_rotation

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.BatchNorm2d(4),
        nn.Flatten(),
        nn.Linear(4 * 30 * 30, 10),
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(8, 3, 32, 32)
    rng = torch.get_rng_state()
    seconds = in_rotation(
        {
            None: lambda: _time_steps(model, x, None),
            torch.bfloat16: lambda: _time_steps(model, x, torch.bfloat16),
        },
        rounds=3,
        alternate=True,
        warmup=0,
    )
    assert {k: len(v) for k, v in seconds.items()} == {
        None: 3,
        torch.bfloat16: 3,
    }
    assert all(s > 0 for v in seconds.values() for s in v)
    assert all(
        torch.equal(before[k], v) for k, v in model.state_dict().items()
    )
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)


def test_a_run_result_names_the_validation_size_it_was_chosen_on(
    tmp_path, monkeypatch
):
    """The result's provenance states the split the epoch was picked on, read from the data, so a
    recipe with a smaller validation (cpu_airbench_tail_49k's 1,000 images) says so."""
    from course_utils.training import data as cdata
    from course_utils.training.checkpoint import write_run_result

    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=640, n_test=64), val_size=120
    )
    write_run_result(
        "tiny_run",
        torch.nn.Linear(2, 2),
        {"test_acc": 0.5},
        split,
        False,
        1.0,
        "0" * 40,
        lambda *_: None,
    )
    stored = json.loads((tmp_path / "results" / "tiny_run.json").read_text())
    assert (
        stored["provenance"]["selection_split"]
        == "validation (120 images carved from the training set)"
    )
