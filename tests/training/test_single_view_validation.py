"""The per-epoch validation reads one view beside the recipe's views: a single-view goal is then
chosen on the quantity it names, from the same forward passes."""

from __future__ import annotations

import dataclasses

from course_utils.experiments.cpu_recipe import seed_row
from course_utils.experiments.recipes import RECIPES
from course_utils.training import trainer


def test_each_epoch_records_one_view_beside_the_mirrored_pair(
    tmp_path, split
):
    recipe = dataclasses.replace(RECIPES["smoke"], eval_flip=True, epochs=2)
    run = trainer.train(
        recipe, tmp_path / "flip", data=split, log=lambda *_: None
    )
    history = run["history"]
    assert all(0.0 <= h["val_acc_single_view"] <= 1.0 for h in history)
    best = history[run["best_epoch"] - 1]
    assert run["best_val_acc_single_view"] == best["val_acc_single_view"]
    # the chosen weights on one test view, and the table's row carries the validation's one view
    assert 0.0 <= run["test_acc_single_view"] <= 1.0
    row = seed_row(run)
    assert row["best_val_acc_single_view"] == best["val_acc_single_view"]


def test_a_one_view_validation_records_nothing_more(tmp_path, split):
    recipe = dataclasses.replace(RECIPES["smoke"], eval_flip=False, epochs=1)
    run = trainer.train(
        recipe, tmp_path / "plain", data=split, log=lambda *_: None
    )
    assert "val_acc_single_view" not in run["history"][0]
    assert "best_val_acc_single_view" not in run
    assert seed_row(run)["best_val_acc_single_view"] is None
