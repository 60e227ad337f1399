"""Interval arithmetic for verdict counts: how sure we are of a useful rate.

``wilson(useful, n)`` is the Wilson score interval for a proportion (Wilson, 1927). Unlike the
textbook ``p ± z·sqrt(p(1-p)/n)`` it stays inside [0, 1] and does not collapse to a point at 0 or
n useful answers, so three useful verdicts out of three read as "somewhere between 44% and 100%",
not "100%". Invariants: ``0 <= low <= high <= 1``; no verdicts give ``(0.0, 1.0)`` (nothing
known); more verdicts at the same rate never widen the interval.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # two-sided 95%: the normal quantile at 0.975


def wilson(useful: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The ``(low, high)`` bounds of the useful rate after ``useful`` of ``n`` useful verdicts."""
    if isinstance(useful, bool) or isinstance(n, bool) or not isinstance(useful, int) \
            or not isinstance(n, int) or not 0 <= useful <= n:
        raise ValueError(f"wilson() needs whole counts with 0 <= useful <= n, not {useful!r} "
                         f"of {n!r}")
    if n == 0:
        return 0.0, 1.0
    return wilson_rate(useful / n, n, z)


def wilson_rate(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The bounds for a rate ``p`` observed over ``n`` independent units, where ``p`` need not
    be a whole count over ``n``: a mean of per-unit means (a task asked in several epochs is one
    unit, as its answers are not independent of each other)."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z2 / (4 * n * n)) / denom
    # exactly 0 and 1 at the extremes, where rounding would leave a hair either side
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return low, high


def clearly_above(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when interval ``a`` lies wholly above ``b``: the two do not overlap."""
    return a[0] > b[1]
