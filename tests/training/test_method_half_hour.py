"""Chapter 08's method at chapter 7's half hour: a budget in FLOPs, the method's steps, runs recorded
elsewhere not made twice, and the one test-set reading at the end."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from course_utils.experiments import sweep as ch08
from course_utils.experiments.recipes import RECIPES
from course_utils.training import data as cdata
from course_utils.training import final_reading, sweep
from course_utils.training.compute import epochs_for, flops_per_image
from course_utils.training.evaluation import evaluate
from course_utils.training.recipes import build_model


def test_every_step_of_the_half_hour_spends_the_cpu_recipes_flops():
    budget = ch08.BUDGETS["half_hour"]
    cpu = RECIPES["cpu"]
    images = sweep.CIFAR10_TRAIN - sweep.VAL_SIZE
    assert budget.images == images
    assert budget.flops == pytest.approx(
        cpu.epochs * images * flops_per_image(cpu)
    )
    table = ch08.variants(budget)
    # the method alone, in the order it is taught: the schedule before the regulariser and the bias
    assert (
        list(table)
        == [n for n, _, _ in ch08.METHOD_HALF_HOUR]
        == [
            "report",
            "report_schedule",
            "report_no_dropout",
            "report_conv_tokenizer",
        ]
    )
    previous = budget.base
    for name, (part, _, recipe) in table.items():
        assert part == "method"
        per_epoch = images * flops_per_image(recipe)
        # the nearest whole epoch: within half an epoch of the budget
        assert (
            abs(recipe.epochs * per_epoch - budget.flops) <= per_epoch / 2
        ), name
        assert recipe.clean_train_eval > 0 and recipe.test_shifts == ()
        changed = {
            k
            for k, v in recipe.to_dict().items()
            if v != previous.to_dict()[k]
        } - {"name", "epochs"}
        declared = next(o for n, _, o in ch08.METHOD_HALF_HOUR if n == name)
        if name != "report":
            assert changed == {k.split(".")[0] for k in declared}, name
        previous = recipe
    schedule = table["report_schedule"][2]
    assert schedule.schedule == "cosine" and schedule.warmup_epochs == 0
    assert table["report"][2].schedule == "constant"
    # a cheaper image buys more epochs in the same compute
    assert (
        table["report_conv_tokenizer"][2].epochs > table["report"][2].epochs
    )
    assert "TFLOP" in budget.about and "half hour" in budget.about
    with pytest.raises(ValueError, match="method only.*--budget"):
        ch08.top(budget)


def test_epochs_for_rounds_to_the_nearest_epoch_and_rejects_nonsense():
    assert epochs_for(10.0, 1.0, 3) == 3
    assert epochs_for(10.0, 1.0, 4) == 2
    assert epochs_for(1.0, 1.0, 100) == 1  # at least one epoch
    for bad in ((0, 1.0, 3), (10.0, 0, 3), (10.0, 1.0, 0)):
        with pytest.raises(ValueError, match="positive"):
            epochs_for(*bad)


@pytest.fixture(scope="module")
def tiny_flops():
    """A budget of three epochs' FLOPs of the smoke model on synthetic images, with two method steps:
    a wider model (more FLOPs an image: fewer epochs) and back."""
    base = dataclasses.replace(
        RECIPES["smoke"],
        name="tiny",
        epochs=99,  # not used: the FLOPs set the epochs
        batch_size=64,
        schedule="constant",
        augment=False,
        warmup_epochs=0,
        clean_train_eval=100,
    )
    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=640, n_test=64), val_size=128
    )
    images = len(split.train_images)
    budget = sweep.Budget(
        "tiny",
        base,
        train_images=images,
        flops=3 * images * flops_per_image(base),
        flops_about="three epochs of the smoke model",
    )
    method = [
        ("start", "the smoke model", {}),
        ("wide", "four times as wide", {"model_kwargs.dim": 128}),
    ]
    return budget, split, sweep.variants(budget, [], [], method)


def test_a_flop_budget_sets_each_steps_epochs(tiny_flops):
    budget, _, table = tiny_flops
    assert table["start"][2].epochs == 3
    assert table["wide"][2].epochs == epochs_for(
        budget.flops, flops_per_image(table["wide"][2]), budget.images
    )
    assert table["wide"][2].epochs < 3


def test_recorded_runs_are_not_made_again_and_the_test_is_read_once(
    tiny_flops, tmp_path, monkeypatch
):
    budget, split, table = tiny_flops
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    logs: list[str] = []
    out = sweep.ablation(
        budget,
        table,
        [0],
        result="t_method",
        split=split,
        root=tmp_path / "a",
        log=logs.append,
    )
    record = out["runs"]["start"]["0"]
    assert len(record["history"]) == 3 and "test_acc" not in json.dumps(out)
    # the diagnosis can read the training images as they are
    assert 0 <= record["final_clean_train_acc"] <= 1
    assert all("clean_train_acc" in h for h in record["history"])

    # Another checkout (runs/ is not committed): the recorded runs are kept and not trained again.
    logs.clear()
    sweep.ablation(
        budget,
        table,
        [0],
        result="t_method",
        split=split,
        root=tmp_path / "b",
        log=logs.append,
    )
    assert (
        sum("recorded in results/t_method.json" in line for line in logs)
        == 2
    )
    assert not (tmp_path / "b" / "tiny" / "start" / "seed0").exists()
    # ... unless the step has changed since: then it is another variant's run, and this one trains
    changed = {
        **table,
        "start": (
            *table["start"][:2],
            dataclasses.replace(table["start"][2], lr=1e-3),
        ),
    }
    logs.clear()
    sweep.ablation(
        budget,
        changed,
        [0],
        only=["start"],
        result="t_method",
        split=split,
        root=tmp_path / "b",
        log=logs.append,
    )
    assert (
        tmp_path / "b" / "tiny" / "start" / "seed0" / "summary.json"
    ).exists()

    # The test set, read once, with the best-validation weights the checkpoint kept.
    with pytest.raises(
        FileNotFoundError, match=r"seed\(s\) \[1\].*--only wide --seeds 1"
    ):
        final_reading.read_test_once(
            budget,
            table,
            "wide",
            [1],
            "t_test",
            root=tmp_path / "a",
            split=split,
        )
    read = final_reading.read_test_once(
        budget,
        table,
        "wide",
        [0],
        "t_test",
        root=tmp_path / "a",
        split=split,
        log=lambda *_: None,
    )
    run = read["runs"]["0"]
    wide = out["runs"]["wide"]["0"]
    assert run["best_val_acc"] == wide["best_val_acc"]
    assert (
        0 <= run["test_acc_single_view"] <= 1
        and 0 <= run["test_acc_two_views"] <= 1
    )
    assert run["train_flops"] == pytest.approx(
        run["flops_per_image"] * len(split.train_images) * run["epochs"]
    )
    ckpt = torch.load(
        tmp_path / "a" / "tiny" / "wide" / "seed0" / "checkpoint.pt",
        map_location="cpu",
        weights_only=False,
    )
    model = build_model(table["wide"][2])
    model.load_state_dict(ckpt["best_state"])
    val = cdata.BatchLoader(split.val_images, split.val_labels, 64)
    assert evaluate(model, val, None)["acc"] == pytest.approx(
        wide["best_val_acc"]
    )
    test = cdata.BatchLoader(split.test_images, split.test_labels, 64)
    assert evaluate(model, test, None)["acc"] == pytest.approx(
        run["test_acc_single_view"]
    )
    with pytest.raises(FileExistsError, match="read once"):
        final_reading.read_test_once(
            budget,
            table,
            "wide",
            [0],
            "t_test",
            root=tmp_path / "a",
            split=split,
        )


def test_a_window_makes_the_runs_that_fit_and_the_next_one_the_rest(
    tiny_flops, tmp_path, monkeypatch
):
    """``gpu_method.make_runs`` on a clock that moves 100 s a run: it starts a run only when the runs
    so far say it ends in time, records each as it finishes, and reads the test once at the end."""
    from course_utils.experiments import gpu_method

    budget, split, table = tiny_flops
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    monkeypatch.setattr(gpu_method, "RESULTS_DIR", tmp_path / "results")
    clock = [0.0]
    monkeypatch.setattr(gpu_method.time, "time", lambda: clock[0])
    real = gpu_method.sweep.ablation

    def ablation(*args, **kw):
        clock[0] += 100.0
        return real(*args, **kw)

    monkeypatch.setattr(gpu_method.sweep, "ablation", ablation)
    kw = dict(
        result="t_half",
        test_result="t_half_test",
        seeds=(0,),
        root=tmp_path / "runs",
        split=split,
        out_dir=tmp_path / "out",
        log=lambda *_: None,
    )
    first = gpu_method.make_runs(
        budget, table, gpu_method.RESERVE_S + 150.0, **kw
    )
    # the first run fits; the second, expected to take about as long, would not
    assert first == {
        "made": [("start", 0)],
        "left": [("wide", 0)],
        "test_read": False,
    }
    brought = json.loads(
        (tmp_path / "out" / "results" / "t_half.json").read_text()
    )
    assert list(brought["data"]["runs"]) == ["start"]
    second = gpu_method.make_runs(budget, table, clock[0] + 1e6, **kw)
    assert second == {"made": [("wide", 0)], "left": [], "test_read": True}
    tested = json.loads(
        (tmp_path / "out" / "results" / "t_half_test.json").read_text()
    )
    assert tested["data"]["variant"] == "wide"
    # nothing is made twice, and the test is not read again
    third = gpu_method.make_runs(budget, table, clock[0] + 1e6, **kw)
    assert third == {"made": [], "left": [], "test_read": False}
