"""How often each rule for reading seeds is wrong: false positives and power, by simulation.

    python -m course_utils.experiments.noise_rule            # writes results/ch08_noise_rule.json
    python -m course_utils.experiments.noise_rule --quick    # fewer trials, prints only

Chapter 08 reads its ablation with a rule; this measures the rule.  Per-seed accuracies are drawn
from a normal distribution whose standard deviation is the seed-to-seed noise (the unit of every
effect below); a change either does nothing (``effect`` 0: every "beyond the noise" is a false
positive) or shifts the mean by 1 or 2 standard deviations (how often the rule sees it: power).
``pairing`` is the correlation between a change's run and the reference's run of the same seed
(same initialisation where the models agree, same order of batches): 0 assumes nothing shared,
the case least favourable to a paired reading.  A family is ten changes read against one shared
reference, as chapter 08's levers are: its rate is the chance that at least one is called.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..results import write_result
from ..training.evidence import (
    MIN_SEEDS,
    compare_family,
    compare_paired,
    compare_seeds,
    error_rates,
)
from .sweep import LEVERS

COMMAND = "python -m course_utils.experiments.noise_rule"
FAMILY = len(LEVERS)  # chapter 08's levers against the ladder's top


def _seeds(a, b):
    return compare_seeds(a, b).verdict


def _paired(a, b):
    return compare_paired(a, b).verdict


def _family(changes, reference):
    return {
        name: r.verdict
        for name, r in compare_family(changes, reference).items()
    }


RULES = {
    "compare_seeds": (
        "every seed beyond every seed and |gap| > 2 se (unpaired)",
        _seeds,
        None,
    ),
    "paired_t_holm": (
        "paired t interval at 95%, Holm's correction over a family",
        _paired,
        _family,
    ),
}


def measure(
    trials: int, family_trials: int, seeds=(MIN_SEEDS, 5)
) -> list[dict]:
    rows = []
    for name, (about, rule, joint) in RULES.items():
        for n in seeds:
            row = {
                "rule": name,
                "about": about,
                "seeds": n,
                "false_positive": error_rates(
                    rule, n, trials=trials, seed=1
                ),
                "family_false_positive": error_rates(
                    None if joint else rule,
                    n,
                    family=FAMILY,
                    trials=family_trials,
                    seed=2,
                    joint=joint,
                ),
            }
            for effect in (1, 2):
                for pairing in (0.0, 0.5):
                    row[f"power_{effect}sd_pairing_{pairing:g}"] = (
                        error_rates(
                            rule,
                            n,
                            effect=effect,
                            pairing=pairing,
                            trials=trials,
                            seed=3,
                        )
                    )
            rows.append(row)
            print(
                f"{name:14s} {n} seeds: false positive {row['false_positive']:.3f}, family of {FAMILY} "
                f"{row['family_false_positive']:.3f}, power at 1 sd {row['power_1sd_pairing_0']:.3f} "
                f"(pairing 0.5: {row['power_1sd_pairing_0.5']:.3f}), at 2 sd {row['power_2sd_pairing_0']:.3f}"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer trials, print only (writes only with --out-dir)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write ch08_noise_rule.json here, not in results/",
    )
    args = parser.parse_args(argv)
    trials, family_trials = (2000, 300) if args.quick else (20000, 2000)
    start = time.perf_counter()
    rows = measure(trials, family_trials)
    wall = time.perf_counter() - start
    if args.quick and args.out_dir is None:
        return 0
    data = {
        "trials": trials,
        "family_trials": family_trials,
        "family": FAMILY,
        "quick": args.quick,
        "unit": "one standard deviation of the seed-to-seed noise",
        "rows": rows,
    }
    command = COMMAND + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    path = write_result(
        "ch08_noise_rule",
        data,
        wall_time_s=wall,
        command=command,
        directory=args.out_dir,
        dataset="simulated: normal per-seed values (no training run)",
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
