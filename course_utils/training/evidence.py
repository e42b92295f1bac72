"""Reading runs against runs, seed by seed (chapters 07 and 08): what counts as an effect.

``compare_seeds`` is the rule the chapters first read differences between two sets of runs with
(chapter 07's ViT against the ResNet, chapter 08's ladder steps and levers): a change counts
only with at least ``MIN_SEEDS`` seeds on each side, every seed beyond every seed of the other
side, and a gap of more than two standard errors.  Its error rates are not what its strictness
suggests; ``error_rates`` measures them by simulation.

``compare_paired`` is the rule with known error rates: the runs of a change and of its reference
share seeds (the same initialisation draws where the models agree, the same order of batches),
so the per-seed differences cancel much of the seed's own effect; a Student-t interval over them
(``references.comparison.paired_interval``, chapter 08's exercise) says "higher" or "lower" when it
excludes zero.  ``compare_family`` reads several changes against one shared reference with Holm's
correction, so that the chance of any false "beyond the noise" among them stays at the level
asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import Callable, Sequence

import torch

from ..references.comparison import paired_interval
from ..references.stats import student_t_cdf, t_quantile

__all__ = [
    "compare_seeds",
    "SeedComparison",
    "MIN_SEEDS",
    "student_t_cdf",
    "t_quantile",
    "compare_paired",
    "PairedComparison",
    "holm",
    "compare_family",
    "error_rates",
    "paired_interval",
]

# Were a change to do nothing, its seeds and the reference's would still fall apart (one side
# wholly above the other) by chance: one time in three with two seeds a side, one in five with
# three against two, one in ten with three a side.  Three a side, plus the two-standard-error
# gap, is the least the course reads a difference from.
MIN_SEEDS = 3


@dataclass(frozen=True)
class SeedComparison:
    """One metric of ``changed`` runs against ``reference`` runs, one value per seed."""

    n: int  # seeds on the side with fewer
    gap: float  # mean(changed) - mean(reference)
    # standard error of the gap; None with a single seed on a side
    se: float | None
    apart: bool  # every changed seed above, or every one below, every reference seed
    verdict: str  # "not measured", "inside the noise", "higher" or "lower"

    def __str__(self) -> str:
        if self.verdict == "not measured":
            return (
                f"not measured ({self.n} seed{'s' if self.n != 1 else ''})"
            )
        if self.verdict == "inside the noise":
            return self.verdict
        return f"{self.verdict}, beyond the noise"


def compare_seeds(
    changed: Sequence[float],
    reference: Sequence[float],
    min_seeds: int = MIN_SEEDS,
) -> SeedComparison:
    """Read ``changed`` against ``reference`` (per-seed values of one metric, e.g. accuracies).

    The verdict is "higher" or "lower" only with at least ``min_seeds`` seeds on each side,
    the two sets of seeds apart (no overlap) and ``|gap| > 2 * se``; with fewer seeds it is
    "not measured", otherwise "inside the noise".  ``se`` uses each side's sample standard
    deviation: sqrt(sd_a^2 / n_a + sd_b^2 / n_b).
    """
    changed, reference = (
        [float(v) for v in changed],
        [float(v) for v in reference],
    )
    if not changed or not reference:
        raise ValueError(
            "compare_seeds: each side needs at least one value (one per seed)"
        )
    n = min(len(changed), len(reference))
    gap = fmean(changed) - fmean(reference)
    se = (
        math.sqrt(
            stdev(changed) ** 2 / len(changed)
            + stdev(reference) ** 2 / len(reference)
        )
        if n > 1
        else None
    )
    apart = min(changed) > max(reference) or max(changed) < min(reference)
    if n < min_seeds:
        verdict = "not measured"
    elif apart and abs(gap) > 2 * se:
        verdict = "higher" if gap > 0 else "lower"
    else:
        verdict = "inside the noise"
    return SeedComparison(n=n, gap=gap, se=se, apart=apart, verdict=verdict)


# --------------------------------------------------------------------------- paired seeds


@dataclass(frozen=True)
class PairedComparison:
    """``changed`` against ``reference``, seed by seed: the mean per-seed difference and its interval."""

    n: int  # seeds both sides ran
    gap: float  # mean over seeds of changed[s] - reference[s]
    low: float  # the interval's ends (nan with fewer than two seeds)
    high: float
    p: float  # two-sided p-value of "no difference" (paired t test; nan with fewer than two seeds)
    level: float  # the interval's confidence level
    verdict: str  # "not measured", "inside the noise", "higher" or "lower"

    def __str__(self) -> str:
        if self.verdict == "not measured":
            return f"not measured ({self.n} paired seed{'s' if self.n != 1 else ''})"
        words = (
            self.verdict
            if self.verdict == "inside the noise"
            else f"{self.verdict}, beyond the noise"
        )
        return f"{words} ({self.gap:+.4f}, {100 * self.level:g}% interval [{self.low:+.4f}, {self.high:+.4f}])"


def compare_paired(
    changed: dict[int, float] | Sequence[float],
    reference: dict[int, float] | Sequence[float],
    *,
    level: float = 0.95,
    min_seeds: int = MIN_SEEDS,
) -> PairedComparison:
    """Read ``changed`` against ``reference`` over the seeds both ran ({seed: value}, or two lists
    in the same seed order).  The interval is mean(d) +- t * sd(d) / sqrt(n) over the per-seed
    differences d; "higher"/"lower" when it excludes 0, with at least ``min_seeds`` seeds."""
    if not isinstance(changed, dict):
        changed = dict(enumerate(changed))
    if not isinstance(reference, dict):
        reference = dict(enumerate(reference))
    seeds = sorted(set(changed) & set(reference), key=str)
    n = len(seeds)
    if n == 0:
        raise ValueError(
            "compare_paired: no seed was run on both sides (pair the runs by seed)"
        )
    if n < 2:
        gap = float(changed[seeds[0]]) - float(reference[seeds[0]])
        return PairedComparison(
            n, gap, math.nan, math.nan, math.nan, level, "not measured"
        )
    d = [float(changed[s]) - float(reference[s]) for s in seeds]
    gap, low, high, verdict = paired_interval(
        [changed[s] for s in seeds], [reference[s] for s in seeds], level
    )
    se = stdev(d) / math.sqrt(n)
    if se == 0:
        p = 0.0 if gap else 1.0
    else:
        p = 2 * (1 - student_t_cdf(abs(gap) / se, n - 1))
    return PairedComparison(
        n,
        gap,
        low,
        high,
        p,
        level,
        "not measured" if n < min_seeds else verdict,
    )


def holm(pvalues: dict[str, float], alpha: float = 0.05) -> dict[str, bool]:
    """Holm's step-down procedure: which of the hypotheses to reject so that the chance of one
    or more false rejections in the family stays at most ``alpha``."""
    order = sorted(pvalues, key=lambda k: pvalues[k])
    rejected, m = {k: False for k in pvalues}, len(pvalues)
    for i, key in enumerate(order):
        if not pvalues[key] <= alpha / (m - i):  # nan never rejects
            break
        rejected[key] = True
    return rejected


def compare_family(
    changes: dict[str, dict[int, float]],
    reference: dict,
    *,
    alpha: float = 0.05,
    min_seeds: int = MIN_SEEDS,
) -> dict[str, PairedComparison]:
    """Changes read together, each against its reference: ``reference`` is one {seed: value}
    that every change shares (levers against one recipe), or {name: {seed: value}}, one per
    change (the steps of a ladder, each against the step before).  A change is "higher" or
    "lower" only when Holm's procedure rejects "no difference" for it at family level ``alpha``;
    its interval is the one that level gives it (Bonferroni's ``alpha / m``, a little wider than
    Holm needs for all but the first)."""
    m = len(changes)
    level = 1 - alpha / max(m, 1)
    per_change = (
        isinstance(reference, dict)
        and bool(reference)
        and all(
            isinstance(v, (dict, list, tuple)) for v in reference.values()
        )
    )
    readings = {
        name: compare_paired(
            seeds,
            reference[name] if per_change else reference,
            level=level,
            min_seeds=min_seeds,
        )
        for name, seeds in changes.items()
    }
    rejected = holm(
        {
            name: r.p
            for name, r in readings.items()
            if r.verdict != "not measured"
        },
        alpha,
    )
    out = {}
    for name, r in readings.items():
        if r.verdict == "not measured":
            out[name] = r
            continue
        verdict = (
            ("higher" if r.gap > 0 else "lower")
            if rejected.get(name)
            else "inside the noise"
        )
        out[name] = PairedComparison(
            r.n, r.gap, r.low, r.high, r.p, level, verdict
        )
    return out


def error_rates(
    rule: Callable[[list[float], list[float]], str] | None,
    n: int,
    *,
    effect: float = 0.0,
    pairing: float = 0.0,
    trials: int = 20000,
    family: int = 1,
    seed: int = 0,
    joint: Callable[[dict[str, list[float]], list[float]], dict[str, str]]
    | None = None,
) -> float:
    """How often ``rule(changed, reference) -> verdict`` says "higher" or "lower", by simulation.

    Per-seed values are standard normal (one standard deviation of seed noise = 1); ``changed``
    adds ``effect``; ``pairing`` is the correlation between the two runs of one seed (0: nothing
    shared).  With ``family > 1``, that many changes share one reference and a trial counts when
    any of them is called: the family-wise rate (every change has the same ``effect``).  ``joint``
    reads a whole family at once (``{name: changed}, reference -> {name: verdict}``, e.g. Holm's
    ``compare_family``) in place of ``rule`` applied to each change alone.  ``effect=0``
    measures false positives, an effect of 1 the power to see one standard deviation.
    """
    g = torch.Generator().manual_seed(seed)
    shared = torch.randn(trials, n, generator=g, dtype=torch.float64)
    ref = math.sqrt(pairing) * shared + math.sqrt(1 - pairing) * torch.randn(
        trials, n, generator=g, dtype=torch.float64
    )
    changes = [
        effect
        + math.sqrt(pairing) * shared
        + math.sqrt(1 - pairing)
        * torch.randn(trials, n, generator=g, dtype=torch.float64)
        for _ in range(family)
    ]
    called = 0
    for t in range(trials):
        reference = ref[t].tolist()
        if joint is not None:
            verdicts = joint(
                {str(i): c[t].tolist() for i, c in enumerate(changes)},
                reference,
            ).values()
        else:
            verdicts = [rule(c[t].tolist(), reference) for c in changes]
        called += any(v in ("higher", "lower") for v in verdicts)
    return called / trials
