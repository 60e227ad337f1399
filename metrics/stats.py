"""The statistics of evidence: how sure we are of a useful rate, of a mean, of a difference.

``wilson(useful, n)`` is the Wilson score interval for a proportion (Wilson, 1927). Unlike the
textbook ``p ± z·sqrt(p(1-p)/n)`` it stays inside [0, 1] and does not collapse to a point at 0 or
n useful answers, so three useful verdicts out of three read as "somewhere between 44% and 100%",
not "100%". Invariants: ``0 <= low <= high <= 1``; no verdicts give ``(0.0, 1.0)`` (nothing
known); more verdicts at the same rate never widen the interval.

Student's t distribution (``t_cdf``, ``t_sf``, ``t_quantile``) is computed from the regularized
incomplete beta function (``betainc``, by its continued fraction, evaluated with Lentz's
method as in Numerical Recipes §6.4): ``P(T > t) = I_x(df/2, 1/2) / 2`` with
``x = df / (df + t²)``. The upper tail is computed directly, never as ``1 - cdf``, so a p-value
far out keeps its digits. ``t_interval`` is the t interval on a mean; ``holm`` is Holm's (1979)
step-down correction of several p-values; ``paired_sample_size`` is how many pairs a one-sided
paired t test needs to reach a given power. Only the standard library is used.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

Z95 = 1.959963984540054  # two-sided 95%: the normal quantile at 0.975


def wilson(useful: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The ``(low, high)`` bounds of the useful rate after ``useful`` of ``n`` useful verdicts."""
    if (
        isinstance(useful, bool)
        or isinstance(n, bool)
        or not isinstance(useful, int)
        or not isinstance(n, int)
        or not 0 <= useful <= n
    ):
        raise ValueError(
            f"wilson() needs whole counts with 0 <= useful <= n, not {useful!r} of {n!r}"
        )
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


# -- Student's t -----------------------------------------------------------------------------------
_TINY = 1e-300
_EPS = 1e-15
_TERMS = 10_000  # the continued fraction converges in about sqrt(max(a, b)) terms; a bound


def _fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (Numerical Recipes' ``betacf``, by Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _TERMS):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge for a={a}, b={b}, x={x}")


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """``I_x(a, b)`` given ``x`` and ``y = 1 - x`` (each computed where it is exact)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1.0) / (a + b + 2.0):  # where the fraction converges fast; else by symmetry
        return front * _fraction(a, b, x) / a
    return 1.0 - front * _fraction(b, a, y) / b


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``, for ``a, b > 0``."""
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a > 0 and b > 0, not {a!r}, {b!r}")
    if not 0 <= x <= 1:
        raise ValueError(f"betainc needs x from 0 to 1, not {x!r}")
    return _betainc(a, b, x, 1.0 - x)


def _check_df(df: float) -> None:
    if isinstance(df, bool) or not isinstance(df, (int, float)) or not df > 0:
        raise ValueError(f"the t distribution needs degrees of freedom above 0, not {df!r}")


def _tail(t: float, df: float) -> float:
    """``P(T > |t|)``."""
    if math.isinf(t):
        return 0.0
    t2 = t * t
    if math.isinf(t2):
        return 0.0
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


def t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom: a one-sided p-value."""
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t_sf needs a number, not nan")
    tail = _tail(t, df)
    return tail if t > 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df`` degrees of freedom."""
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t_cdf needs a number, not nan")
    tail = _tail(t, df)
    return tail if t < 0 else 1.0 - tail


def _t_pdf(t: float, df: float) -> float:
    return math.exp(
        math.lgamma((df + 1) / 2)
        - math.lgamma(df / 2)
        - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(t * t / df)
    )


@lru_cache(maxsize=4096)  # a pure function asked the same few (p, df) again and again
def t_quantile(p: float, df: float) -> float:
    """The ``t`` with ``P(T <= t) = p``: exact for 1 and 2 degrees of freedom, otherwise
    Newton's method on the upper tail, kept inside a bracket that bisection narrows, from the
    Cornish-Fisher expansion of the normal quantile."""
    _check_df(df)
    if not 0 < p < 1:  # nan fails this too
        raise ValueError(f"a quantile needs a probability between 0 and 1, not {p!r}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    q = 1.0 - p
    z = NormalDist().inv_cdf(p)
    t = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    lo, hi = 0.0, max(t, 1.0)
    while _tail(hi, df) > q:  # the bracket: P(T > lo) > q >= P(T > hi)
        lo, hi = hi, hi * 2
    t = min(max(t, lo), hi)
    for _ in range(200):
        excess = _tail(t, df) - q
        if excess > 0:
            lo = t
        else:
            hi = t
        step = excess / _t_pdf(t, df)
        if abs(step) <= 1e-14 * max(1.0, t):
            return t + step
        t = t + step
        if not lo < t < hi:  # Newton left the bracket: bisect instead
            t = (lo + hi) / 2
    return t


def t_interval(values, level: float = 0.95) -> tuple[float, float] | None:
    """The two-sided ``level`` interval on the mean of ``values`` (Student's t), or None with
    fewer than two values."""
    values = list(values)
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile((1 + level) / 2, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


# -- several tests at once, and how much evidence one needs ----------------------------------------
def holm(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: rejecting every test whose
    adjusted p is at most alpha keeps the chance of any false rejection at most alpha."""
    ps = list(pvalues)
    k = len(ps)
    adjusted = [1.0] * k
    running = 0.0
    for rank, i in enumerate(sorted(range(k), key=lambda j: ps[j])):
        running = max(running, min(1.0, (k - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


MOST_PAIRS = 100_000  # past this, no race settles it: ``paired_sample_size`` says None


def paired_sample_size(
    sd: float, distance: float, *, alpha: float = 0.05, power: float = 0.8, most: int = MOST_PAIRS
) -> int | None:
    """How many pairs a one-sided paired t test at level ``alpha`` needs to settle, with
    probability ``power``, a mean difference ``distance`` away from the margin, when the
    differences spread by ``sd``: the smallest ``n >= 2`` with
    ``sqrt(n) * |distance| / sd >= t(1 - alpha, n - 1) + t(power, n - 1)`` (the usual t-corrected
    normal formula; within a pair of the exact noncentral-t answer). None when the distance is
    0 or the answer is beyond ``most``."""
    if not sd > 0:
        raise ValueError(f"a sample size needs a spread above 0, not {sd!r}")
    effect = abs(distance) / sd
    if effect == 0:
        return None
    z = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)
    low = (z / effect) ** 2  # the normal answer, never above the t answer
    if low > most:
        return None
    n = max(2, math.ceil(low))
    while n <= most:  # the condition only ever turns true as n grows: its first n
        if math.sqrt(n) * effect >= t_quantile(1 - alpha, n - 1) + t_quantile(power, n - 1):
            return n
        n += 1
    return None
