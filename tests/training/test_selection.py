"""Choices are made on validation data, never on the test set: the trainer reads the test images only
after its last epoch, with the weights the validation chose, and the sweeps (ablation, search) never
read them at all.  Checked by running them on a split whose test images record every read."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

from course_utils.experiments import sweep as ch08
from course_utils.experiments.recipes import RECIPES
from course_utils.training import data as cdata
from course_utils.training import sweep, trainer

ROOT = Path(__file__).resolve().parents[2]


class Tripwire(torch.Tensor):
    """A tensor that notes every torch operation on it while ``armed`` holds."""

    armed = False
    reads: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if Tripwire.armed:
            Tripwire.reads.append(getattr(func, "__name__", str(func)))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


@pytest.fixture
def wired(monkeypatch, tmp_path):
    """A tiny synthetic split whose test images and labels are tripwires, armed."""
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=640, n_test=64), val_size=128
    )
    split = dataclasses.replace(
        split,
        test_images=split.test_images.as_subclass(Tripwire),
        test_labels=split.test_labels.as_subclass(Tripwire),
    )
    Tripwire.reads = []
    Tripwire.armed = True
    yield split
    Tripwire.armed = False


def _recipe(epochs: int = 3):
    return dataclasses.replace(
        RECIPES["smoke"],
        name="tiny",
        epochs=epochs,
        batch_size=64,
        schedule="constant",
        augment=False,
        warmup_epochs=0,
    )


def test_the_trainer_reads_the_test_set_once_after_choosing_on_validation(
    wired, tmp_path, monkeypatch
):
    chosen: list[dict] = []
    original = trainer._test_once

    def test_once(
        trainer_, best_state, data, recipe, summary, out, val_loader
    ):
        # from here on the test set may be read: the best epoch has been chosen
        chosen.append(dict(summary))
        Tripwire.armed = False
        return original(
            trainer_, best_state, data, recipe, summary, out, val_loader
        )

    monkeypatch.setattr(trainer, "_test_once", test_once)
    summary = trainer.train(
        _recipe(), tmp_path / "run", data=wired, log=lambda *_: None
    )
    assert not Tripwire.reads, (
        f"the test set was read before the last epoch's choice: {Tripwire.reads[:5]}"
    )
    assert len(chosen) == 1 and "test_acc" not in chosen[0], (
        "the test set is evaluated once, after training"
    )
    history = summary["history"]
    # the first best epoch
    best = max(
        range(len(history)), key=lambda i: (history[i]["val_acc"], -i)
    )
    assert summary["best_epoch"] == history[best]["epoch"], (
        "the best epoch is the one with the best validation accuracy"
    )
    assert summary["best_val_acc"] == history[best]["val_acc"]
    assert 0.0 <= summary["test_acc"] <= 1.0


def test_sweeps_never_read_the_test_set(wired, tmp_path):
    budget = sweep.Budget("tiny", _recipe(2), train_images=None)
    out = sweep.ablation(
        budget,
        ch08.variants(budget),
        [0],
        only=["baseline", "schedule"],
        log=lambda *_: None,
        split=wired,
        root=tmp_path,
    )
    assert set(out["runs"]) == {"baseline", "schedule"}
    sweep.lr_range_test(_recipe(2), wired, steps=8)
    assert not Tripwire.reads, (
        f"a sweep read the test set: {Tripwire.reads[:5]}"
    )


def test_search_never_reads_the_test_set(wired, tmp_path):
    pytest.importorskip("optuna")
    budget = sweep.Budget("tiny", _recipe(2), train_images=None)
    sweep.search(
        budget,
        ch08.top(budget),
        ch08.SEARCH,
        2,
        None,
        log=lambda *_: None,
        split=wired,
        root=tmp_path,
        rerun_seeds=(),
    )
    assert not Tripwire.reads, (
        f"the search read the test set: {Tripwire.reads[:5]}"
    )


@pytest.mark.parametrize(
    "path",
    [
        "course_utils/training/sweep.py",
        "course_utils/experiments/sweep.py",
        "course_utils/training/evidence.py",
    ],
)
def test_selection_code_names_no_test_data(path):
    """The code that chooses (sweeps, search, the rules that read seeds) names no test split or test metric."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and not node.value.count(" ")
        ):
            names.add(node.value)
    bad = sorted(
        n
        for n in names
        if n in {"test_images", "test_labels", "test_loader", "_test_once"}
        or n.startswith("test_acc")
    )
    assert not bad, f"{path} names {bad}: selection reads validation only"


def test_the_one_test_reading_lives_apart_from_the_code_that_chooses():
    """The method's end is read on the test set by training.final_reading, which the code that chooses
    does not import (so no sweep, search or rule can reach the reading)."""
    reading = (ROOT / "course_utils/training/final_reading.py").read_text()
    assert "test_images" in reading, "the scan above would pass vacuously"
    for path in (
        "course_utils/training/sweep.py",
        "course_utils/training/evidence.py",
    ):
        assert "final_reading" not in (ROOT / path).read_text(), path


def test_the_tripwire_notices_a_read(wired):
    """The checks above can fail: any use of the test images while armed is recorded."""
    assert not Tripwire.reads
    cdata.BatchLoader(
        wired.test_images, wired.test_labels, 32, shuffle=False
    )
    next(
        iter(
            cdata.BatchLoader(
                wired.test_images, wired.test_labels, 32, shuffle=False
            )
        )
    )
    assert Tripwire.reads
