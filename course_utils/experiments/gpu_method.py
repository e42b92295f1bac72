"""Chapter 08's method at chapter 7's half hour, made on a GPU lent for minutes: one command.

    python -m course_utils.experiments.gpu_method --minutes 4 --out-dir "$OUT"   # on the GPU machine (make gpu-method)

Each run of the ``half_hour`` budget (``experiments.sweep``: the report's configuration, then each
of the method's steps, 3 seeds a step, every run spending the training FLOPs of the cpu recipe's
half hour) takes half an hour or more on 2 CPU cores and seconds on a GPU; the budget is compute,
not time, so a run is the same run on either.  The command makes the runs that
``results/ch08_ablation_half_hour.json`` does not hold yet, step by step, and starts one only when
the runs so far say it ends before the deadline (a run cut by the machine going back would be
lost).  After every run it rewrites that file and copies it to ``--out-dir``, so whatever finished
comes back; the next window (or ``make method-half-hour`` on a CPU) makes the rest.

When every run is recorded and the last step's runs are on this machine, it reads the test set
once for them (``sweep.read_test_once``: results/ch08_method_test_half_hour.json); the last step
is the method's end, fixed before any run.  A GPU machine runs it with its own ``python3``; carry
``.data/`` and ``.code-stamp.json`` as for ``make gpu-window``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from ..results import RESULTS_DIR, read_result
from ..training import data as cdata
from ..training import final_reading, sweep
from ..training.sweep import Budget, Variants
from . import sweep as ch08

__all__ = ["make_runs"]

SEEDS = (0, 1, 2)
# after the last run: the test reading and the copies
RESERVE_S = 20


def _recorded(result: str) -> dict:
    try:
        return read_result(result)["data"]["runs"]
    except FileNotFoundError:
        return {}


def make_runs(
    budget: Budget,
    table: Variants,
    deadline: float,
    *,
    result: str,
    test_result: str,
    seeds: tuple[int, ...] = SEEDS,
    root: Path = sweep.SWEEP_DIR,
    split: cdata.Split | None = None,
    out_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    """Make ``table``'s missing runs, step by step, each only when it should end before ``deadline``
    (``time.time()`` seconds); then, with every run recorded, the test reading of the last step.
    Returns ``{"made": [(step, seed), ...], "left": [...], "test_read": bool}``."""
    split = split if split is not None else sweep.load_budget_data(budget)
    recorded = _recorded(result)
    # a recorded run counts while its step is unchanged (a redefined step's old runs are another's)
    todo = [
        (name, seed)
        for name, (_, _, recipe) in table.items()
        for seed in seeds
        if str(seed) not in recorded.get(name, {})
        or sweep.recipe_change(recorded[name][str(seed)]["recipe"], recipe)
    ]
    made, seconds_per_flop = [], None
    for name, seed in list(todo):
        recipe = table[name][2]
        flops = (
            sweep.flops_of(recipe) * len(split.train_images) * recipe.epochs
        )
        # a first run is never known to be too long: the window is sized for one at least
        expected = (
            0.0 if seconds_per_flop is None else seconds_per_flop * flops
        )
        if time.time() + expected > deadline - RESERVE_S:
            log(
                f"[method] {name} (seed {seed}) would end after the deadline (about {expected:.0f} s); "
                "stopping here: the same command continues"
            )
            break
        began = time.time()
        sweep.ablation(
            budget,
            table,
            [seed],
            only=[name],
            result=result,
            split=split,
            root=root,
            log=log,
        )
        seconds_per_flop = (time.time() - began) / flops
        made.append((name, seed))
        todo.remove((name, seed))
        _copy(out_dir, result)
    last = list(table)[-1]
    test_read = False
    here = all(
        (
            Path(root) / budget.name / last / f"seed{s}" / "checkpoint.pt"
        ).exists()
        for s in seeds
    )
    if not todo and not _recorded(test_result) and here:
        final_reading.read_test_once(
            budget,
            table,
            last,
            list(seeds),
            test_result,
            root=root,
            split=split,
            log=log,
        )
        test_read = True
        _copy(out_dir, test_result)
    elif not todo and not here and not _recorded(test_result):
        log(
            f"[method] every run is recorded, but the last step's runs are not on this machine: "
            f"the test reading needs them (make them again here: --only {last})"
        )
    return {"made": made, "left": todo, "test_read": test_read}


def _copy(out_dir: Path | None, result: str) -> None:
    if out_dir is None:
        return
    target = Path(out_dir) / "results"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(RESULTS_DIR / f"{result}.json", target / f"{result}.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.experiments.gpu_method",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--minutes",
        type=float,
        required=True,
        help="time for the whole command",
    )
    parser.add_argument(
        "--out-dir",
        default=None,
        help="copy the results here after each run",
    )
    args = parser.parse_args(argv)
    deadline = time.time() + 60 * args.minutes
    budget = ch08.BUDGETS["half_hour"]
    out = make_runs(
        budget,
        ch08.variants(budget),
        deadline,
        result=ch08.result_name("ablation", budget),
        test_result=ch08.result_name("method-test", budget),
        out_dir=Path(args.out_dir) if args.out_dir else None,
    )
    print(
        f"[method] made {len(out['made'])} run(s); {len(out['left'])} left; "
        f"test read: {out['test_read']}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
