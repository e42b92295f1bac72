"""Student's t distribution, exactly, in plain Python (chapter 08: the intervals its readings of
seeds put around a mean difference).  Not graded: the graded ``paired_interval``
(``references/comparison.py``) uses it, and learners may too.
"""

from __future__ import annotations

import math

__all__ = ["student_t_cdf", "t_quantile"]


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with an integer number of degrees of freedom ``df >= 1``
    (the finite sums of Abramowitz & Stegun 26.7.3 and 26.7.4, exact for integer df)."""
    if df < 1 or int(df) != df:
        raise ValueError(
            f"student_t_cdf: df must be a positive integer, got {df!r}"
        )
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # odd: theta + sin(theta) (cos + 2/3 cos^3 + ... ), over pi
        term, total = c, 0.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c * c * (2 * k) / (2 * k + 1)
        a = (
            (2 / math.pi) * (theta + s * total)
            if df > 1
            else (2 / math.pi) * theta
        )
    else:  # even: sin(theta) (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term, total = 1.0, 0.0
        for k in range(1, df // 2 + 1):
            total += term
            term *= c * c * (2 * k - 1) / (2 * k)
        a = s * total
    return 0.5 + 0.5 * a


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on the cdf)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p must be in (0, 1), got {p}")
    low, high = -1.0, 1.0
    while student_t_cdf(low, df) > p:
        low *= 2
    while student_t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if student_t_cdf(mid, df) < p else (low, mid)
    return 0.5 * (low + high)
