"""The stopping rule behind the replay's swap decision: bounds that stay valid however often
they are looked at.

The replay checks for a swap after every verdict and stops at the first. Bounds taken at a fixed
normal quantile hold at any *one* look, but checked after every verdict a chance separation
turns up sooner or later, and among equally good models a swap gets suggested far more often
than the level promises (optional stopping). (A reply's ``bench.suggest`` keeps the fixed
quantile, ``panel.suggest``: these bounds need about twice the evidence, and a suggestion only
informs a person; docs/statistics.md gives the measured trade-off.) These
bounds are a *confidence sequence*: with probability at least ``1 - alpha`` a model's bound
holds its true rate at every count of evidence at once, so stopping at the first look where
two bounds part keeps the error at ``alpha``.

The boundary is Robbins' normal mixture. For evidence in [0, 1] (a verdict is useful or not),
each unit's deviation from the true rate is sub-Gaussian with variance at most 1/4, and with
``v = n / 4``

    P(for some n: |S_n - n·p| >= sqrt((v + r) · ln((v + r) / (r · alpha²)))) <= alpha

(Ville's inequality applied to the mixture martingale). Written as a multiplier of the
standard error ``0.5 / sqrt(n)`` that is ``z(n) = sqrt((1 + R / n) · ln((1 + n / R) / alpha²))``
with ``R = 4r`` counted in units of evidence. ``R = RHO`` puts the tightest point near 100 to
300 units, where decisions on a roster of about twenty are made; the multiplier grows only
with the logarithm of ``n`` beyond it.

Several models are compared at once, so ``alpha`` is split among the ``family`` of models
whose bounds the rule reads (Bonferroni over candidates and members): if every bound holds,
no model equal to a member can be suggested instead of it.

Invariants: bounds only depend on the counts; more evidence never widens a bound by more than
the slow logarithmic growth of ``z``; no evidence gives the whole range.
"""

from __future__ import annotations

import math

ALPHA = 0.05  # the chance, over all looks and all compared models, of any false swap
RHO = 10.0  # units of evidence where the boundary is tightest (see the docstring)


def anytime_z(n: float, family: int, alpha: float = ALPHA) -> float:
    """The multiplier of a standard error that holds at every ``n`` at once, at a family-wise
    ``alpha`` over ``family`` models; infinite with no evidence."""
    if n <= 0:
        return math.inf
    a = alpha / max(1, family)
    return math.sqrt((1.0 + RHO / n) * math.log((1.0 + n / RHO) / (a * a)))


def radius(n: int, family: int, alpha: float = ALPHA) -> float:
    """Half the width of a useful rate's bounds after ``n`` verdicts (may exceed 1)."""
    if n <= 0:
        return math.inf
    return 0.5 * anytime_z(n, family, alpha) / math.sqrt(n)


def rate_bounds(
    useful: int, not_useful: int, family: int, alpha: float = ALPHA
) -> tuple[float, float]:
    """``(low, high)`` on a model's useful rate from its verdict counts, held within [0, 1]."""
    n = useful + not_useful
    if n <= 0:
        return 0.0, 1.0
    mean, r = useful / n, radius(n, family, alpha)
    return max(0.0, mean - r), min(1.0, mean + r)


def swap(
    counts: dict, members, family: int | None = None, alpha: float = ALPHA
) -> tuple[str, str] | None:
    """``(candidate, member)`` to suggest on useful rates, or None. ``counts``: alias ->
    ``(useful, not_useful)``, members included. The candidate with the highest low bound is
    suggested instead of the member with the lowest high bound when the two bounds part.
    ``family`` defaults to every model in ``counts``."""
    family = len(counts) if family is None else family
    weak = top = None
    for alias, (useful, not_useful) in counts.items():
        low, high = rate_bounds(useful, not_useful, family, alpha)
        if alias in members:
            if useful + not_useful and (weak is None or (high, alias) < weak):
                weak = (high, alias)
        elif useful + not_useful and (top is None or (low, alias) > top):
            top = (low, alias)
    if weak is None or top is None or not top[0] > weak[0]:
        return None
    return top[1], weak[1]
