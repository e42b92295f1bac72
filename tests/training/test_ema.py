"""A recipe that keeps a moving average of its weights (``ema_decay``): the average follows the
recurrence it names, BatchNorm's statistics with it; validation, the best epoch and the stored
weights are the average's; a killed run resumes to the same end; a decay that is not one is refused."""

from __future__ import annotations

import dataclasses

import pytest

# CPU-heavy: keep the runs on one worker
pytestmark = pytest.mark.xdist_group("train")


def test_the_average_follows_its_recurrence_buffers_included():
    """average_1 = weights_1 (the first step copies), then average = d * average + (1 - d) * weights
    after every step, for the parameters and for BatchNorm's running mean alike."""
    import torch
    from torch import nn

    from course_utils.training.trainer import Trainer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    trainer = Trainer(
        model, torch.optim.SGD(model.parameters(), lr=0.1), ema_decay=0.75
    )
    assert trainer.evaluated is trainer.ema.module
    expected = None
    for _ in range(4):
        loss = model(torch.randn(8, 3)).square().mean()
        trainer.update(loss)
        now = [t.detach().clone() for t in model.state_dict().values()]
        expected = (
            now
            if expected is None
            else [
                0.75 * e + 0.25 * n if n.is_floating_point() else n
                for e, n in zip(expected, now)
            ]
        )
    averaged = trainer.evaluated.state_dict()
    for (name, value), want in zip(averaged.items(), expected):
        if value.is_floating_point():
            torch.testing.assert_close(value, want, msg=name)
    # the average is not the weights: the test above would pass for a copy otherwise
    assert not torch.equal(averaged["0.weight"], model[0].weight)
    assert not torch.equal(averaged["1.running_mean"], model[1].running_mean)


def test_without_a_decay_the_trained_weights_are_measured():
    import torch
    from torch import nn

    from course_utils.training.trainer import Trainer

    model = nn.Linear(2, 2)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert trainer.ema is None and trainer.evaluated is model


def _metrics(summary: dict) -> list[tuple]:
    return [
        (h["epoch"], round(h["train_loss"], 6), h["val_acc"], h["val_loss"])
        for h in summary["history"]
    ]


def test_a_run_measures_and_keeps_the_average_and_resumes_it(
    tmp_path, split, monkeypatch
):
    """Validation reads the average (the evaluated network is ``trainer.ema.module``), the best
    epoch's weights are the average's (they are what ``best_model.pt`` holds and the test reads), the
    summary adds the trained weights' last validation, and a run stopped after 2 of 3 epochs ends
    exactly where the uninterrupted one does (the checkpoint holds the average)."""
    import torch

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training import trainer

    measured = []
    real_evaluate = trainer.evaluate

    def spy(model, *args, **kwargs):
        measured.append(model)
        return real_evaluate(model, *args, **kwargs)

    monkeypatch.setattr(trainer, "evaluate", spy)
    recipe = dataclasses.replace(RECIPES["smoke"], ema_decay=0.9)
    quiet = dict(data=split, log=lambda *_: None)
    whole = trainer.train(recipe, tmp_path / "whole", **quiet)
    assert len(whole["history"]) == 3
    # per epoch one network, the average; after the last, the trained weights once, another
    assert len(measured) == 4
    assert len({id(m) for m in measured[:3]}) == 1
    assert measured[3] is not measured[0]
    assert type(measured[3]) is type(measured[0])
    best = torch.load(
        tmp_path / "whole" / "best_model.pt", weights_only=True
    )
    ckpt = torch.load(
        tmp_path / "whole" / "checkpoint.pt", weights_only=False
    )
    # one update per optimiser step: 3 epochs of whole batches
    assert ckpt["ema"]["n_averaged"] == 3 * (
        len(split.train_images) // recipe.batch_size
    )
    if whole["best_epoch"] == 3:
        # the last epoch's average is the checkpoint's, and it is what the best weights hold
        for name, value in best.items():
            torch.testing.assert_close(
                value, ckpt["ema"][f"module.{name}"], msg=name
            )
    assert any(
        not torch.equal(value, ckpt["model"][name])
        for name, value in best.items()
        if value.is_floating_point()
    ), "the stored weights are the trained ones, not the average"
    assert 0.0 <= whole["val_acc_last_epoch_trained_weights"] <= 1.0

    stopped = trainer.train(
        recipe,
        tmp_path / "split",
        max_epochs_this_call=2,
        evaluate_test=False,
        **quiet,
    )
    assert stopped["epochs_done"] == 2
    resumed = trainer.train(recipe, tmp_path / "split", **quiet)
    assert _metrics(resumed) == _metrics(whole)
    assert resumed["test_acc"] == whole["test_acc"]


def test_the_average_changes_what_validation_reads(tmp_path, split):
    """The same run with and without the average: the same training (the average does not touch the
    weights being trained), different validation readings."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training import trainer

    quiet = dict(data=split, evaluate_test=False, log=lambda *_: None)
    plain = trainer.train(RECIPES["smoke"], tmp_path / "plain", **quiet)
    averaged = trainer.train(
        dataclasses.replace(RECIPES["smoke"], ema_decay=0.9),
        tmp_path / "ema",
        **quiet,
    )
    assert [h["train_loss"] for h in averaged["history"]] == [
        h["train_loss"] for h in plain["history"]
    ]
    assert [h["val_loss"] for h in averaged["history"]] != [
        h["val_loss"] for h in plain["history"]
    ]


@pytest.mark.parametrize("decay", [0.0, 1.0, 1, 1.5, "0.999", True])
def test_a_decay_that_is_not_a_share_is_refused_with_the_fix(decay):
    from course_utils.experiments.recipes import RECIPES

    with pytest.raises(ValueError, match="ema_decay=0.999"):
        dataclasses.replace(RECIPES["smoke"], ema_decay=decay)
