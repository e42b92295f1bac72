"""Training speed of the ``cpu`` recipe's ViT in bf16 and in float32, side by side on one CPU.

    python -m benchmarks.cpu_precision          # writes results/bench_cpu_precision.json
    python -m benchmarks.cpu_precision --no-compile   # the three eager variants only
    python -m benchmarks.cpu_precision --no-compile --recipe cpu_avx2 --result bench_cpu_precision_avx2

The ``cpu`` recipe trains under bf16 autocast where the CPU has native bf16 (Intel AMX, AMD
``avx512_bf16``).  A CPU without it runs float32, and the ``cpu_float32`` recipe gives that case
as many epochs as fit the same half hour.  This benchmark measures what sets that number: full
training steps (forward, backward, AdamW) of the recipe's model at its batch size, in five
variants taken in rotation, one step each per round,

- bf16 autocast, channels-last images (the ``cpu`` recipe on a CPU with native bf16);
- float32, channels-last (the recipe's memory format, without autocast);
- float32, contiguous (NCHW) images and weights (the other memory format oneDNN takes);
- bf16 and float32, channels-last, each through ``torch.compile`` (the recipes' ``compile`` switch),
  which also records the seconds its first step spends compiling (with no cache, as a first run
  pays them) and each step's time against the same precision without compiling (``--no-compile``
  leaves these two out, e.g. where no C++ compiler is installed);

and reports images per second (median over rounds), the per-round step-time ratio of each variant
to the bf16 one (median and range), and the epochs of 45,000 training images each variant's
steps alone would fit in 30 minutes.  A real epoch also pays for the validation pass, the data
pipeline and Python, so the recipes' epoch counts come from full runs (chapter 07, section 7.9);
the ratio is what carries over from one precision to the other.  The CPU's flags say whether
its bf16 is native; where it is not, bf16 is emulated and its row shows how slow that is.
"""

from __future__ import annotations

import argparse
import statistics
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

# name -> (autocast to bf16, channels-last memory format)
VARIANTS = {
    "bf16, channels-last": (True, True),
    "float32, channels-last": (False, True),
    "float32, contiguous": (False, False),
}
# the same through torch.compile (Inductor): name -> (autocast to bf16, channels-last)
COMPILED = {
    "bf16, channels-last, compiled": (True, True),
    "float32, channels-last, compiled": (False, True),
}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="leave out the torch.compile variants",
    )
    parser.add_argument(
        "--recipe",
        choices=("cpu", "cpu_float32", "cpu_avx2"),
        default="cpu",
        help="whose model and batch size to time (default: cpu)",
    )
    parser.add_argument(
        "--result",
        default="bench_cpu_precision",
        help="the results/ file's name",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write the result here instead of results/",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    recipe = RECIPES[args.recipe]
    batch = recipe.batch_size
    variants = VARIANTS if args.no_compile else {**VARIANTS, **COMPILED}
    models, optimizers, batches = {}, {}, {}
    for name, (_, channels_last) in variants.items():
        # the same initial weights and batch in every variant
        model = seeded_model(recipe, channels_last)
        optimizers[name] = torch.optim.AdamW(model.parameters(), lr=1e-4)
        models[name] = torch.compile(model) if name in COMPILED else model
        batches[name] = synthetic_batch(batch, channels_last)

    steps = {
        name: (
            lambda n=name: train_step(
                models[n], optimizers[n], *batches[n], variants[n][0]
            )
        )
        for name in variants
    }
    # A compiled model compiles during its first step: a one-off cost a run pays on top of its steps.
    # Timed cold, as a learner's first run pays it (a warm on-disk cache would make it seconds).
    if not args.no_compile:
        from torch._inductor import config as inductor_config

        inductor_config.force_disable_caches = True
    compile_s = {
        name: round(steps[name](), 1)
        for name in COMPILED
        if name in variants
    }
    # no variant always runs first
    seconds = in_rotation(steps, args.rounds, alternate=True)
    reference = next(iter(VARIANTS))
    rows = {}
    for name in variants:
        per_s = batch / statistics.median(seconds[name])
        rows[name] = {
            "train_img_per_s": round(per_s, 1),
            "epochs_in_30_min": epochs_in_half_hour(per_s),
            "step_time_over_bf16": ratio_spread(
                seconds[name], seconds[reference]
            ),
        }
        # against the same precision without torch.compile, round by round
        if name in compile_s:
            eager = name.removesuffix(", compiled")
            rows[name]["first_step_s"] = compile_s[name]
            rows[name]["step_time_over_eager"] = ratio_spread(
                seconds[name], seconds[eager]
            )
        r = rows[name]["step_time_over_bf16"]
        line = (
            f"{name:33s} {per_s:7.1f} img/s  {rows[name]['epochs_in_30_min']:5.1f} epochs in 30 min (steps only)  "
            f"step time / bf16: {r['median']:.2f} (range {r['min']:.2f}-{r['max']:.2f})"
        )
        if name in compile_s:
            e = rows[name]["step_time_over_eager"]
            line += (
                f"; / {eager}: {e['median']:.2f} (range {e['min']:.2f}-{e['max']:.2f}), "
                f"first step (compiling) {compile_s[name]:.0f} s"
            )
        print(line)
    flags = cpu_flags()
    native = sorted(f for f in NATIVE_BF16_FLAGS if f in flags)
    print(
        f"native bf16 flags: {', '.join(native) or 'none (bf16 is emulated here)'}"
    )
    out = {
        "recipe": recipe.name,
        "model_kwargs": recipe.model_kwargs,
        "batch_size": batch,
        "rounds": args.rounds,
        "torch_threads": args.threads,
        "train_images": TRAIN_IMAGES,
        "native_bf16_flags": native,
        "variants": rows,
    }
    path = write_result(
        args.result,
        out,
        dataset="synthetic random tensors",
        directory=args.out_dir,
    )
    print(f"written {path}")
    return out


if __name__ == "__main__":
    main()
