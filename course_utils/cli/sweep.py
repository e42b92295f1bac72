"""Chapter 08's sweeps: ablation, learning-rate range test, Optuna search (resumable).

    python -m course_utils.cli.sweep list --budget mini                 # the variants of a budget
    python -m course_utils.cli.sweep lr-range --budget mini
    python -m course_utils.cli.sweep ablation --budget mini --seeds 0 1 2 --only baseline noam
    python -m course_utils.cli.sweep search --budget mini --trials 30

The budgets, variants and runs: ``training/sweep.py``.  Each writes ``results/ch08_<what>_<budget>.json``
(``--result`` names another file).
"""
from __future__ import annotations

import argparse
import sys
import time

from ..results import code_version, write_result
from ..training import data as cdata
from ..training.sweep import BUDGETS, LADDER, ablation, load_budget_data, lr_range_test, search, variants

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.cli.sweep", description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["ablation", "lr-range", "search", "list"])
    parser.add_argument("--budget", default="mini", choices=sorted(BUDGETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--only", nargs="+", default=None, help="ablation: these variants only")
    parser.add_argument("--adopt", nargs="+", default=[], metavar="VARIANT=RUN_DIR",
                        help="ablation: count a finished run with the same recipe as this variant's")
    parser.add_argument("--trials", type=int, default=30, help="search: total number of trials")
    parser.add_argument("--rerun-seeds", type=int, nargs="*", default=[1, 2, 3],
                        help="search: train the best trial again with these seeds (fresh, unpruned)")
    parser.add_argument("--result", default=None, help="result name (default ch08_<what>_<budget>)")
    args = parser.parse_args(argv)
    budget = BUDGETS[args.budget]
    result = args.result or f"ch08_{args.what.replace('-', '_')}_{budget.name}"
    start, commit = time.perf_counter(), code_version()
    if args.what == "list":
        for name, (part, about, recipe) in variants(budget).items():
            print(f"{part:6s} {name:16s} {about}")
        return 0
    if args.what == "ablation":
        adopted = dict(item.split("=", 1) for item in args.adopt)
        ablation(budget, args.seeds, args.only, result, adopted=adopted)
    elif args.what == "search":
        search(budget, args.trials, result, rerun_seeds=tuple(args.rerun_seeds))
    else:
        top = list(variants(budget).values())[len(LADDER) - 1][2]
        out = lr_range_test(top, load_budget_data(budget))
        out["recipe"] = top.to_dict()
        write_result(result, out, dataset=cdata.load_cifar10().source, split="training batches (no selection)",
                     wall_time_s=time.perf_counter() - start, git_commit=commit)
        print(f"lr at the lowest smoothed loss {out['lr_at_min_loss']:.2e}; suggested {out['suggested_lr']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
