"""Tools for the chapters' figures and readings (not graded).

``dependence_matrix`` measures, with the full Jacobian, which input positions each output
position depends on: chapter 06 uses it to show that a causal mask lets nothing flow back from
the future.

``compare_seeds`` is the course's one rule for reading a difference between two sets of runs
(chapter 07's ViT against the ResNet, chapter 08's ladder steps and levers): a change counts
only with at least ``MIN_SEEDS`` seeds on each side, every seed beyond every seed of the other
side, and a gap of more than two standard errors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import Callable, Sequence

import torch
from torch import Tensor

__all__ = ["dependence_matrix", "compare_seeds", "SeedComparison", "MIN_SEEDS"]

# Were a change to do nothing, its seeds and the reference's would still fall apart (one side
# wholly above the other) by chance: one time in three with two seeds a side, one in five with
# three against two, one in ten with three a side.  Three a side, plus the two-standard-error
# gap, is the least the course reads a difference from.
MIN_SEEDS = 3


def dependence_matrix(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """``D[t, s] = || d fn(x)[t] / d x[s] ||``: how much output position t depends on input position s.

    ``x`` is ``(n, d)`` (one sequence); ``fn`` maps ``(1, n, d) -> (1, n, d_out)``.  A causal
    layer gives a lower-triangular ``D`` (zero above the diagonal: nothing flows back from the
    future); the diagonal is non-zero when each position sees itself.  Computed with the full
    Jacobian, so a zero entry is exactly zero, not a cancellation in a sum of gradients.
    """
    if x.dim() != 2:
        raise ValueError(f"dependence_matrix: x must be one sequence of shape (n, d), got {tuple(x.shape)}")
    jac = torch.autograd.functional.jacobian(lambda inp: fn(inp.unsqueeze(0)).squeeze(0), x)  # (n, d_out, n, d)
    return jac.pow(2).sum(dim=(1, 3)).sqrt()


@dataclass(frozen=True)
class SeedComparison:
    """One metric of ``changed`` runs against ``reference`` runs, one value per seed."""
    n: int  # seeds on the side with fewer
    gap: float  # mean(changed) - mean(reference)
    se: float | None  # standard error of the gap; None with a single seed on a side
    apart: bool  # every changed seed above, or every one below, every reference seed
    verdict: str  # "not measured", "inside the noise", "higher" or "lower"

    def __str__(self) -> str:
        if self.verdict == "not measured":
            return f"not measured ({self.n} seed{'s' if self.n != 1 else ''})"
        if self.verdict == "inside the noise":
            return self.verdict
        return f"{self.verdict}, beyond the noise"


def compare_seeds(changed: Sequence[float], reference: Sequence[float], min_seeds: int = MIN_SEEDS) -> SeedComparison:
    """Read ``changed`` against ``reference`` (per-seed values of one metric, e.g. accuracies).

    The verdict is "higher" or "lower" only with at least ``min_seeds`` seeds on each side,
    the two sets of seeds apart (no overlap) and ``|gap| > 2 * se``; with fewer seeds it is
    "not measured", otherwise "inside the noise".  ``se`` uses each side's sample standard
    deviation: sqrt(sd_a^2 / n_a + sd_b^2 / n_b).
    """
    changed, reference = [float(v) for v in changed], [float(v) for v in reference]
    if not changed or not reference:
        raise ValueError("compare_seeds: each side needs at least one value (one per seed)")
    n = min(len(changed), len(reference))
    gap = fmean(changed) - fmean(reference)
    se = math.sqrt(stdev(changed) ** 2 / len(changed) + stdev(reference) ** 2 / len(reference)) if n > 1 else None
    apart = min(changed) > max(reference) or max(changed) < min(reference)
    if n < min_seeds:
        verdict = "not measured"
    elif apart and abs(gap) > 2 * se:
        verdict = "higher" if gap > 0 else "lower"
    else:
        verdict = "inside the noise"
    return SeedComparison(n=n, gap=gap, se=se, apart=apart, verdict=verdict)
