"""Chapter 07's half-hour CPU recipes, seed by seed, and their time to accuracy per machine.

    python -m course_utils.experiments.cpu_recipe --seeds 0 1 2                   # the ViT (about half an hour a seed)
    python -m course_utils.experiments.cpu_recipe --recipe resnet --seeds 0 1     # the ResNet, with its own recipe
    python -m course_utils.experiments.cpu_recipe --recipe cpu_float32 --seeds 0  # the ViT in float32 (no native bf16)
    python -m course_utils.experiments.cpu_recipe --recipe cpu_avx2 --seeds 0     # the same on an AVX2-only CPU
    python -m course_utils.experiments.cpu_recipe [--recipe resnet]               # rebuilds a table from the stored runs

``--recipe`` names one of ``RECIPES`` ("cpu", the default, "cpu_float32", "cpu_avx2", "cpu_avx2_init", "cpu_avx2_b64", "cpu_avx2_pad2", "cpu_avx2_seqpool", "cpu_avx2_linear", "cpu_stem2", "cpu_stem2_pad4", "cpu_stem122", "cpu_stem122_ema", "cpu_stem122_lr_down", "cpu_stem122_lr_up", "cpu_stem122_ls2", "cpu_stem122_ls0", "cpu_stem122_b32", "cpu_stem122_altflip", "cpu_stem122_cropend", "cpu_stem122_prog", "cpu_stem122_white", "cpu_stem122_trivial", "cpu_stem122_x2", "cpu_stem122_dp", "cpu_stem122_mirror", "cpu_stem122_mirrorpos", "cpu_airbench", "cpu_airbench_e18", "cpu_airbench_tail", "cpu_airbench_tail_49k", "cpu_airbench_lsa", "cpu_wide", "cpu_avx2_stem122", "cpu_avx2_stem122_held" or "resnet"), each with its own files:

| recipe | seed 0 (with its weights) | seed s > 0 | table | runs |
|---|---|---|---|---|
| ``cpu`` | ``ch07_vit_cpu`` | ``ch07_vit_cpu_seed<s>`` | ``bench_cpu_recipe`` | ``runs/cpu_seed<s>`` |
| ``resnet`` | ``ch07_resnet_cpu`` | ``ch07_resnet_cpu_seed<s>`` | ``bench_resnet_recipe`` | ``runs/resnet_seed<s>`` |
| ``cpu_float32`` | ``ch07_vit_cpu_float32`` | ``ch07_vit_cpu_float32_seed<s>`` | ``bench_cpu_recipe_float32`` | ``runs/cpu_float32_seed<s>`` |
| ``cpu_avx2`` | ``ch07_vit_cpu_avx2`` | ``ch07_vit_cpu_avx2_seed<s>`` | ``bench_cpu_recipe_avx2`` | ``runs/cpu_avx2_seed<s>`` |

Only the seed-0 runs of ``cpu`` and ``resnet`` keep their weights in ``results/`` (chapter 07 loads them).

Each seed trains into its runs folder and resumes there when restarted.  A table groups the stored
runs of the current recipe by the machine that made them (CPU model, cores, precision) and gives per seed:

- time to 80% and to 85%: training time (the validation pass included) at the end of the first
  epoch whose validation accuracy reaches it, or None;
- validation accuracy at 30 minutes: that of the last epoch finished by then;
- the test accuracy, evaluated once with the best-validation weights, with the recipe's test views
  (``test_views``: the image and its mirror, and for ``cpu`` also one-pixel shifts of both), with the
  validation's two mirrored views (``test_acc_flip``) and with one view; and the best validation epoch's
  accuracy with the validation's views, with one view (``best_val_acc_single_view``, in runs that
  recorded it) and with the test's (``best_val_acc_test_views``);

and per machine the mean and the sample standard deviation over its seeds.  Runs of another recipe
(an older version of ``cpu``) are left out of the table, so it never mixes two recipes.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

from ..results import (
    RESULTS_DIR,
    cpu_kernel_limits,
    read_result,
    write_result,
)
from ..training.recipes import as_stored
from ..training.trainer import train
from .recipes import RECIPES

BUDGET_S = 30 * 60
THRESHOLDS = (0.80, 0.85)


# recipe -> (result name of seed 0, name of the table)
FILES = {
    "cpu": ("ch07_vit_cpu", "bench_cpu_recipe"),
    "resnet": ("ch07_resnet_cpu", "bench_resnet_recipe"),
    "cpu_float32": ("ch07_vit_cpu_float32", "bench_cpu_recipe_float32"),
    "cpu_avx2": ("ch07_vit_cpu_avx2", "bench_cpu_recipe_avx2"),
    "cpu_avx2_init": (
        "ch07_vit_cpu_avx2_init",
        "bench_cpu_recipe_avx2_init",
    ),
    "cpu_avx2_b64": ("ch07_vit_cpu_avx2_b64", "bench_cpu_recipe_avx2_b64"),
    "cpu_avx2_pad2": (
        "ch07_vit_cpu_avx2_pad2",
        "bench_cpu_recipe_avx2_pad2",
    ),
    "cpu_avx2_seqpool": (
        "ch07_vit_cpu_avx2_seqpool",
        "bench_cpu_recipe_avx2_seqpool",
    ),
    "cpu_avx2_linear": (
        "ch07_vit_cpu_avx2_linear",
        "bench_cpu_recipe_avx2_linear",
    ),
    "cpu_stem2": ("ch07_vit_cpu_stem2", "bench_cpu_recipe_stem2"),
    "cpu_stem2_pad4": (
        "ch07_vit_cpu_stem2_pad4",
        "bench_cpu_recipe_stem2_pad4",
    ),
    "cpu_stem122": ("ch07_vit_cpu_stem122", "bench_cpu_recipe_stem122"),
    "cpu_stem122_ema": (
        "ch07_vit_cpu_stem122_ema",
        "bench_cpu_recipe_stem122_ema",
    ),
    "cpu_stem122_lr_down": (
        "ch07_vit_cpu_stem122_lr_down",
        "bench_cpu_recipe_stem122_lr_down",
    ),
    "cpu_stem122_lr_up": (
        "ch07_vit_cpu_stem122_lr_up",
        "bench_cpu_recipe_stem122_lr_up",
    ),
    "cpu_stem122_ls2": (
        "ch07_vit_cpu_stem122_ls2",
        "bench_cpu_recipe_stem122_ls2",
    ),
    "cpu_stem122_altflip": (
        "ch07_vit_cpu_stem122_altflip",
        "bench_cpu_recipe_stem122_altflip",
    ),
    "cpu_stem122_cropend": (
        "ch07_vit_cpu_stem122_cropend",
        "bench_cpu_recipe_stem122_cropend",
    ),
    "cpu_stem122_prog": (
        "ch07_vit_cpu_stem122_prog",
        "bench_cpu_recipe_stem122_prog",
    ),
    "cpu_stem122_white": (
        "ch07_vit_cpu_stem122_white",
        "bench_cpu_recipe_stem122_white",
    ),
    "cpu_stem122_trivial": (
        "ch07_vit_cpu_stem122_trivial",
        "bench_cpu_recipe_stem122_trivial",
    ),
    "cpu_stem122_x2": (
        "ch07_vit_cpu_stem122_x2",
        "bench_cpu_recipe_stem122_x2",
    ),
    "cpu_stem122_ls0": (
        "ch07_vit_cpu_stem122_ls0",
        "bench_cpu_recipe_stem122_ls0",
    ),
    "cpu_stem122_b32": (
        "ch07_vit_cpu_stem122_b32",
        "bench_cpu_recipe_stem122_b32",
    ),
    "cpu_stem122_dp": (
        "ch07_vit_cpu_stem122_dp",
        "bench_cpu_recipe_stem122_dp",
    ),
    "cpu_stem122_mirror": (
        "ch07_vit_cpu_stem122_mirror",
        "bench_cpu_recipe_stem122_mirror",
    ),
    "cpu_stem122_mirrorpos": (
        "ch07_vit_cpu_stem122_mirrorpos",
        "bench_cpu_recipe_stem122_mirrorpos",
    ),
    "cpu_airbench": ("ch07_vit_cpu_airbench", "bench_cpu_recipe_airbench"),
    "cpu_airbench_e18": (
        "ch07_vit_cpu_airbench_e18",
        "bench_cpu_recipe_airbench_e18",
    ),
    "cpu_airbench_tail": (
        "ch07_vit_cpu_airbench_tail",
        "bench_cpu_recipe_airbench_tail",
    ),
    "cpu_airbench_tail_49k": (
        "ch07_vit_cpu_airbench_tail_49k",
        "bench_cpu_recipe_airbench_tail_49k",
    ),
    "cpu_airbench_lsa": (
        "ch07_vit_cpu_airbench_lsa",
        "bench_cpu_recipe_airbench_lsa",
    ),
    "cpu_wide": ("ch07_vit_cpu_wide", "bench_cpu_recipe_wide"),
    "cpu_avx2_stem122": (
        "ch07_vit_cpu_avx2_stem122",
        "bench_cpu_recipe_avx2_stem122",
    ),
    "cpu_avx2_stem122_held": (
        "ch07_vit_cpu_avx2_stem122_held",
        "bench_cpu_recipe_avx2_stem122_held",
    ),
}
# recipes that stand for another CPU by holding this one's kernels to that CPU's instruction set
# (results.KERNEL_LIMIT_VARS); they refuse to train without exactly these in the environment
AVX2_KERNELS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}
KERNEL_LIMITS = {"cpu_avx2_stem122_held": AVX2_KERNELS}
# the recipes whose seed-0 weights chapter 07 loads
SHOWN = (
    "cpu",
    "resnet",
)


def result_name(seed: int, recipe: str = "cpu") -> str:
    base = FILES[recipe][0]
    return base if seed == 0 else f"{base}_seed{seed}"


def train_seed(seed: int, recipe: str = "cpu") -> None:
    """One seed of the recipe, into ``runs/<recipe>_seed<seed>`` (resumable) and ``results/``."""
    train(
        dataclasses.replace(RECIPES[recipe], seed=seed),
        f"runs/{recipe}_seed{seed}",
        result_name=result_name(seed, recipe),
    )
    # only the runs the chapter shows keep their weights in results/
    if seed != 0 or recipe not in SHOWN:
        (RESULTS_DIR / f"{result_name(seed, recipe)}_model.pth").unlink(
            missing_ok=True
        )


def seed_row(run: dict) -> dict:
    """The per-seed facts of one stored run (``data`` of a results file)."""
    history = run["history"]

    def time_to(acc: float):
        return next(
            (h["elapsed_s"] for h in history if h["val_acc"] >= acc), None
        )

    within = [h for h in history if h["elapsed_s"] <= BUDGET_S]
    return {
        "seed": run["recipe"]["seed"],
        "epochs": run["epochs_done"],
        "train_time_s": run["train_time_s"],
        **{f"time_to_{round(t * 100)}_s": time_to(t) for t in THRESHOLDS},
        "val_acc_at_30_min": within[-1]["val_acc"] if within else None,
        "best_val_acc": run["best_val_acc"],
        # the chosen weights on one view of the validation images (runs that recorded it)
        "best_val_acc_single_view": run.get("best_val_acc_single_view"),
        "test_acc": run["test_acc"],
        "test_acc_single_view": run.get("test_acc_single_view"),
        # the runs whose test averages shifted views also record the validation's two views
        "test_views": run.get(
            "test_views", 2 if run["recipe"].get("eval_flip") else 1
        ),
        "test_acc_flip": run.get(
            "test_acc_flip",
            run["test_acc"] if run["recipe"].get("eval_flip") else None,
        ),
        "best_val_acc_test_views": run.get("best_val_acc_test_views"),
    }


def spread(values: list) -> dict | None:
    """Mean, sample standard deviation, min and max of the values that exist (None where none do)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "min": min(values),
        "max": max(values),
    }


def summarize(recipe: str = "cpu", max_seed: int = 20) -> dict:
    """The table from every stored seed of the current version of ``recipe``, grouped by machine."""
    # seeds of one recipe compare equal
    current = as_stored(RECIPES[recipe], leave_out=("seed",))
    machines: dict[str, dict] = {}
    for seed in range(max_seed):
        path = RESULTS_DIR / f"{result_name(seed, recipe)}.json"
        if not path.exists():
            continue
        stored = read_result(result_name(seed, recipe))
        run, hw = stored["data"], stored["provenance"]["hardware"]
        if as_stored(
            run["recipe"], leave_out=("seed",)
        ) != current or run.get("fast"):
            continue
        vector = f" ({hw['cpu_vector']})" if hw.get("cpu_vector") else ""
        limits = hw.get("cpu_kernel_limits") or {}
        # named by oneDNN's limit, which holds the convolutions and matrix products (most of a step)
        held = (
            f" held to {limits.get('ONEDNN_MAX_CPU_ISA', 'narrower')} kernels"
            if limits
            else ""
        )
        key = f"{hw['cpu']}{vector}{held}, {hw['cpu_cores']} cores, {run['amp']}"
        entry = machines.setdefault(
            key,
            {
                "cpu": hw["cpu"],
                "cpu_vector": hw.get("cpu_vector"),
                "cpu_kernel_limits": limits or None,
                "cpu_cores": hw["cpu_cores"],
                "amp": run["amp"],
                "torch": stored["provenance"]["versions"]["torch"],
                "seeds": [],
            },
        )
        entry["seeds"].append(
            {
                **seed_row(run),
                "git_commit": stored["provenance"]["git_commit"],
                "date": stored["provenance"]["date"],
            }
        )
    for entry in machines.values():
        rows = entry["seeds"]
        entry["summary"] = {
            k: spread([r[k] for r in rows])
            for k in (
                "time_to_80_s",
                "time_to_85_s",
                "val_acc_at_30_min",
                "test_acc",
                "test_acc_flip",
                "test_acc_single_view",
                "best_val_acc",
                "best_val_acc_single_view",
                "best_val_acc_test_views",
                "train_time_s",
            )
        }
        entry["seeds_reaching"] = {
            f"{round(t * 100)}%": sum(
                r[f"time_to_{round(t * 100)}_s"] is not None for r in rows
            )
            for t in THRESHOLDS
        }
    return {
        "recipe": RECIPES[recipe].to_dict(),
        "budget_s": BUDGET_S,
        "machines": machines,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.experiments.cpu_recipe",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--recipe",
        choices=sorted(FILES),
        default="cpu",
        help="which recipe (default: cpu)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="*",
        default=[],
        help="train these seeds first",
    )
    args = parser.parse_args(argv)
    needed = KERNEL_LIMITS.get(args.recipe, {})
    if needed and args.seeds and cpu_kernel_limits() != needed:
        parser.error(
            f"recipe {args.recipe!r} must run with exactly these kernel limits in the environment: "
            f"{needed} (set: {cpu_kernel_limits() or 'none'}); "
            "`make train-cpu-avx2-stem122-held` sets them"
        )
    for seed in args.seeds:
        train_seed(seed, args.recipe)
    table = summarize(args.recipe)
    path = write_result(
        FILES[args.recipe][1],
        table,
        dataset="CIFAR-10, JPEG copy",
        split=f"validation ({RECIPES[args.recipe].val_size:,} images carved from the training set); "
        "test evaluated once",
    )
    for key, entry in table["machines"].items():
        s = entry["summary"]
        print(
            f"{key}: {len(entry['seeds'])} seeds; test {s['test_acc']['mean']:.4f} "
            f"(min {s['test_acc']['min']:.4f}, max {s['test_acc']['max']:.4f}); "
            f"reached 85%: {entry['seeds_reaching']['85%']}/{len(entry['seeds'])}"
        )
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
