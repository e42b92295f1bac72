"""Training steps of chapter 07's CPU recipes side by side: images/s, FLOPs and the share of the
machine's matrix-multiply speed they reach.

    python -m benchmarks.cpu_recipe_steps                                # cpu_stem2_pad4 vs cpu_stem122
    python -m benchmarks.cpu_recipe_steps --recipes cpu cpu_stem2 --result bench_cpu_steps_other

Each recipe's model, optimiser (the trainer's, ``training.optim.make_optimizer``), batch size and memory format; bf16
autocast where the CPU has native bf16 (``avx512_bf16`` or AMX), float32 elsewhere, as the trainer's
probe picks.  The recipes are timed in rotation, one step each per round, the order reversed every
other round, so that a busy moment of the shared machine slows all of them alike; each ratio is the
median of the per-round ratios against the first recipe, with their range.

The ceiling is one large matrix product (1024 x 1024 x 1024) in the same precision on the same
threads: the fastest arithmetic this machine reaches from PyTorch, not a datasheet peak.  A recipe's
share of it says how much of the step is arithmetic the CPU does at full speed; the rest is memory
traffic (batch norms, activations, small convolutions) and overhead.  ``epochs_in_30_min`` counts
steps only: a run also validates after each epoch.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks.timing import (
    TRAIN_IMAGES,
    epochs_in_half_hour,
    in_rotation,
    ratio_spread,
    seeded_model,
    synthetic_batch,
    train_step,
)
from course_utils.experiments.recipes import RECIPES
from course_utils.results import NATIVE_BF16_FLAGS, cpu_flags, write_result
from course_utils.training.compute import flops_per_image
from course_utils.training.optim import make_optimizer

CEILING_SIZE = 1024


def ceiling_flops_per_s(bf16: bool, rounds: int = 5) -> float:
    """FLOP/s of a ``(n, n) @ (n, n)`` product, the fastest of ``rounds``, in bf16 or float32."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    a = torch.randn(CEILING_SIZE, CEILING_SIZE).to(dtype)
    b = torch.randn(CEILING_SIZE, CEILING_SIZE).to(dtype)
    a @ b  # the first call picks the kernel
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * CEILING_SIZE**3 / best


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cpu_recipe_steps",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--recipes",
        nargs="+",
        default=["cpu_stem2_pad4", "cpu_stem122"],
        choices=sorted(n for n in RECIPES if RECIPES[n].model == "vit"),
        help="the first is the one the others are compared with",
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--result", default="bench_cpu_recipe_steps")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write the result here instead of results/",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    torch.set_num_threads(args.threads)
    flags = sorted(f for f in NATIVE_BF16_FLAGS if f in cpu_flags())
    bf16 = bool(flags)
    steps, rows = {}, {}
    for name in args.recipes:
        recipe = RECIPES[name]
        model = seeded_model(recipe, recipe.channels_last)
        optimizer = make_optimizer(recipe, model)
        x, y = synthetic_batch(recipe.batch_size, recipe.channels_last)
        steps[name] = lambda m=model, o=optimizer, x=x, y=y: train_step(
            m, o, x, y, bf16
        )
        rows[name] = {
            "batch_size": recipe.batch_size,
            "parameters": sum(p.numel() for p in model.parameters()),
            "train_flops_per_image": flops_per_image(recipe),
        }
    seconds = in_rotation(steps, args.rounds, alternate=True)
    ceiling = ceiling_flops_per_s(bf16)
    first = args.recipes[0]
    for name, row in rows.items():
        per_s = row["batch_size"] / statistics.median(seconds[name])
        achieved = per_s * row["train_flops_per_image"]
        row.update(
            train_img_per_s=round(per_s, 1),
            train_gflop_per_s=round(achieved / 1e9, 1),
            share_of_ceiling=round(achieved / ceiling, 3),
            epochs_in_30_min=epochs_in_half_hour(per_s),
            # per image, so that recipes of different batch sizes compare
            time_per_image_over_first=ratio_spread(
                [t / row["batch_size"] for t in seconds[name]],
                [t / rows[first]["batch_size"] for t in seconds[first]],
            ),
        )
        row["train_flops_per_image"] = round(row["train_flops_per_image"])
        print(
            f"{name:>16}: {row['train_img_per_s']:7.1f} img/s  "
            f"{row['train_flops_per_image'] / 1e6:6.1f} MFLOP/img  "
            f"{row['train_gflop_per_s']:6.1f} GFLOP/s = {row['share_of_ceiling']:.1%} of the ceiling  "
            f"time/img x{row['time_per_image_over_first']['median']:.3f} "
            f"[{row['time_per_image_over_first']['min']:.3f}, {row['time_per_image_over_first']['max']:.3f}] "
            f"of {first}  {row['epochs_in_30_min']:.1f} epochs of steps in 30 min"
        )
    print(
        f"ceiling: a {CEILING_SIZE}^3 {'bf16' if bf16 else 'float32'} matmul, {ceiling / 1e9:.1f} GFLOP/s"
    )
    data = {
        "precision": "bfloat16" if bf16 else "float32",
        "native_bf16_flags": flags,
        "torch_threads": args.threads,
        "rounds": args.rounds,
        "train_images": TRAIN_IMAGES,
        "ceiling": {
            "matmul_size": CEILING_SIZE,
            "gflop_per_s": round(ceiling / 1e9, 1),
        },
        "recipes": rows,
    }
    path = write_result(
        args.result,
        data,
        dataset="synthetic random tensors",
        directory=args.out_dir,
    )
    print(f"written {path}")
    return data


if __name__ == "__main__":
    main()
