"""A recipe with a time budget (``budget_s``): the epoch count is decided after the first epoch,
the schedule ends where the count ends, a killed run resumes to the same end, and the share of the
budget the plan fills keeps the course's stored half-hour runs inside their half hour."""

from __future__ import annotations

import dataclasses
import json
from statistics import fmean

import pytest

from tests.helpers import ROOT

# CPU-heavy: keep the runs on one worker
pytestmark = pytest.mark.xdist_group("train")


def test_planned_epochs_fill_the_share_of_the_budget_between_one_and_the_cap():
    from course_utils.training.trainer import BUDGET_SHARE, planned_epochs

    # 60 s epochs in the share of half an hour, whole ones only
    assert planned_epochs(1800, 60, 100) == int(BUDGET_SHARE * 1800 // 60)
    assert planned_epochs(1800, 60, 5) == 5  # the recipe's epochs are a cap
    assert planned_epochs(1800, 5000, 30) == 1  # the epoch already done
    assert planned_epochs(1800, 1800 * BUDGET_SHARE / 7.5, 30) == 7


def test_the_budget_share_keeps_every_stored_half_hour_run_inside_its_half_hour():
    """Planned from its own first epoch (training and validation), each stored CPU run of the
    half-hour recipes, at its own mean epoch time, ends inside the half hour: the first epoch is not
    always the slowest, and the share leaves room for the epochs that ran slower."""
    from course_utils.training.recipes import from_stored
    from course_utils.training.trainer import (
        planned_epochs,
        progressive_share,
    )

    runs = sorted((ROOT / "results").glob("ch07_vit_cpu*.json"))
    checked = 0
    for path in runs:
        if path.name.endswith("_model.json"):
            continue
        data = json.loads(path.read_text())["data"]
        history = data.get("history") or []
        if data.get("fast") or len(history) < 5:
            continue
        recipe = from_stored(data["recipe"])
        first = history[0]["elapsed_s"]
        if not recipe.progressive:
            mean = fmean(h["epoch_time_s"] for h in history)
            epochs = planned_epochs(1800, first, 10**6)
            assert epochs * mean <= 1800, (
                f"{path.name}: {epochs} epochs planned from a {first:.1f} s first epoch take "
                f"{epochs * mean:.0f} s at its mean {mean:.1f} s an epoch"
            )
            checked += 1
            continue
        # progressively resized: the plan from the first (small-image) epoch, at the mean time the
        # run measured for an epoch of each size
        done = len(history)
        size = [recipe.train_size(e, done) for e in range(done)]
        mean_at = {
            side: fmean(
                h["epoch_time_s"] for h, s in zip(history, size) if s == side
            )
            for side in set(size)
        }
        train_s = data["train_images"] / history[0]["train_images_per_s"]
        share = progressive_share(
            dataclasses.replace(recipe, epochs=10**4), train_s, first
        )
        epochs = planned_epochs(1800, first, 10**4, share)
        took = sum(
            mean_at[recipe.train_size(e, epochs)] for e in range(epochs)
        )
        assert took <= 1800, (
            f"{path.name}: {epochs} epochs planned from a {first:.1f} s first epoch take "
            f"{took:.0f} s at its mean epoch times by size {mean_at}"
        )
        checked += 1
    assert checked >= 10, f"only {checked} stored half-hour runs found"


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(budget_s=0), "above 0"),
        (dict(budget_s="half an hour"), "number of seconds"),
        (dict(budget_s=1800, warmup_epochs=0.5), "warmup_epochs >= 1"),
    ],
)
def test_a_budget_the_trainer_cannot_plan_is_refused_with_the_fix(
    fields, message
):
    from course_utils.experiments.recipes import RECIPES

    with pytest.raises(ValueError, match=message):
        dataclasses.replace(RECIPES["smoke"], **fields)


def _metrics(summary: dict) -> list[tuple]:
    return [
        (h["epoch"], round(h["train_loss"], 6), h["val_acc"], h["lr"])
        for h in summary["history"]
    ]


def test_a_budgeted_run_plans_after_its_first_epoch_and_a_resumed_one_ends_alike(
    tmp_path, split, monkeypatch
):
    """The plan (here 3 of at most 6 epochs) is made once, from the first epoch's training time;
    the linear decay then reaches zero at the planned end, and a run stopped after 2 epochs and run
    again reads the plan from its checkpoint and ends exactly where the uninterrupted run ends."""
    import torch

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training import trainer

    calls = []

    def plan(budget_s, first_epoch_s, cap):
        calls.append((budget_s, first_epoch_s, cap))
        return 3

    monkeypatch.setattr(trainer, "planned_epochs", plan)
    recipe = dataclasses.replace(
        RECIPES["smoke"],
        epochs=6,
        warmup_epochs=1,
        schedule="linear",
        budget_s=1800,
    )
    quiet = dict(data=split, evaluate_test=False, log=lambda *_: None)
    whole = trainer.train(recipe, tmp_path / "whole", **quiet)
    assert len(calls) == 1
    budget, first, cap = calls[0]
    assert (budget, cap) == (1800, 6) and 0 < first == pytest.approx(
        whole["history"][0]["elapsed_s"], abs=0.01
    )
    assert whole["epochs"] == whole["epochs_done"] == 3
    assert len(whole["history"]) == 3
    # the schedule ends with the plan, not at the cap
    assert whole["history"][-1]["lr"] == 0.0
    assert whole["history"][1]["lr"] > 0.0

    calls.clear()
    stopped = trainer.train(
        recipe, tmp_path / "split", max_epochs_this_call=2, **quiet
    )
    assert stopped["epochs_done"] == 2 and len(calls) == 1
    ckpt = torch.load(
        tmp_path / "split" / "checkpoint.pt", weights_only=False
    )
    assert ckpt["planned_epochs"] == 3
    resumed = trainer.train(recipe, tmp_path / "split", **quiet)
    assert len(calls) == 1, "a resumed run keeps its plan"
    assert _metrics(resumed) == _metrics(whole)


def test_fast_mode_ignores_the_budget(tmp_path, split, monkeypatch):
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training import trainer

    monkeypatch.setattr(
        trainer,
        "planned_epochs",
        lambda *a: pytest.fail("fast mode planned epochs"),
    )
    recipe = dataclasses.replace(
        RECIPES["smoke"], budget_s=1800, warmup_epochs=1
    )
    summary = trainer.train(
        recipe,
        tmp_path / "fast",
        fast=True,
        data=split,
        evaluate_test=False,
        log=lambda *_: None,
    )
    assert summary["epochs_done"] == recipe.fast_epochs


def test_a_progressive_plan_counts_the_small_epochs_at_their_flops():
    """With progressive resizing the plan prices each epoch by its image size: the first epoch's
    training seconds scaled by the FLOPs per image, its validation seconds as they were; the cheap
    small epochs buy more epochs than a plan that priced them all like the first would."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image
    from course_utils.training.trainer import (
        BUDGET_SHARE,
        planned_epochs,
        progressive_share,
    )

    recipe = dataclasses.replace(RECIPES["cpu_stem122_prog"], epochs=60)
    ratio = flops_per_image(recipe) / flops_per_image(recipe, side=24)
    share = progressive_share(recipe, train_s=40.0, first_epoch_s=45.0)
    assert share(0, 30) == pytest.approx(1.0)
    assert share(29, 30) == pytest.approx((40.0 * ratio + 5.0) / 45.0)
    epochs = planned_epochs(1800, 45.0, 60, share)

    def total(n: int) -> float:
        small = -(-n // 2)  # the epochs below half of the count
        return small * 45.0 + (n - small) * (40.0 * ratio + 5.0)

    assert 1 < epochs < 60
    assert total(epochs) <= BUDGET_SHARE * 1800 < total(epochs + 1)
    # a full-size epoch costs more than the first: fewer epochs than all-like-the-first
    assert epochs < planned_epochs(1800, 45.0, 60)
    assert planned_epochs(1800, 45.0, 5, share) == 5
    assert planned_epochs(1800, 5000.0, 60, share) == 1
