"""Chapter 08's machinery and its tables: schedules in the trainer, the curve diagnosis, resumable
sweeps (training.sweep) and the ladder, levers and budgets they run (experiments.sweep)."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest
import torch

from course_utils.experiments import sweep as ch08
from course_utils.experiments.recipes import RECIPES
from course_utils.references.diagnosis import diagnose_curves
from course_utils.references.schedules import noam_lr, warmup_cosine_lr
from course_utils.training import data as cdata
from course_utils.training import sweep
from course_utils.training.optim import lr_factor
from course_utils.training.recipes import Scale, apply_overrides


def test_lr_factor_schedules_follow_the_references():
    cosine = lr_factor("cosine", 100, 10)
    assert [cosine(s) for s in (0, 5, 10, 100)] == [
        warmup_cosine_lr(s, 100, 10, 1.0) for s in (0, 5, 10, 100)
    ]
    noam = lr_factor("noam", 100, 10)
    # the Transformer paper's shape, rescaled to peak at 1 at the end of the warmup (step index 9 = step 10)
    assert math.isclose(noam(9), 1.0)
    assert math.isclose(
        noam(39) / noam(9), noam_lr(40, 64, 10) / noam_lr(10, 64, 10)
    )
    assert noam(0) < noam(5) < noam(9) > noam(50)
    constant = lr_factor("constant", 100, 4)
    # the warm-up of warmup_cosine_lr
    assert [constant(s) for s in (0, 2, 4, 50)] == [
        0.0,
        0.5,
        1.0,
        1.0,
    ]
    assert lr_factor("constant", 100, 0)(0) == 1.0
    linear = lr_factor("linear", 100, 10)
    # the same warm-up, then a straight line from 1 at step 10 to 0 at step 100
    assert [linear(s) for s in (0, 5, 10, 55, 100, 120)] == pytest.approx(
        [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    )
    # below the cosine early on, above it in the tail
    assert linear(30) < cosine(30) and linear(80) > cosine(80)
    with pytest.raises(ValueError, match="must exceed warmup_steps"):
        lr_factor("linear", 10, 10)
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_factor("step", 100, 0)


def _h(*rows):
    return [
        dict(train_loss=a, train_acc=b, val_loss=c, val_acc=d)
        for a, b, c, d in rows
    ]


# validation loss rose 80 %
# gap 0.19
# augmentation: val above train
@pytest.mark.parametrize(
    "history, expected",
    [
        (
            _h((1.0, 0.7, 0.5, 0.7), (0.2, 0.9, 0.9, 0.85)),
            "over-fitting",
        ),
        (
            _h((1.0, 0.7, 0.9, 0.7), (0.2, 0.99, 0.8, 0.80)),
            "over-fitting",
        ),
        (_h((2.0, 0.3, 2.0, 0.3), (1.8, 0.4, 1.7, 0.42)), "under-fitting"),
        (
            _h((1.0, 0.6, 0.9, 0.8), (0.8, 0.72, 0.7, 0.88)),
            "good fit",
        ),
    ],
)
def test_diagnose_curves(history, expected):
    assert diagnose_curves(history) == expected


def test_diagnose_curves_rejects_an_empty_history():
    with pytest.raises(ValueError, match="empty"):
        diagnose_curves([])


def test_one_override_path_for_the_command_line_and_the_tables():
    """``--set`` strings and an experiment's dict of changes go through one function, with one meaning:
    ``FIELD.KEY`` changes one key of a dict field, a whole dict replaces it, ``Scale`` multiplies."""
    base = RECIPES["smoke"]
    from_cli = apply_overrides(
        base, ["lr=0.006", "model_kwargs.dim=48", "schedule=noam"]
    )
    from_table = apply_overrides(
        base, {"lr": Scale(2), "model_kwargs.dim": 48, "schedule": "noam"}
    )
    assert from_cli == from_table and from_cli.name == base.name
    assert (
        from_cli.model_kwargs == {**base.model_kwargs, "dim": 48}
        and base.model_kwargs["dim"] == 32
    )
    assert apply_overrides(
        base, {"model_kwargs": {"dim": 48}}
    ).model_kwargs == {"dim": 48}
    # an int where a float is expected
    assert apply_overrides(base, {"warmup_epochs": 1}).warmup_epochs == 1.0
    assert apply_overrides(base, {}, name="renamed").name == "renamed"
    for bad, says in [
        ({"epochs": 2.5}, "expects int"),
        ({"nope": 1}, "no such field"),
        (["lr.x=1"], "not a dict"),
        ({"policy": "trivialaugment"}, "not a choice"),
    ]:
        with pytest.raises(ValueError, match=says):
            apply_overrides(base, bad)


def _fields(overrides: dict) -> set[str]:
    """The recipe fields a table's overrides change (``model_kwargs.dim`` changes ``model_kwargs``)."""
    return {key.split(".")[0] for key in overrides}


def test_every_variant_is_one_change_on_top_of_its_reference():
    table = ch08.variants(ch08.BUDGETS["mini"])
    names = list(table)
    assert names[: len(ch08.LADDER)] == [n for n, _, _ in ch08.LADDER]
    ladder = [table[n][2].to_dict() for n, _, _ in ch08.LADDER]
    for (name, _, overrides), before, after in zip(
        ch08.LADDER[1:], ladder, ladder[1:]
    ):
        changed = {k for k in after if after[k] != before[k]} - {"name"}
        assert changed == _fields(overrides), (
            f"ladder step {name} changes {changed}, declares {set(overrides)}"
        )
    assert ch08.top(ch08.BUDGETS["mini"]).to_dict() == ladder[-1]
    top = ladder[-1]
    assert (
        top["augment"]
        and top["schedule"] == "cosine"
        and top["label_smoothing"] == 0.1
    )
    lr_x2 = table["lr_x2"][2]
    assert (
        lr_x2.lr == 2 * top["lr"] and lr_x2.batch_size == top["batch_size"]
    )
    assert table["dropout"][2].model_kwargs == {
        **top["model_kwargs"],
        "dropout": 0.1,
    }
    assert table["lr_range_test"][2].lr == pytest.approx(top["lr"] / 10)
    # The method's steps: each one change on top of the previous, starting from the budget's base.
    method = [ch08.BUDGETS["mini"].base.to_dict()] + [
        table[n][2].to_dict() for n, _, _ in ch08.METHOD
    ]
    for (name, _, overrides), before, after in zip(
        ch08.METHOD, method, method[1:]
    ):
        changed = {k for k in after if after[k] != before[k]} - {"name"}
        assert changed == _fields(overrides), (
            f"method step {name} changes {changed}, declares {set(overrides)}"
        )
        assert table[name][0] == "method"
    report = table["report"][2]
    # the lab report's Figure 9 (its code's constants) and its code's augmentation and schedule
    figure_9 = dict(
        patch_size=4,
        dim=192,
        depth=6,
        num_heads=3,
        mlp_dim=4 * 192,
        dropout=0.2,
    )
    assert {k: report.model_kwargs[k] for k in figure_9} == figure_9
    assert (
        report.batch_size,
        report.lr,
        report.weight_decay,
        report.optimizer,
    ) == (128, 1e-3, 1e-3, "adamw")
    assert (
        report.augment
        and report.policy == "report"
        and report.schedule == "constant"
    )
    assert report.grad_clip is None and report.label_smoothing == 0.0
    # the report's plain Conv2d patch embedding
    assert "stem_channels" not in report.model_kwargs


def _ablation(budget, seeds, **kw):
    """The mechanism's ablation over chapter 08's variants at ``budget``."""
    return sweep.ablation(budget, ch08.variants(budget), seeds, **kw)


def _search(budget, trials, result, **kw):
    """The mechanism's search over chapter 08's space, from the ladder's top at ``budget``."""
    return sweep.search(
        budget, ch08.top(budget), ch08.SEARCH, trials, result, **kw
    )


@pytest.fixture(scope="module")
def tiny():
    """A seconds-per-run budget on synthetic images."""
    base = dataclasses.replace(
        RECIPES["smoke"],
        name="tiny",
        epochs=2,
        batch_size=64,
        schedule="constant",
        augment=False,
        label_smoothing=0.0,
        weight_decay=0.0,
        warmup_epochs=0,
    )
    budget = sweep.Budget("tiny", base, train_images=None)
    split = cdata.split_validation(
        cdata.synthetic_cifar(n_train=640, n_test=64), val_size=128
    )
    return budget, split


def test_ablation_runs_resumes_and_records(tiny, tmp_path, monkeypatch):
    budget, split = tiny
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    logs: list[str] = []
    out = _ablation(
        budget,
        [0],
        only=["baseline", "schedule"],
        result="t_ablation",
        log=logs.append,
        split=split,
        root=tmp_path,
    )
    assert out["order"] == ["baseline", "schedule"]
    record = out["runs"]["schedule"]["0"]
    assert (
        record["recipe"]["schedule"] == "cosine"
        and len(record["history"]) == 2
    )
    # the test set is not used
    assert 0.0 <= record[
        "best_val_acc"
    ] <= 1.0 and "test_acc" not in json.dumps(record)
    saved = json.loads(
        (tmp_path / "results" / "t_ablation.json").read_text()
    )
    assert (
        saved["data"]["order"] == ["baseline", "schedule"]
        and saved["provenance"]["dataset"] == split.source
    )
    # A second call trains nothing: finished runs are read back.
    logs.clear()
    again = _ablation(
        budget,
        [0],
        only=["baseline", "schedule"],
        log=logs.append,
        split=split,
        root=tmp_path,
    )
    assert not any(line.startswith("==") for line in logs), logs
    assert again["runs"]["baseline"] == out["runs"]["baseline"]
    with pytest.raises(ValueError, match="unknown variants"):
        _ablation(
            budget, [0], only=["no_such_lever"], split=split, root=tmp_path
        )


def test_search_prunes_and_continues(tiny, tmp_path, monkeypatch):
    pytest.importorskip("optuna")
    budget, split = tiny
    budget = dataclasses.replace(
        budget, base=dataclasses.replace(budget.base, epochs=3)
    )
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    first = _search(
        budget,
        2,
        None,
        log=lambda *_: None,
        split=split,
        root=tmp_path,
        rerun_seeds=(),
    )
    assert len(first["trials"]) == 2
    logs: list[str] = []
    second = _search(
        budget,
        4,
        "t_search",
        log=logs.append,
        split=split,
        root=tmp_path,
        rerun_seeds=(1, 2),
    )
    # two more, not four: the study resumed from its SQLite file
    assert len(second["trials"]) == 4
    assert [t["params"] for t in second["trials"][:2]] == [
        t["params"] for t in first["trials"]
    ]
    assert second["epochs_spent"] <= second["epochs_without_pruning"]
    assert {t["state"] for t in second["trials"]} <= {"COMPLETE", "PRUNED"}
    # The first rung is never inside the warm-up of the recipe searched (the ladder's top), and
    # pruned trials stopped exactly there.
    top = ch08.top(budget)
    assert (
        top.warmup_epochs > 0
        and second["first_rung"] >= math.ceil(top.warmup_epochs) + 1
    )
    for t in second["trials"]:
        if t["state"] == "PRUNED":
            assert len(t["val_acc_by_epoch"]) == second["first_rung"], t
    # The winner is trained again with fresh seeds, unpruned, and a second call reads those runs back.
    best = second["best"]
    assert set(best["reruns"]) == {"1", "2"} and all(
        0 <= v <= 1 for v in best["reruns"].values()
    )
    assert sum(line.startswith("== the best trial") for line in logs) == 2
    logs.clear()
    third = _search(
        budget,
        4,
        None,
        log=logs.append,
        split=split,
        root=tmp_path,
        rerun_seeds=(1, 2),
    )
    assert third["best"]["reruns"] == best["reruns"] and not logs


def test_lr_range_test_finds_a_minimum_and_stops(tiny):
    budget, split = tiny
    out = sweep.lr_range_test(
        dataclasses.replace(budget.base, amp="none"),
        split,
        steps=60,
        max_lr=10.0,
    )
    assert len(out["lr"]) == len(out["loss"]) <= 60
    assert out["lr"] == sorted(out["lr"]) and out[
        "suggested_lr"
    ] == pytest.approx(out["lr_at_min_loss"] / 10)
    # a blow-up ends the test early
    assert (
        torch.tensor(out["smoothed"]).isfinite().all() or len(out["lr"]) < 60
    )


def test_cpu_ladder_ends_at_the_cpu_recipe_as_its_runs_were_made():
    """The cpu ablation's top is the cpu recipe at the 22 epochs, batch size, learning rate and
    single-view evaluation its stored runs were made with (chapter 07's run of that version is adopted
    there, see sweep.adopt), without the test's shifted views (the ablation reads validation only);
    nothing else differs, so the ablation still takes the chapter-07 recipe apart."""
    top = ch08.variants(ch08.BUDGETS["cpu"])["conv_tokenizer"][2].to_dict()
    recipe = RECIPES["cpu"].to_dict()
    normal = lambda d: {  # noqa: E731
        k: v for k, v in json.loads(json.dumps(d)).items() if k != "name"
    }
    ours, theirs = normal(top), normal(recipe)
    assert {k for k in ours if ours[k] != theirs[k]} == {
        "epochs",
        "eval_flip",
        "test_shifts",
        "batch_size",
        "lr",
    }
    assert (
        ours["epochs"] == 22
        and ours["eval_flip"] is False
        and ours["test_shifts"] == []
    )
    assert (ours["batch_size"], ours["lr"]) == (128, 2e-3)


def test_adopt_takes_a_run_with_the_same_recipe_only(
    tiny, tmp_path, monkeypatch
):
    budget, split = tiny
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    made = _ablation(
        budget,
        [0],
        only=["baseline"],
        log=lambda *_: None,
        split=split,
        root=tmp_path / "a",
    )
    source = tmp_path / "a" / "tiny" / "baseline" / "seed0"
    logs: list[str] = []
    out = _ablation(
        budget,
        [0],
        only=["baseline"],
        log=logs.append,
        split=split,
        root=tmp_path / "b",
        adopted={"baseline": source},
    )
    assert not any("(seed 0): the lab" in line for line in logs), (
        "adopted, so nothing may train"
    )
    record = out["runs"]["baseline"]["0"]
    assert record["adopted_from"] == str(source)
    assert record["history"] == made["runs"]["baseline"]["0"]["history"]
    with pytest.raises(
        ValueError, match=r"differs in \['schedule', 'warmup_epochs'\]"
    ):
        _ablation(
            budget,
            [0],
            only=["schedule"],
            log=lambda *_: None,
            split=split,
            root=tmp_path / "c",
            adopted={"schedule": source},
        )
    with pytest.raises(FileNotFoundError, match="no summary.json"):
        sweep.adopt(budget.base, tmp_path / "nowhere", tmp_path / "d")
    # a run made before the recipe had a field trained with that field's default: it still matches
    summary = json.loads((source / "summary.json").read_text())
    older = tmp_path / "older"
    older.mkdir()
    (older / "summary.json").write_text(
        json.dumps(
            {
                **summary,
                "recipe": {
                    k: v
                    for k, v in summary["recipe"].items()
                    if k != "test_shifts"
                },
            }
        )
    )
    sweep.adopt(ch08.variants(budget)["baseline"][2], older, tmp_path / "e")
    (older / "summary.json").write_text(
        json.dumps({**summary, "recipe": {**summary["recipe"], "gone": 1}})
    )
    with pytest.raises(
        ValueError,
        match=r"cannot adopt .*has fields Recipe lacks: \['gone'\]",
    ):
        sweep.adopt(
            ch08.variants(budget)["baseline"][2], older, tmp_path / "f"
        )


def test_collect_keeps_recorded_runs_whose_directories_are_gone(
    tiny, tmp_path, monkeypatch
):
    """A fresh clone has results/ but not runs/: adding a run must not drop the recorded ones."""
    budget, split = tiny
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    first = _ablation(
        budget,
        [0],
        only=["baseline"],
        result="t_keep",
        log=lambda *_: None,
        split=split,
        root=tmp_path / "clone1",
    )
    logs: list[str] = []
    # another checkout: no runs/ from the first
    second = _ablation(
        budget,
        [1],
        only=["baseline"],
        result="t_keep",
        log=logs.append,
        split=split,
        root=tmp_path / "clone2",
    )
    assert sorted(second["runs"]["baseline"]) == ["0", "1"]
    assert second["runs"]["baseline"]["0"] == first["runs"]["baseline"]["0"]
    assert any("kept from results/t_keep.json" in line for line in logs), (
        logs
    )
    saved = json.loads((tmp_path / "results" / "t_keep.json").read_text())
    assert sorted(saved["data"]["runs"]["baseline"]) == ["0", "1"]
    other = dataclasses.replace(budget, name="other")
    with pytest.raises(ValueError, match="holds the 'tiny' budget"):
        sweep.collect(
            other,
            ch08.variants(other),
            "t_keep",
            root=tmp_path / "clone2",
            dataset="x",
        )


def test_collect_drops_recorded_runs_of_a_redefined_variant(
    tiny, tmp_path, monkeypatch
):
    """A variant whose recipe changed keeps none of its old runs: they are another variant's now.
    A field that only the test set's evaluation reads does not count as a change."""
    budget, split = tiny
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    _ablation(
        budget,
        [0],
        only=["baseline"],
        result="t_redefined",
        log=lambda *_: None,
        split=split,
        root=tmp_path / "clone1",
    )
    unchanged = dataclasses.replace(
        budget, base=dataclasses.replace(budget.base, test_shifts=((1, 0),))
    )
    logs: list[str] = []
    kept = sweep.collect(
        unchanged,
        ch08.variants(unchanged),
        "t_redefined",
        logs.append,
        root=tmp_path / "clone2",
        dataset="x",
    )
    assert sorted(kept["runs"]["baseline"]) == ["0"], logs
    changed = dataclasses.replace(
        budget, base=dataclasses.replace(budget.base, lr=budget.base.lr / 2)
    )
    logs.clear()
    dropped = sweep.collect(
        changed,
        ch08.variants(changed),
        "t_redefined",
        logs.append,
        root=tmp_path / "clone2",
        dataset="x",
    )
    assert "baseline" not in dropped["runs"]
    assert any(
        "dropped from results/t_redefined.json" in line and "['lr']" in line
        for line in logs
    ), logs


def test_every_run_names_its_machine_and_old_records_get_the_files(
    tiny, tmp_path, monkeypatch
):
    """Minutes from two machines must not pass for one: each record carries the hardware that ran it."""
    budget, split = tiny
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    first = _ablation(
        budget,
        [0],
        only=["baseline"],
        result="t_hw",
        log=lambda *_: None,
        split=split,
        root=tmp_path / "one",
    )
    assert (
        first["runs"]["baseline"]["0"]["hardware"]["cpu_cores"]
        == os.cpu_count()
    )
    path = tmp_path / "results" / "t_hw.json"
    stored = json.loads(path.read_text())
    # a record written before runs named their machine
    del stored["data"]["runs"]["baseline"]["0"]["hardware"]
    stored["provenance"]["hardware"]["cpu"] = "Old Machine 9000"
    path.write_text(json.dumps(stored))
    second = _ablation(
        budget,
        [1],
        only=["baseline"],
        result="t_hw",
        log=lambda *_: None,
        split=split,
        root=tmp_path / "two",
    )
    assert (
        second["runs"]["baseline"]["0"]["hardware"]["cpu"]
        == "Old Machine 9000"
    )
    assert (
        second["runs"]["baseline"]["1"]["hardware"]["cpu"]
        != "Old Machine 9000"
    )


def test_adopting_a_run_that_is_only_recorded_keeps_the_record(
    tiny, tmp_path, monkeypatch
):
    """`make sweep-cpu` on a fresh clone: runs/ch07_vit_cpu is gone but results/ holds the adopted run."""
    budget, split = tiny
    monkeypatch.setattr(
        "course_utils.results.RESULTS_DIR", tmp_path / "results"
    )
    # nothing recorded and nothing to adopt: an error, not a silent skip
    with pytest.raises(FileNotFoundError, match="cannot adopt"):
        _ablation(
            budget,
            [0],
            only=["baseline"],
            result="t_adopt",
            log=lambda *_: None,
            split=split,
            root=tmp_path / "a",
            adopted={"baseline": tmp_path / "nowhere"},
        )
    first = _ablation(
        budget,
        [0],
        only=["baseline"],
        result="t_adopt",
        log=lambda *_: None,
        split=split,
        root=tmp_path / "a",
    )
    logs: list[str] = []
    again = _ablation(
        budget,
        [0],
        only=["schedule"],
        result="t_adopt",
        log=logs.append,
        split=split,
        root=tmp_path / "b",
        adopted={"baseline": tmp_path / "nowhere"},
    )
    assert again["runs"]["baseline"]["0"] == first["runs"]["baseline"]["0"]
    assert any("keeping its run recorded" in line for line in logs), logs


@pytest.mark.parametrize(
    "result",
    ["ch08_ablation_mini", "ch08_ablation_small-data", "ch08_ablation_cpu"],
)
def test_every_stored_run_is_a_run_of_todays_variant(result):
    """Chapter 08 reads these tables as today's variants: a change to a budget, the ladder, a lever or
    the method would turn the stored runs into another variant's (and the next sweep would drop them)."""
    from course_utils.results import read_result

    data = read_result(result)["data"]
    table = ch08.variants(ch08.BUDGETS[data["budget"]])
    changed = {
        f"{name} seed {seed}": sweep.recipe_change(
            record["recipe"], table[name][2]
        )
        for name, seeds in data["runs"].items()
        for seed, record in seeds.items()
    }
    assert not {k: v for k, v in changed.items() if v}, (
        "stored runs whose variant has changed since"
    )
