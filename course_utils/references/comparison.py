"""Reading a change against its reference over paired seeds (chapter 08 reference: ``paired_interval``)."""

from __future__ import annotations

import math
from statistics import fmean, stdev
from typing import Sequence

from .stats import t_quantile

__all__ = ["paired_interval", "VERDICTS"]

VERDICTS = ("higher", "lower", "inside the noise")


def paired_interval(
    changed: Sequence[float], reference: Sequence[float], level: float = 0.95
) -> tuple[float, float, float, str]:
    """Per-seed values of a change and of its reference, in the same seed order (``changed[i]`` and
    ``reference[i]`` ran with seed i) -> ``(mean, low, high, verdict)``.

    The differences ``d[i] = changed[i] - reference[i]`` cancel what a seed does to both runs;
    ``mean`` is their mean and ``[low, high]`` the Student-t interval at ``level``,
    ``mean -+ t * sd(d) / sqrt(n)`` with ``t`` the ``(1 + level) / 2`` quantile of Student's t with
    ``n - 1`` degrees of freedom and ``sd`` the sample standard deviation (divided by ``n - 1``).
    The verdict is "higher" when the interval lies above zero, "lower" when below, and
    "inside the noise" when it holds zero.
    """
    changed, reference = (
        [float(v) for v in changed],
        [float(v) for v in reference],
    )
    if len(changed) != len(reference):
        raise ValueError(
            f"paired_interval: {len(changed)} changed values against {len(reference)} reference "
            "values; pass one of each per seed, in the same seed order"
        )
    if len(changed) < 2:
        raise ValueError(
            f"paired_interval: {len(changed)} seed(s); an interval needs at least two pairs"
        )
    if not 0.0 < level < 1.0:
        raise ValueError(
            f"paired_interval: level must be between 0 and 1 (e.g. 0.95), got {level!r}"
        )
    d = [c - r for c, r in zip(changed, reference)]
    n, mean = len(d), fmean(d)
    half = t_quantile(0.5 + level / 2, n - 1) * stdev(d) / math.sqrt(n)
    low, high = mean - half, mean + half
    verdict = (
        "higher" if low > 0 else "lower" if high < 0 else "inside the noise"
    )
    return mean, low, high, verdict
