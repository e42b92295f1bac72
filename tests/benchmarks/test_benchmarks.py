"""The speed benchmarks (benchmarks/) run end to end at tiny sizes and report every ratio they promise;
chapter 07's CPU campaigns table their seeds per recipe and machine, and chapter 08's GPU cut plans
the epochs that fit (course_utils.experiments)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def bench(tmp_path, monkeypatch):
    """The benchmark module at a tiny size (batch 4, one step, one round), writing into ``tmp_path``."""
    pytest.importorskip("timm")
    pytest.importorskip("vit_pytorch")
    from benchmarks import vit_throughput

    monkeypatch.setattr(vit_throughput, "BATCH", 4)
    monkeypatch.setattr(vit_throughput, "STEPS", 1)
    monkeypatch.setattr(vit_throughput, "ROUNDS", 1)
    monkeypatch.setattr("course_utils.results.RESULTS_DIR", tmp_path)
    return vit_throughput


def test_vit_throughput_benchmark_smoke(bench, tmp_path):
    # every path, whatever this CPU does natively
    out = bench.main(force_bf16=True)
    saved = json.loads((tmp_path / "bench_vit_throughput.json").read_text())[
        "data"
    ]
    params = saved["parameters"]
    assert params["course"] == params["timm"] == params["course_again"], (
        "course vs timm: the same parameter set"
    )
    assert params["vit-pytorch"] - params["course_no_qkv_bias"] == 480, (
        "course vs vit-pytorch: like with like"
    )
    for label in ("float32", "bf16_autocast"):
        for key in (
            "ratio_course_over_timm",
            "ratio_course_over_vit_pytorch",
            "ratio_course_with_qkv_bias_over_vit_pytorch",
        ):
            assert out[label][key] > 0
            low, high = out[label][key.replace("ratio_", "range_")]
            assert low <= out[label][key] <= high, (
                "the median ratio lies inside its per-round range"
            )
        assert set(out[label]["train_img_per_s"]) == {
            "course",
            "course_no_qkv_bias",
            "course_again",
            "timm",
            "vit-pytorch",
        }
        assert "ratio_control_course_over_course_again" in out[label]


def test_vit_throughput_benchmark_skips_bf16_where_it_is_emulated(
    bench, monkeypatch
):
    monkeypatch.setattr(
        bench, "matmul_gflops", lambda: {"float32": 50.0, "bfloat16": 0.8}
    )
    out = bench.main()
    assert "no native bf16" in out["bf16_autocast"]["skipped"]
    assert out["float32"]["ratio_course_over_timm"] > 0


def _stored_run(
    recipe, seed: int, accs: list[float], epoch_s: float = 60.0
) -> dict:
    """The ``data`` of a results file as the trainer writes it, trimmed to what the table reads."""
    history = [
        {"epoch": e + 1, "val_acc": a, "elapsed_s": epoch_s * (e + 1)}
        for e, a in enumerate(accs)
    ]
    return {
        "recipe": {**recipe.to_dict(), "seed": seed},
        "history": history,
        "epochs_done": len(accs),
        "train_time_s": epoch_s * len(accs),
        "best_val_acc": max(accs),
        "test_acc": max(accs) - 0.01,
        "test_acc_single_view": max(accs) - 0.02,
        "amp": "bfloat16",
        "fast": False,
    }


def test_recipe_tables_keep_each_recipe_and_version_apart(
    tmp_path, monkeypatch
):
    """``experiments.cpu_recipe`` tables the ViT's and the ResNet's seeds in separate files, each from its
    own results only, and leaves out runs of an older version of the recipe."""
    import dataclasses

    from course_utils.experiments import cpu_recipe
    from course_utils.experiments.recipes import RECIPES
    from course_utils.results import write_result

    monkeypatch.setattr("course_utils.results.RESULTS_DIR", tmp_path)
    monkeypatch.setattr(cpu_recipe, "RESULTS_DIR", tmp_path)
    resnet, vit = RECIPES["resnet"], RECIPES["cpu"]
    assert cpu_recipe.result_name(0, "resnet") == "ch07_resnet_cpu"
    assert cpu_recipe.result_name(2, "resnet") == "ch07_resnet_cpu_seed2"
    assert cpu_recipe.result_name(1) == "ch07_vit_cpu_seed1"
    for seed, accs in ((0, [0.70, 0.81, 0.86]), (1, [0.72, 0.79, 0.84])):
        write_result(
            cpu_recipe.result_name(seed, "resnet"),
            _stored_run(resnet, seed, accs),
            dataset="test",
            directory=tmp_path,
        )
    # another version of the recipe
    older = dataclasses.replace(resnet, epochs=resnet.epochs + 1)
    write_result(
        cpu_recipe.result_name(2, "resnet"),
        _stored_run(older, 2, [0.9]),
        dataset="test",
        directory=tmp_path,
    )
    write_result(
        cpu_recipe.result_name(0),
        _stored_run(vit, 0, [0.5, 0.6]),
        dataset="test",
        directory=tmp_path,
    )

    table = cpu_recipe.summarize("resnet")
    (entry,) = table["machines"].values()
    assert [r["seed"] for r in entry["seeds"]] == [0, 1], (
        "the older version's seed 2 is left out"
    )
    assert [r["time_to_85_s"] for r in entry["seeds"]] == [180.0, None]
    assert entry["seeds_reaching"] == {"80%": 2, "85%": 1}
    assert entry["summary"]["test_acc"]["mean"] == pytest.approx(
        (0.85 + 0.83) / 2
    )
    assert table["recipe"]["model"] == "resnet"
    (vit_entry,) = cpu_recipe.summarize("cpu")["machines"].values()
    assert [r["best_val_acc"] for r in vit_entry["seeds"]] == [0.6], (
        "the ViT's table holds the ViT's run only"
    )


def test_cpu_precision_benchmark_reports_each_variant_against_bf16(tmp_path):
    """``benchmarks.cpu_precision`` times the cpu recipe's model in bf16 and float32 (both memory
    formats) side by side and writes every ratio it prints."""
    from benchmarks import cpu_precision

    out = cpu_precision.main(
        ["--rounds", "2", "--no-compile", "--out-dir", str(tmp_path)]
    )
    saved = json.loads((tmp_path / "bench_cpu_precision.json").read_text())[
        "data"
    ]
    assert (
        set(saved["variants"])
        == set(cpu_precision.VARIANTS)
        == set(out["variants"])
    )
    assert not any(
        "first_step_s" in row for row in saved["variants"].values()
    ), "nothing was compiled"
    assert saved["variants"]["bf16, channels-last"][
        "step_time_over_bf16"
    ] == {"median": 1.0, "min": 1.0, "max": 1.0}
    for row in saved["variants"].values():
        r = row["step_time_over_bf16"]
        assert (
            row["train_img_per_s"] > 0
            and r["min"] <= r["median"] <= r["max"]
        )
    assert set(saved["native_bf16_flags"]) <= set(
        cpu_precision.NATIVE_BF16_FLAGS
    )


def test_the_stored_precision_benchmark_holds_the_compiled_variants():
    """Chapter 07 reads torch.compile's rows from the stored table (its text says what they show),
    so the table must have been written with them, each against its own precision without compiling."""
    from benchmarks import cpu_precision
    from course_utils.results import read_result

    rows = read_result("bench_cpu_precision")["data"]["variants"]
    assert set(rows) == set(cpu_precision.VARIANTS) | set(
        cpu_precision.COMPILED
    ), (
        "results/bench_cpu_precision.json lacks variants: run python -m benchmarks.cpu_precision (without --no-compile)"
    )
    for name in cpu_precision.COMPILED:
        e = rows[name]["step_time_over_eager"]
        assert (
            rows[name]["first_step_s"] > 0
            and e["min"] <= e["median"] <= e["max"]
        )


def test_cpu_stem2_pad4_is_cpu_stem2_with_wider_crops_and_one_epoch_fewer():
    """The candidate reads against cpu_stem2 seed for seed, so nothing else may differ: the model,
    the optimiser, the test views and the rest of the augmentation stay those of cpu_stem2."""
    from course_utils.experiments.recipes import RECIPES

    base, pad4 = (
        RECIPES["cpu_stem2"].to_dict(),
        RECIPES["cpu_stem2_pad4"].to_dict(),
    )
    assert {k for k in base if base[k] != pad4[k]} == {
        "name",
        "crop_padding",
        "epochs",
    }
    assert (base["crop_padding"], pad4["crop_padding"]) == (2, 4)
    assert pad4["epochs"] == base["epochs"] - 1


def test_cpu_stem122_is_cpu_stem2_pad4_with_one_full_resolution_conv_and_more_epochs():
    """The candidate reads against cpu_stem2_pad4 seed for seed: only the tokenizer's first width
    loses a layer (1, 2, 2 instead of 2, 2, 2) and the epochs grow; the rest of the model, the
    optimiser, the augmentation and the test views stay."""
    from course_utils.experiments.recipes import RECIPES

    base, lite = (
        RECIPES["cpu_stem2_pad4"].to_dict(),
        RECIPES["cpu_stem122"].to_dict(),
    )
    assert {k for k in base if base[k] != lite[k]} == {
        "name",
        "model_kwargs",
        "epochs",
    }
    assert {
        k
        for k in base["model_kwargs"].keys() | lite["model_kwargs"].keys()
        if base["model_kwargs"].get(k) != lite["model_kwargs"].get(k)
    } == {"stem_convs"}
    assert (
        base["model_kwargs"]["stem_convs"],
        lite["model_kwargs"]["stem_convs"],
    ) == (
        2,
        (1, 2, 2),
    )
    assert lite["epochs"] > base["epochs"]


def test_cpu_stem122_ema_is_cpu_stem122_with_a_moving_average_only():
    """The candidate reads against cpu_stem122 seed for seed: the same model, data order, optimiser,
    schedule and epochs (the average does not touch the weights being trained), measured as the
    average."""
    from course_utils.experiments.recipes import RECIPES

    base, ema = (
        RECIPES["cpu_stem122"].to_dict(),
        RECIPES["cpu_stem122_ema"].to_dict(),
    )
    assert {k for k in base if base[k] != ema[k]} == {"name", "ema_decay"}
    assert (base["ema_decay"], ema["ema_decay"]) == (None, 0.999)


def test_cpu_stem122_screens_change_one_setting_each():
    """Each screen reads against cpu_stem122 with one setting moved: the learning rate by a factor
    sqrt(2) either way (rounded), the label smoothing doubled or removed, the batch halved (the
    learning rate divided by sqrt(2)), the flips alternating, or the crops stopping for the last
    epochs."""
    import math

    from course_utils.experiments.recipes import RECIPES

    base = RECIPES["cpu_stem122"].to_dict()
    moved = {}
    for name in (
        "cpu_stem122_lr_down",
        "cpu_stem122_lr_up",
        "cpu_stem122_ls2",
    ):
        screen = RECIPES[name].to_dict()
        (changed,) = {k for k in base if base[k] != screen[k]} - {"name"}
        moved[name] = (changed, screen[changed] / base[changed])
    assert (
        moved["cpu_stem122_lr_down"][0]
        == moved["cpu_stem122_lr_up"][0]
        == "lr"
    )
    assert math.isclose(
        moved["cpu_stem122_lr_down"][1], 1 / math.sqrt(2), rel_tol=0.02
    )
    assert math.isclose(
        moved["cpu_stem122_lr_up"][1], math.sqrt(2), rel_tol=0.02
    )
    assert moved["cpu_stem122_ls2"] == ("label_smoothing", 2.0)
    ls0 = RECIPES["cpu_stem122_ls0"].to_dict()
    assert {k for k in base if base[k] != ls0[k]} == {
        "name",
        "label_smoothing",
    }
    assert (base["label_smoothing"], ls0["label_smoothing"]) == (0.1, 0.0)
    b32 = RECIPES["cpu_stem122_b32"].to_dict()
    assert {k for k in base if base[k] != b32[k]} == {
        "name",
        "batch_size",
        "lr",
    }
    assert b32["batch_size"] * 2 == base["batch_size"]
    assert math.isclose(b32["lr"] / base["lr"], 1 / math.sqrt(2))
    flips = RECIPES["cpu_stem122_altflip"].to_dict()
    assert {k for k in base if base[k] != flips[k]} == {"name", "flip"}
    assert (base["flip"], flips["flip"]) == ("random", "alternate")
    # the last tenth of the epochs on whole images: the last two of 29
    whole = RECIPES["cpu_stem122_cropend"].to_dict()
    assert {k for k in base if base[k] != whole[k]} == {"name", "crop_until"}
    assert (
        sum(
            e >= whole["crop_until"] * whole["epochs"]
            for e in range(whole["epochs"])
        )
        == 2
    )


def test_cpu_avx2_stem122_is_cpu_stem122_in_float32_with_a_half_hour_budget():
    """The AVX2 candidate trains cpu_stem122's model, optimiser and augmentation in float32, for the
    epochs the trainer plans from its first epoch to fill half an hour (the cap never binds on a
    CPU that trains float32 at the speeds the course has measured)."""
    from course_utils.experiments.recipes import RECIPES

    base, avx2 = (
        RECIPES["cpu_stem122"].to_dict(),
        RECIPES["cpu_avx2_stem122"].to_dict(),
    )
    assert {k for k in base if base[k] != avx2[k]} == {
        "name",
        "amp",
        "budget_s",
        "epochs",
    }
    assert (avx2["amp"], avx2["budget_s"]) == ("none", 1800)
    assert avx2["epochs"] > base["epochs"]
    assert (
        avx2["warmup_epochs"] >= 1
    )  # the plan is made after a warm-up epoch


def test_cpu_recipe_steps_benchmark_compares_recipes_per_image(tmp_path):
    """``benchmarks.cpu_recipe_steps`` times each recipe's full training step in rotation and reports
    images/s, FLOPs per image (the cheaper tokenizer counts fewer), the share of a matmul ceiling and
    the time per image against the first recipe (1.0 for the first itself)."""
    from benchmarks import cpu_recipe_steps

    out = cpu_recipe_steps.main(
        ["--rounds", "1", "--out-dir", str(tmp_path)]
    )
    saved = json.loads(
        (tmp_path / "bench_cpu_recipe_steps.json").read_text()
    )["data"]
    assert saved == json.loads(json.dumps(out))
    rows = out["recipes"]
    assert list(rows) == ["cpu_stem2_pad4", "cpu_stem122"]
    first = rows["cpu_stem2_pad4"]["time_per_image_over_first"]
    assert first == {"median": 1.0, "min": 1.0, "max": 1.0}
    assert (
        rows["cpu_stem122"]["train_flops_per_image"]
        < rows["cpu_stem2_pad4"]["train_flops_per_image"]
    )
    for row in rows.values():
        assert row["train_img_per_s"] > 0 and 0 < row["share_of_ceiling"]
        steps_fit = 1800 * row["train_img_per_s"] / out["train_images"]
        assert abs(row["epochs_in_30_min"] - steps_fit) < 0.1
    assert out["ceiling"]["gflop_per_s"] > 0
    with pytest.raises(SystemExit):
        cpu_recipe_steps.main(["--rounds", "0", "--out-dir", str(tmp_path)])


def test_the_float32_recipe_is_the_cpu_recipe_with_fewer_float32_epochs(
    monkeypatch,
):
    """``cpu_float32`` trains as ``cpu`` does but for precision and epoch count, so its runs measure the
    same training on a CPU without native bf16 (its test keeps the two mirrored views its stored seeds
    were tested with); and the trainer points a float32 CPU running ``cpu`` to it."""
    import torch

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training import precision

    cpu, f32 = RECIPES["cpu"].to_dict(), RECIPES["cpu_float32"].to_dict()
    assert {k for k in cpu if cpu[k] != f32[k]} == {
        "name",
        "amp",
        "epochs",
        "test_shifts",
        "batch_size",
        "lr",
    }
    assert f32["test_shifts"] == () and f32["eval_flip"]
    # what its stored seeds were made with
    assert (f32["batch_size"], f32["lr"]) == (
        128,
        2e-3,
    )
    assert f32["amp"] == "none" and 0 < f32["epochs"] < cpu["epochs"]

    logs: list[str] = []
    model = torch.nn.Linear(1, 1)
    # emulated bf16
    monkeypatch.setattr(
        precision,
        "_time_steps",
        lambda m, x, dtype: 2.0 if dtype is not None else 1.0,
    )
    assert (
        precision.choose_amp(
            RECIPES["cpu"], model, torch.device("cpu"), logs.append
        )
        is None
    )
    assert any("--recipe cpu_float32" in line for line in logs), logs


def test_gpu_recipe_plans_the_epochs_that_fit_and_refuses_too_little_time():
    from course_utils.experiments import gpu_recipe

    per_epoch = 5.0
    n = gpu_recipe.plan_epochs(600, per_epoch, 300)
    # n epochs at the probe's rate (with the safety factor) plus the reserve fit; one more does not
    assert n * per_epoch * gpu_recipe.SAFETY + gpu_recipe.RESERVE_S <= 600
    assert (
        n + 1
    ) * per_epoch * gpu_recipe.SAFETY + gpu_recipe.RESERVE_S > 600
    # never more than the full recipe
    assert gpu_recipe.plan_epochs(10**6, per_epoch, 300) == 300
    with pytest.raises(ValueError, match="longer --minutes"):
        gpu_recipe.plan_epochs(
            gpu_recipe.RESERVE_S + per_epoch, per_epoch, 300
        )


def test_gpu_pipeline_times_every_part_and_the_whole_step(
    tmp_path, monkeypatch
):
    import itertools
    import types

    from benchmarks import gpu_pipeline

    # a clock that moves one second per reading: every timed call then lasts exactly one second, so
    # the shares test the bookkeeping (a window counted per step), not how busy this machine is
    ticks = itertools.count()
    monkeypatch.setattr(
        gpu_pipeline,
        "time",
        types.SimpleNamespace(perf_counter=lambda: float(next(ticks))),
    )
    out = gpu_pipeline.main(
        [
            "--recipe",
            "smoke",
            "--rounds",
            "2",
            "--window",
            "3",
            "--profile",
            "--out-dir",
            str(tmp_path),
        ]
    )
    saved = json.loads(
        (tmp_path / "bench_gpu_pipeline_smoke.json").read_text()
    )["data"]
    assert not (tmp_path / "bench_gpu_pipeline.json").exists(), (
        "only the gpu recipe's bench keeps the bare name"
    )
    assert (
        set(saved["parts"]) == set(gpu_pipeline.PARTS) == set(out["parts"])
    )
    assert saved["parts"]["whole"]["share_of_whole"] == 1.0
    assert all(
        saved["parts"][name]["median_s"] == 1.0
        for name in gpu_pipeline.PARTS
        if name != "in a row"
    )
    assert saved["whole_images_per_s"] == saved["batch_size"]
    assert saved["device"] == str(out["device"])
    # "in a row" is per step: one window of three steps takes one tick, a third of a tick per step
    assert saved["window"] == 3
    assert saved["parts"]["in a row"]["median_s"] == pytest.approx(1 / 3)
    assert saved["parts"]["in a row"]["share_of_whole"] == pytest.approx(
        1 / 3, abs=1e-3
    )
    assert saved["in_a_row_images_per_s"] == pytest.approx(
        saved["batch_size"] / saved["parts"]["in a row"]["median_s"],
        rel=1e-3,
    )
    # the profiled window: per-step wall time, the host's costliest operations; no device share on a CPU
    prof = saved["profile"]
    assert (
        prof["steps"] == 3
        and prof["wall_ms_per_step"] > 0
        and prof["device_busy"] is None
    )
    assert not prof["device_events_seen"] and 0 < len(prof["top"]) <= 10
    assert all(
        op["ms_per_step"] >= 0 and op["calls_per_step"] > 0
        for op in prof["top"]
    )
    assert any(
        "mm" in op["name"] or "linear" in op["name"] or "conv" in op["name"]
        for op in prof["top"]
    )


def test_trivial_augment_benchmark_times_the_three_ways(tmp_path):
    from benchmarks import trivial_augment

    out = trivial_augment.main(
        [
            "--device",
            "cpu",
            "--batch",
            "32",
            "--rounds",
            "1",
            "--repeats",
            "1",
            "--out-dir",
            str(tmp_path),
        ]
    )
    saved = json.loads(
        (tmp_path / "bench_trivial_augment.json").read_text()
    )["data"]
    assert saved == json.loads(json.dumps(out))
    assert set(saved["ms_per_batch"]) == {
        "torchvision, per image",
        "torchvision, per group of 16",
        "course, per image",
    }
    assert all(ms > 0 for ms in saved["ms_per_batch"].values())
    assert (
        saved["ratio_to_course"]["course, per image"] == 1.0
        and saved["device"] == "cpu"
    )


def test_cpu_wide_is_cpu_stem122_wider_with_a_half_hour_budget():
    """The wide candidate changes only the network's widths (and the convolutions per width that
    keep its 16x16 stage to one) and plans its epochs to fill half an hour; its training is
    cpu_stem122's, so a reading against cpu_stem122 is a reading of the network."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image

    base, wide = (
        RECIPES["cpu_stem122"].to_dict(),
        RECIPES["cpu_wide"].to_dict(),
    )
    assert {k for k in base if base[k] != wide[k]} == {
        "name",
        "model_kwargs",
        "budget_s",
        "epochs",
    }
    changed = {
        k
        for k in base["model_kwargs"]
        if base["model_kwargs"][k] != wide["model_kwargs"][k]
    }
    assert changed == {
        "stem_channels",
        "stem_convs",
        "dim",
        "num_heads",
        "mlp_dim",
    }
    assert wide["budget_s"] == 1800 and wide["warmup_epochs"] >= 1
    # the head width is the Transformer's: 64 per head, as in cpu_stem122
    kw = wide["model_kwargs"]
    assert (
        kw["dim"] // kw["num_heads"] == 64 and kw["mlp_dim"] == 2 * kw["dim"]
    )
    ratio = flops_per_image(RECIPES["cpu_wide"]) / flops_per_image(
        RECIPES["cpu_stem122"]
    )
    assert 1.5 < ratio < 3.0


def test_cpu_stem122_prog_is_cpu_stem122_with_its_first_half_on_24_pixel_images():
    """The progressively resized screen trains cpu_stem122's network, optimiser and epochs; only the
    image size of its first half of the epochs differs, and those epochs cost about half the FLOPs."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image

    base, prog = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_prog"]
    a, b = base.to_dict(), prog.to_dict()
    assert {k for k in a if a[k] != b[k]} == {
        "name",
        "model_kwargs",
        "progressive",
    }
    assert {
        k
        for k in b["model_kwargs"]
        if a["model_kwargs"].get(k) != b["model_kwargs"][k]
    } == {"extra_sizes"}
    sizes = [prog.train_size(e, prog.epochs) for e in range(prog.epochs)]
    assert sizes == [24] * 15 + [None] * 14
    assert flops_per_image(prog) == flops_per_image(base)
    assert (
        0.5 < flops_per_image(prog, side=24) / flops_per_image(prog) < 0.65
    )


def test_cpu_stem122_white_is_cpu_stem122_with_a_fixed_whitened_first_layer():
    """The whitening screen changes one model switch: cpu_stem122's network, optimiser and epochs
    otherwise, and its first layer trains nothing."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.recipes import build_model

    base, white = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_white"]
    a, b = base.to_dict(), white.to_dict()
    assert {k for k in a if a[k] != b[k]} == {"name", "model_kwargs"}
    assert {
        k
        for k in b["model_kwargs"]
        if a["model_kwargs"].get(k) != b["model_kwargs"][k]
    } == {"whiten_stem"}
    model = build_model(white)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {
        "patch_embed.net.0.weight",
        "patch_embed.net.1.weight",
        "patch_embed.net.1.bias",
    }


def test_cpu_stem122_trivial_is_cpu_stem122_with_trivial_augment_per_image():
    """The augmentation screen changes one setting: cpu_stem122's network, optimiser, crops, flips
    and epochs otherwise; and its loader applies the policy on top of the same crops and flips
    (one draw per image is tests/training/test_augment.py's to check)."""
    import torch

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.data import BatchLoader

    base, screen = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_trivial"]
    a, b = base.to_dict(), screen.to_dict()
    assert {k for k in a if a[k] != b[k]} == {"name", "policy"}
    assert b["policy"] == "trivial" and a["policy"] is None
    images = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8)
    labels = torch.zeros(64, dtype=torch.long)

    def batch(policy):
        loader = BatchLoader(
            images,
            labels,
            64,
            shuffle=True,
            augment=True,
            crop_padding=screen.crop_padding,
            policy=policy,
            seed=0,
        )
        return next(iter(loader))[0]

    plain, augmented = batch(None), batch("trivial")
    changed = (plain != augmented).flatten(1).any(1)
    # the same generator draws the same crops and flips first, so what differs is the policy's;
    # identity is one of its operations, so a few images may come out unchanged
    assert 0.5 < changed.float().mean() <= 1.0


def test_cpu_stem122_x2_is_cpu_stem122_for_twice_its_epochs():
    """The compute measurement changes the epochs only, so the learning rate's linear decay
    stretches over twice as many steps."""
    from course_utils.experiments.recipes import RECIPES

    base, long = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_x2"]
    a, b = base.to_dict(), long.to_dict()
    assert {k for k in a if a[k] != b[k]} == {"name", "epochs"}
    assert long.epochs == 2 * base.epochs and long.budget_s == base.budget_s


def test_cpu_stem122_dp_is_cpu_stem122_with_stochastic_depth():
    """The screen changes the last block's drop rate only; the model built from it has rates rising
    from 0 at the first block to 0.1 at the last, and evaluation drops nothing (the same output
    twice).  Per-image dropping itself is torchvision's StochasticDepth."""
    import torch

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.recipes import build_model

    base, dp = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_dp"]
    a, b = base.to_dict(), dp.to_dict()
    assert {k for k in a if a[k] != b[k]} == {"name", "model_kwargs"}
    ka, kb = a["model_kwargs"], b["model_kwargs"]
    assert {k for k in ka.keys() | kb.keys() if ka.get(k) != kb.get(k)} == {
        "drop_path"
    }
    assert kb["drop_path"] == 0.1
    model = build_model(dp)
    rates = [
        getattr(blk.drop_path, "p", 0.0) for blk in model.blocks
    ]  # the first: Identity
    assert rates[0] == 0.0 and abs(rates[-1] - 0.1) < 1e-9
    model.eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(x), model(x))


def test_cpu_stem122_mirror_is_cpu_stem122_tied_to_its_mirror():
    """The screen ties the model and takes fewer epochs for its slower step, nothing else; the tied
    model does the same arithmetic per image and gives an image and its mirror the same logits."""
    import torch

    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image
    from course_utils.training.recipes import build_model

    base, tied = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_mirror"]
    a, b = base.to_dict(), tied.to_dict()
    assert {k for k in a if a[k] != b[k]} == {
        "name",
        "model_kwargs",
        "epochs",
    }
    ka, kb = a["model_kwargs"], b["model_kwargs"]
    assert {k for k in ka.keys() | kb.keys() if ka.get(k) != kb.get(k)} == {
        "mirror"
    }
    assert kb["mirror"] is True and tied.epochs < base.epochs
    assert flops_per_image(tied) == flops_per_image(base)
    model = build_model(tied).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(model(x), model(x.flip(-1)), atol=1e-5)


def test_cpu_stem122_mirrorpos_ties_the_position_table_alone():
    """The screen changes the model's position table only, at cpu_stem122's epochs and arithmetic."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image
    from course_utils.training.recipes import build_model

    base, tied = RECIPES["cpu_stem122"], RECIPES["cpu_stem122_mirrorpos"]
    a, b = base.to_dict(), tied.to_dict()
    assert {k for k in a if a[k] != b[k]} == {"name", "model_kwargs"}
    ka, kb = a["model_kwargs"], b["model_kwargs"]
    assert {k for k in ka.keys() | kb.keys() if ka.get(k) != kb.get(k)} == {
        "mirror_positions"
    }
    assert flops_per_image(tied) == flops_per_image(base)
    cells = build_model(tied).pos_embed[0, 1:].unflatten(0, (4, 4))
    assert (cells == cells.flip(1)).all()


def test_runs_held_to_narrower_kernels_say_so_and_table_apart(
    tmp_path, monkeypatch
):
    """A run made with PyTorch's, oneDNN's or MKL's kernels held to a narrower instruction set records
    the limits in its provenance, and the recipe's table keeps it apart from the same CPU's
    unheld runs, naming the limit in the machine's key."""
    from course_utils import results
    from course_utils.experiments import cpu_recipe
    from course_utils.experiments.recipes import RECIPES

    for var in results.KERNEL_LIMIT_VARS:
        monkeypatch.delenv(var, raising=False)
    assert "cpu_kernel_limits" not in results.hardware()
    monkeypatch.setattr("course_utils.results.RESULTS_DIR", tmp_path)
    monkeypatch.setattr(cpu_recipe, "RESULTS_DIR", tmp_path)
    recipe = RECIPES["cpu_avx2_stem122_held"]
    results.write_result(
        cpu_recipe.result_name(0, recipe.name),
        _stored_run(recipe, 0, [0.8, 0.86]),
        dataset="test",
        directory=tmp_path,
    )
    for var, value in cpu_recipe.AVX2_KERNELS.items():
        monkeypatch.setenv(var, value)
    assert results.hardware()["cpu_kernel_limits"] == cpu_recipe.AVX2_KERNELS
    results.write_result(
        cpu_recipe.result_name(1, recipe.name),
        _stored_run(recipe, 1, [0.8, 0.85]),
        dataset="test",
        directory=tmp_path,
    )
    machines = cpu_recipe.summarize(recipe.name)["machines"]
    assert len(machines) == 2
    (held,) = [k for k in machines if "held to AVX2 kernels" in k]
    assert [r["seed"] for r in machines[held]["seeds"]] == [1]
    assert machines[held]["cpu_kernel_limits"] == cpu_recipe.AVX2_KERNELS


def test_held_recipe_refuses_to_train_without_its_kernel_limits(
    monkeypatch, capsys
):
    """``cpu_avx2_stem122_held`` stands for an AVX2-only CPU only when the kernels are held to AVX2:
    asked to train without exactly those limits it stops before training, naming them and the
    make target that sets them."""
    from course_utils import results
    from course_utils.experiments import cpu_recipe

    trained = []
    monkeypatch.setattr(
        cpu_recipe, "train_seed", lambda *a, **k: trained.append(a)
    )
    for var in results.KERNEL_LIMIT_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(
        "ATEN_CPU_CAPABILITY", "avx2"
    )  # one of three: not enough
    with pytest.raises(SystemExit) as stop:
        cpu_recipe.main(
            ["--recipe", "cpu_avx2_stem122_held", "--seeds", "0"]
        )
    assert stop.value.code == 2 and not trained
    err = capsys.readouterr().err
    assert (
        "ONEDNN_MAX_CPU_ISA" in err
        and "make train-cpu-avx2-stem122-held" in err
    )


def test_held_recipe_is_cpu_avx2_stem122_by_another_name():
    """The held runs train exactly the AVX2 candidate; only the name (and so the files and the
    table) differs."""
    from course_utils.experiments.recipes import RECIPES

    a, b = (
        RECIPES["cpu_avx2_stem122"].to_dict(),
        RECIPES["cpu_avx2_stem122_held"].to_dict(),
    )
    assert {k for k in a if a[k] != b[k]} == {"name"}


def test_cpu_airbench_carries_airbench_settings_and_runs_in_fast_mode(
    tmp_path,
):
    """The candidate's tokenizer trains with airbench94's step per image and decay per step (its
    units: a summed loss per 1024 images under momentum 0.85), and the recipe runs end to end on
    the CPU in fast mode (synthetic images where CIFAR-10 is absent)."""
    from course_utils.experiments.recipes import AIRBENCH_SGD, RECIPES
    from course_utils.training.compute import flops_per_image
    from course_utils.training.recipes import apply_overrides
    from course_utils.training.trainer import train

    r = RECIPES["cpu_airbench"]
    kilostep = 1024 * (1 + 1 / (1 - 0.85))
    assert r.optimizer == "adamw+sgd" and r.momentum == 0.85
    # per image of a mean loss: airbench's lr over its 1024 * (1 + 1/(1 - momentum)) images
    assert r.tokenizer_lr / r.batch_size == pytest.approx(
        AIRBENCH_SGD["lr"] / kilostep
    )
    # each step shrinks a kernel by airbench's share for a batch of this size, and a norm shift by
    # the same share at 64 times the rate
    assert r.tokenizer_lr * r.tokenizer_weight_decay == pytest.approx(
        AIRBENCH_SGD["weight_decay"] * r.batch_size / kilostep
    )
    assert r.tokenizer_bias_lr_scale == 64.0
    assert r.warmup_epochs / r.epochs == pytest.approx(0.23)
    assert (r.label_smoothing, r.crop_padding) == (0.2, 2)
    # twice cpu_stem122's arithmetic or more: fewer epochs fill the half hour
    assert flops_per_image(r) > 2 * flops_per_image(RECIPES["cpu_stem122"])
    # fewer images than fast mode's default: the check is that every part runs, not what it learns
    small = apply_overrides(r, dict(fast_train=1024, fast_eval=128))
    summary = train(small, tmp_path / "run", fast=True, log=lambda *_: None)
    assert summary["epochs_done"] == r.fast_epochs
    assert 0.0 <= summary["test_acc"] <= 1.0


def test_cpu_airbench_e18_is_cpu_airbench_for_more_epochs():
    """Only the epochs change, and the warm-up keeps its share of the steps."""
    from course_utils.experiments.recipes import RECIPES

    a, b = (
        RECIPES["cpu_airbench"].to_dict(),
        RECIPES["cpu_airbench_e18"].to_dict(),
    )
    assert {k for k in a if a[k] != b[k]} == {
        "name",
        "epochs",
        "warmup_epochs",
    }
    assert b["epochs"] > a["epochs"]
    assert b["warmup_epochs"] / b["epochs"] == pytest.approx(
        a["warmup_epochs"] / a["epochs"]
    )


def _changed_fields(a, b) -> set[str]:
    """The ``Recipe`` fields whose values differ between ``a`` and ``b``."""
    da, db = a.to_dict(), b.to_dict()
    return {k for k in da if da[k] != db[k]}


def test_cpu_airbench_tail_adds_one_layer_and_keeps_the_warmup_share():
    """Only the tokenizer's tail layer and the epochs change; the warm-up keeps its share of the
    steps, and the extra layer costs arithmetic, so fewer epochs than cpu_airbench's."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image
    from course_utils.training.recipes import build_model

    a, b = RECIPES["cpu_airbench"], RECIPES["cpu_airbench_tail"]
    da, db = a.to_dict(), b.to_dict()
    assert _changed_fields(a, b) == {
        "name",
        "model_kwargs",
        "epochs",
        "warmup_epochs",
    }
    assert {**da["model_kwargs"], "tail_convs": 1} == db["model_kwargs"]
    assert b.epochs < a.epochs
    assert b.warmup_epochs / b.epochs == pytest.approx(
        a.warmup_epochs / a.epochs
    )
    assert flops_per_image(b) > flops_per_image(a)
    assert len(build_model(b).patch_embed.tail) == 1


def test_cpu_airbench_tail_49k_changes_only_the_split_and_sees_as_many_images():
    """The final fit of the chosen recipe: the same model and optimiser, a smaller validation, and
    the epochs cut so that the images seen (and so the half hour) stay about the same."""
    from course_utils.experiments.recipes import RECIPES

    a, b = RECIPES["cpu_airbench_tail"], RECIPES["cpu_airbench_tail_49k"]
    assert _changed_fields(a, b) == {
        "name",
        "val_size",
        "epochs",
        "warmup_epochs",
    }
    assert b.val_size < a.val_size
    seen_a = (50_000 - a.val_size) * a.epochs
    seen_b = (50_000 - b.val_size) * b.epochs
    assert seen_b == pytest.approx(seen_a, rel=0.02)
    assert b.warmup_epochs / b.epochs == pytest.approx(
        a.warmup_epochs / a.epochs
    )


def test_cpu_airbench_lsa_changes_only_the_attention():
    """Locality self-attention alone: the model's switch, nothing in the schedule, and no arithmetic
    that would ask for fewer epochs (a learned number per block, a masked diagonal)."""
    from course_utils.experiments.recipes import RECIPES
    from course_utils.training.compute import flops_per_image
    from course_utils.training.recipes import build_model

    a, b = RECIPES["cpu_airbench_tail"], RECIPES["cpu_airbench_lsa"]
    da, db = a.to_dict(), b.to_dict()
    assert _changed_fields(a, b) == {"name", "model_kwargs"}
    assert {**da["model_kwargs"], "locality": True} == db["model_kwargs"]
    assert flops_per_image(b) == pytest.approx(flops_per_image(a), rel=0.01)
    model = build_model(b)
    assert all(block.temperature is not None for block in model.blocks)
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in build_model(a).parameters()
    ) + len(model.blocks)
