"""The ``gpu`` recipe cut to fit a fixed time on one GPU, with the full recipe's time measured.

    python -m benchmarks.gpu_recipe --minutes 6          # as many epochs as fit in 6 minutes
    python -m benchmarks.gpu_recipe --until 1790000000   # ... as fit before a Unix time
    python -m benchmarks.gpu_recipe --epochs 71 --seed 1 # another seed of a stored cut (no probe)

Chapter 08's ``gpu`` recipe trains 300 epochs (``make train-gpu``).  When a GPU is lent for less
time than that, this script still measures what the question needs:

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
import tempfile
import time

from course_utils.results import RESULTS_DIR, read_result, write_result
from course_utils.training import data as cdata
from course_utils.training.recipes import RECIPES
from course_utils.training.trainer import train

RESULT = "ch08_vit_gpu_short"
FULL_RESULT = "ch08_vit_gpu"  # what make train-gpu writes: the recipe's full epochs
RESERVE_S = 45  # after the last epoch: the test set's views, the best weights saved, the result written
SAFETY = 1.08  # epochs run a little slower than the probe's (the validation's share varies)


def plan_epochs(seconds_left: float, epoch_s: float, full_epochs: int) -> int:
    """Epochs that fit in ``seconds_left`` at ``epoch_s`` each (with RESERVE_S and SAFETY), at most
    the full recipe's; ValueError when not even two fit."""
    n = math.floor((seconds_left - RESERVE_S) / (epoch_s * SAFETY))
    if n < 2:
        raise ValueError(f"gpu_recipe: {seconds_left:.0f} s left at {epoch_s:.1f} s per epoch fits fewer than "
                         "2 epochs; give a longer --minutes")
    return min(n, full_epochs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--minutes", type=float, help="time for the whole script (probe, run, test)")
    when.add_argument("--until", type=float, help="Unix time by which the script must have finished")
    when.add_argument("--epochs", type=int, help="this many epochs, no probe (another seed of a stored cut)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipe", default="gpu", help="the recipe to cut (default gpu)")
    parser.add_argument("--compile", action="store_true", help="keep the recipe's torch.compile")
    parser.add_argument("--compile-mode", default=None,
                        help="torch.compile's mode (e.g. reduce-overhead: CUDA graphs); implies --compile")
    parser.add_argument("--out", default="runs/gpu_short")
    parser.add_argument("--result", default=None, help=f"a cut's result (default {RESULT}, or {RESULT}_seed<s>); "
                        f"a run of the full epochs is always {FULL_RESULT}[_seed<s>]")
    args = parser.parse_args()
    result = args.result or (RESULT if args.seed == 0 else f"{RESULT}_seed{args.seed}")
    start = time.time()

    full = RECIPES[args.recipe]
    compiled = full.compile and (args.compile or args.compile_mode is not None)
    base = dataclasses.replace(full, compile=compiled, compile_mode=args.compile_mode if compiled else None,
                               seed=args.seed)
    raw = cdata.load_cifar10()
    data = cdata.split_validation(raw, val_size=base.val_size, seed=base.seed)
    if args.epochs is None:
        deadline = args.until if args.until is not None else start + 60 * args.minutes
        with tempfile.TemporaryDirectory() as probe_dir:
            probe = train(dataclasses.replace(base, name=f"{full.name}_probe", epochs=2), probe_dir, data=data,
                          evaluate_test=False)
        epoch_s = probe["history"][1]["epoch_time_s"]
        epochs = plan_epochs(deadline - time.time(), epoch_s, full.epochs)
        print(f"probe: {epoch_s:.1f} s per epoch; training {epochs} of the recipe's {full.epochs} epochs, "
              f"{deadline - time.time():.0f} s left", flush=True)
    else:
        deadline, epoch_s, epochs = None, None, args.epochs
    if epochs == full.epochs:
        # the whole schedule fitted: this is the recipe's own run (make train-gpu's result), not a cut
        result = FULL_RESULT if args.seed == 0 else f"{FULL_RESULT}_seed{args.seed}"
    recipe = dataclasses.replace(base, name=full.name if epochs == full.epochs else f"{full.name}_short",
                                 epochs=epochs,
                                 warmup_epochs=max(1.0, round(full.warmup_epochs * epochs / full.epochs, 1)))
    out = args.out if args.seed == 0 else f"{args.out}_seed{args.seed}"
    train(recipe, out, data=data, result_name=result)

    # The trainer also stores the weights beside the result; this model's (tens of MB) are not kept.
    (RESULTS_DIR / f"{result}_model.pth").unlink(missing_ok=True)
    stored = read_result(result)
    run_epoch_s = statistics.fmean(h["epoch_time_s"] for h in stored["data"]["history"])
    stored["data"]["budget"] = {
        "recipe_cut_from": full.name, "full_epochs": full.epochs, "probe_epoch_s": epoch_s,
        "budget_s": None if deadline is None else round(deadline - start, 1),
        "script_s": round(time.time() - start, 1),
        # the full recipe at this run's mean time per epoch (its epochs are the full recipe's epochs)
        "full_recipe_projected_h": round(full.epochs * run_epoch_s / 3600, 2),
        "compile": recipe.compile, "compile_mode": recipe.compile_mode,
    }
    write_result(result, stored["data"], dataset=stored["provenance"]["dataset"],
                 split=stored["provenance"].get("split"), wall_time_s=stored["provenance"].get("wall_time_s"),
                 git_commit=stored["provenance"].get("git_commit"))
    print(f"wrote {RESULTS_DIR / (result + '.json')}")


if __name__ == "__main__":
    main()
