"""Chapter 08's ``gpu`` recipe on one GPU: whole, or cut to fit a fixed time with the whole run's time measured.

    python -m course_utils.experiments.gpu_recipe --full                        # all its epochs: results/ch08_vit_gpu.json
    python -m course_utils.experiments.gpu_recipe --full --stop-after-minutes 9 # ... in calls of 9 minutes, each continuing
    python -m course_utils.experiments.gpu_recipe --minutes 6                   # as many epochs as fit in 6 minutes
    python -m course_utils.experiments.gpu_recipe --until 1790000000            # ... as fit before a Unix time
    python -m course_utils.experiments.gpu_recipe --epochs 71 --seed 1          # another seed of a stored cut (no probe)

``--full`` trains the recipe as it is (``make train-gpu``), into ``runs/gpu[_seed<s>]``, resuming
there when run again, and writes ``results/ch08_vit_gpu[_seed<s>].json`` with the weights.  When
a GPU is lent for less time than the recipe's 300 epochs, the cut still measures what the
question needs:

1. a probe: two epochs of the recipe's model, data pipeline and mixed precision, whose second
   epoch gives the steady time per epoch (the first holds the start-up: kernel selection, caches);
2. the recipe with its epoch count (and warm-up, in proportion) cut so that the run and its test
   evaluation end before the deadline; every other ingredient unchanged;
3. ``results/ch08_vit_gpu_short.json`` (``..._seed<s>.json`` for seed s > 0; ``ch08_vit_gpu.json``,
   ``make train-gpu``'s result, when the full epochs fit): the run (trainer's summary: history, test accuracy with
   the recipe's views, hardware) plus ``budget``: the probe's seconds per epoch, the deadline's
   seconds, and the full recipe's 300 epochs projected at the run's mean time per epoch.

``torch.compile`` is left off by default: compiling twice (probe and run) would cost more of a short
budget than it saves, and the probe's time per epoch must be the run's.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import tempfile
import time

from ..results import RESULTS_DIR, read_result, write_result
from ..training import data as cdata
from ..training.trainer import train
from .recipes import RECIPES

RESULT = "ch08_vit_gpu_short"
# what make train-gpu writes: the recipe's full epochs
FULL_RESULT = "ch08_vit_gpu"
RESERVE_S = 45  # after the last epoch: the test set's views, the best weights saved, the result written
SAFETY = 1.08  # epochs run a little slower than the probe's (the validation's share varies)


def plan_epochs(
    seconds_left: float, epoch_s: float, full_epochs: int
) -> int:
    """Epochs that fit in ``seconds_left`` at ``epoch_s`` each (with RESERVE_S and SAFETY), at most
    the full recipe's; ValueError when not even two fit."""
    n = math.floor((seconds_left - RESERVE_S) / (epoch_s * SAFETY))
    if n < 2:
        raise ValueError(
            f"gpu_recipe: {seconds_left:.0f} s left at {epoch_s:.1f} s per epoch fits fewer than "
            "2 epochs; give a longer --minutes"
        )
    return min(n, full_epochs)


def full_run(
    recipe: str, seed: int, out: str | None, stop_after_minutes: float | None
) -> None:
    """The recipe as it is (its compile switch included), resumable; ``FULL_RESULT`` with the weights."""
    suffix = "" if seed == 0 else f"_seed{seed}"
    train(
        dataclasses.replace(RECIPES[recipe], seed=seed),
        out or f"runs/{recipe}{suffix}",
        result_name=FULL_RESULT + suffix,
        stop_after_s=None
        if stop_after_minutes is None
        else 60 * stop_after_minutes,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.experiments.gpu_recipe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--full",
        action="store_true",
        help="the recipe's own epochs, resumable (make train-gpu)",
    )
    when.add_argument(
        "--minutes",
        type=float,
        help="time for the whole script (probe, run, test)",
    )
    when.add_argument(
        "--until",
        type=float,
        help="Unix time by which the script must have finished",
    )
    when.add_argument(
        "--epochs",
        type=int,
        help="this many epochs, no probe (another seed of a stored cut)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--recipe", default="gpu", help="the recipe to cut (default gpu)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="keep the recipe's torch.compile",
    )
    parser.add_argument(
        "--compile-mode",
        default=None,
        help="torch.compile's mode (e.g. reduce-overhead: CUDA graphs); implies --compile",
    )
    parser.add_argument(
        "--stop-after-minutes",
        type=float,
        default=None,
        metavar="M",
        help="--full: stop after the last epoch that ends within M minutes (run again to continue)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="run folder (default runs/gpu_short, or runs/gpu with --full)",
    )
    parser.add_argument(
        "--result",
        default=None,
        help=f"a cut's result (default {RESULT}, or {RESULT}_seed<s>); "
        f"a run of the full epochs is always {FULL_RESULT}[_seed<s>]",
    )
    args = parser.parse_args(argv)
    if args.full:
        full_run(args.recipe, args.seed, args.out, args.stop_after_minutes)
        return 0
    if args.stop_after_minutes is not None:
        parser.error(
            "--stop-after-minutes goes with --full (a cut plans its own epochs)"
        )
    result = args.result or (
        RESULT if args.seed == 0 else f"{RESULT}_seed{args.seed}"
    )
    start = time.time()

    full = RECIPES[args.recipe]
    compiled = full.compile and (
        args.compile or args.compile_mode is not None
    )
    base = dataclasses.replace(
        full,
        compile=compiled,
        compile_mode=args.compile_mode if compiled else None,
        seed=args.seed,
    )
    raw = cdata.load_cifar10()
    data = cdata.split_validation(
        raw, val_size=base.val_size, seed=base.seed
    )
    if args.epochs is None:
        deadline = (
            args.until
            if args.until is not None
            else start + 60 * args.minutes
        )
        with tempfile.TemporaryDirectory() as probe_dir:
            probe = train(
                dataclasses.replace(
                    base, name=f"{full.name}_probe", epochs=2
                ),
                probe_dir,
                data=data,
                evaluate_test=False,
            )
        epoch_s = probe["history"][1]["epoch_time_s"]
        epochs = plan_epochs(deadline - time.time(), epoch_s, full.epochs)
        print(
            f"probe: {epoch_s:.1f} s per epoch; training {epochs} of the recipe's {full.epochs} epochs, "
            f"{deadline - time.time():.0f} s left",
            flush=True,
        )
    else:
        deadline, epoch_s, epochs = None, None, args.epochs
    if epochs == full.epochs:
        # the whole schedule fitted: this is the recipe's own run (make train-gpu's result), not a cut
        result = (
            FULL_RESULT
            if args.seed == 0
            else f"{FULL_RESULT}_seed{args.seed}"
        )
    recipe = dataclasses.replace(
        base,
        name=full.name if epochs == full.epochs else f"{full.name}_short",
        epochs=epochs,
        warmup_epochs=max(
            1.0, round(full.warmup_epochs * epochs / full.epochs, 1)
        ),
    )
    out = (args.out or "runs/gpu_short") + (
        "" if args.seed == 0 else f"_seed{args.seed}"
    )
    train(recipe, out, data=data, result_name=result)

    # The trainer also stores the weights beside the result; this model's (tens of MB) are not kept.
    (RESULTS_DIR / f"{result}_model.pth").unlink(missing_ok=True)
    stored = read_result(result)
    run_epoch_s = statistics.fmean(
        h["epoch_time_s"] for h in stored["data"]["history"]
    )
    stored["data"]["budget"] = {
        "recipe_cut_from": full.name,
        "full_epochs": full.epochs,
        "probe_epoch_s": epoch_s,
        "budget_s": None if deadline is None else round(deadline - start, 1),
        "script_s": round(time.time() - start, 1),
        # the full recipe at this run's mean time per epoch (its epochs are the full recipe's epochs)
        "full_recipe_projected_h": round(
            full.epochs * run_epoch_s / 3600, 2
        ),
        "compile": recipe.compile,
        "compile_mode": recipe.compile_mode,
    }
    write_result(
        result,
        stored["data"],
        dataset=stored["provenance"]["dataset"],
        split=stored["provenance"].get("split"),
        wall_time_s=stored["provenance"].get("wall_time_s"),
        git_commit=stored["provenance"].get("git_commit"),
    )
    print(f"wrote {RESULTS_DIR / (result + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
