"""The sequential rule of a job raced more than once, and the "how many more runs" advice.

A job may be raced again (``race again``): each race of it is a **look** at the same evidence,
grown by that race's runs. Testing every look at the full level would let a user who races
again until a model is named name one at the margin far more often than ``alpha`` (three looks
at 5% each name such a model about 11% of the time). This module holds the rule that keeps the
chance of naming a model that is not good enough at most ``alpha`` **summed over every look**.

**The rule: alpha spent over planned looks.** A job has at most ``LOOKS`` looks (default 5).
Look ``k`` is given the share ``alpha(k / LOOKS) - alpha((k - 1) / LOOKS)`` of the error, by
the Pocock-type spending function of Lan and DeMets (1983), ``alpha(t) = alpha · ln(1 + (e - 1)
· t)``, which spends more of it early than late: at ``alpha`` 0.05 the five looks test at
1.48%, 1.14%, 0.93%, 0.78% and 0.68%. The verdict at look ``k`` is the usual paired test
(``verdict.measure_test``, Holm across candidates) at that look's share instead of ``alpha``.

Assumptions, and why the rule holds without more:

* Each look's test keeps its own level: the paired t test on the unit differences (normal
  enough, their spread estimated from the same units, with the rounding of whole marks
  added; on simulated whole-mark races it holds its level at every share above).
* The shares are added, never combined through the looks' correlation (Bonferroni across
  looks): by the union bound the chance that *any* look names a model not good enough is at
  most the sum of the shares, ``alpha``, whatever the looks' sizes and however they depend on
  each other. Exact group-sequential boundaries would give the later looks a little more, but
  they rest on normal theory with a known spread, which a few whole marks do not give.
* The information fraction is the look's number over ``LOOKS``: a look's share is fixed before
  its data are seen, so a user who races again with more runs, or fewer, cannot buy a larger
  share. A look bigger than the first gets no more of the error for it.
* A job's looks are counted by the job's record (``metrics.race.jobs``); a fresh race of the
  same job starts a new budget, and the race's report warns of it.

The cost: the first look tests at 1.48% rather than 5%, so a race of one look needs more runs
to name a model (about 1.5 times as many at 80% power); ``scripts/bench_race.py --sequential``
prints the power by look.

**The advice.** An undecided candidate's "more runs" is a range, never one number: the units
(runs with one input, inputs with several) the next look's test needs to show a candidate as
good as the pinned model good enough with probability ``power`` (0.8), if the differences'
spread is at the low or the high end of its two-sided ``SPREAD_LEVEL`` interval (chi-square on
the degrees of freedom it was measured with). The spread is pooled over the candidates tested on
that measure (assumed alike), so a race of several candidates measures it better than any one of
them; their differences share the pinned model's runs, so the pooled degrees of freedom somewhat
overstate what was measured. The distance to the margin is the margin itself (the candidate as
good as the pinned model), not the observed mean, which a few runs measure too loosely to plan
by (planned from it, two reruns of one 2-run race asked for 3 and 916 more). The spread planned
from is the spread seen tempered by an assumed ``ASSUMED_SPREAD`` points counted as ``PRIOR_DF``
degrees of freedom (a conjugate prior on the variance: the variances averaged by their degrees
of freedom, and the interval taken on their sum), so three runs of one candidate do not swing
the advice tenfold from one rerun to the next; the more units are seen, the less the assumption
weighs. With fewer than ``SPREAD_UNITS`` units (under two degrees of freedom) the spread is not
measured at all: the advice then rests on the assumed spread alone, and says so ("assumes a
spread of 2 points, not yet measured").
"""

from __future__ import annotations

import math

from panelist.metrics.stats import paired_sample_size

LOOKS = 5  # planned looks of one job
SPREAD_UNITS = 3  # units that measure a spread (two degrees of freedom)
SPREAD_LEVEL = 0.8  # the two-sided level of the spread's interval behind the advice
ASSUMED_SPREAD = 2.0  # points of 10: two runs whose marks each vary by about a mark
PRIOR_DF = 4  # the degrees of freedom the assumed spread counts as
SPENDING = "Pocock-type alpha spending (Lan-DeMets) over 5 planned looks"


def spent(t: float, alpha: float) -> float:
    """The error spent by information fraction ``t`` (0..1)."""
    t = min(1.0, max(0.0, t))
    return alpha * math.log1p((math.e - 1.0) * t)


def level(look: int, alpha: float, looks: int = LOOKS) -> float:
    """The level look ``look`` (from 1) tests at; 0 past the planned looks."""
    if isinstance(look, bool) or not isinstance(look, int) or look < 1:
        raise ValueError(f"a look is a whole number from 1, not {look!r}")
    if look > looks:
        return 0.0
    return spent(look / looks, alpha) - spent((look - 1) / looks, alpha)


def levels(alpha: float, looks: int = LOOKS) -> list[float]:
    return [level(k, alpha, looks) for k in range(1, looks + 1)]


# -- the chi-square distribution (for the spread's interval) ---------------------------------------
def _lower_gamma(a: float, x: float) -> float:
    """The regularized lower incomplete gamma ``P(a, x)``: its series below ``a + 1``, its
    continued fraction (Lentz) above."""
    if x <= 0:
        return 0.0
    front = math.exp(a * math.log(x) - x - math.lgamma(a))
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(1000):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return front * total
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return 1.0 - front * h


def chi2_cdf(x: float, df: int) -> float:
    return _lower_gamma(df / 2.0, x / 2.0)


def chi2_quantile(p: float, df: int) -> float:
    """The ``x`` with ``P(X <= x) = p`` for chi-square on ``df`` degrees of freedom (bisection:
    the cdf only rises)."""
    if not 0 < p < 1:
        raise ValueError(f"a quantile needs a probability between 0 and 1, not {p!r}")
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if chi2_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def spread_interval(spread: float, df: int, level_: float = SPREAD_LEVEL) -> tuple[float, float]:
    """The two-sided ``level_`` interval of the true spread, from ``spread`` measured with
    ``df`` degrees of freedom (normal differences)."""
    if df < 1:
        raise ValueError("a spread's interval needs at least one degree of freedom")
    tail = (1 - level_) / 2
    return (
        spread * math.sqrt(df / chi2_quantile(1 - tail, df)),
        spread * math.sqrt(df / chi2_quantile(tail, df)),
    )


# -- the advice ------------------------------------------------------------------------------------
def pooled(spreads: list[tuple[float, int]]) -> tuple[float | None, int]:
    """One spread from several ``(spread, units)``: the root of the variances weighted by their
    degrees of freedom, and those degrees summed (``(None, 0)`` when none has two units)."""
    used = [(s, n - 1) for s, n in spreads if s is not None and n > 1]
    df = sum(d for _, d in used)
    if not df:
        return None, 0
    return math.sqrt(sum(s * s * d for s, d in used) / df), df


def advice(
    spread: float | None,
    df: int,
    have: int,
    margin: float,
    alpha: float,
    power: float,
    floor: float,
) -> dict | None:
    """How many more units the next look needs: ``{"low", "high"}`` more units, the totals
    ``"totals"``, the spreads planned from ``"spreads"`` (points), the spread ``"measured"``
    (None when it was not) with its ``"df"``, and ``"assumed"`` (the spread assumed, when it
    was measured with fewer than ``SPREAD_UNITS - 1`` degrees of freedom, else None).
    ``spread`` is the spread measured (pooled over the candidates: ``df`` its degrees of
    freedom), ``have`` the candidate's units, ``floor`` the least a spread can be (the rounding
    of whole marks); ``alpha`` the next look's level for this candidate. None when no next look
    may name it, or when more than ``stats.MOST_PAIRS`` would be needed."""
    if not alpha > 0:
        return None
    if spread is None or df < SPREAD_UNITS - 1:
        planned, dof, assumed, measured = ASSUMED_SPREAD, PRIOR_DF, ASSUMED_SPREAD, None
    else:
        dof = df + PRIOR_DF
        planned = math.sqrt((df * spread**2 + PRIOR_DF * ASSUMED_SPREAD**2) / dof)
        assumed, measured = None, spread
    spreads = tuple(max(floor, s) for s in spread_interval(planned, dof))
    totals = []
    for s in spreads:
        n = paired_sample_size(s, margin, alpha=alpha, power=power)
        if n is None:
            return None
        totals.append(n)
    low, high = (max(1, n - have) for n in totals)
    return {
        "low": low,
        "high": max(low, high),
        "totals": totals,
        "spreads": [round(s, 3) for s in spreads],
        "assumed": assumed,
        "measured": None if measured is None else round(measured, 3),
        "df": df,
        "prior": {"spread": ASSUMED_SPREAD, "df": PRIOR_DF},
        "level": round(alpha, 6),
    }


def advice_text(needed: dict, unit: str) -> str:
    """The advice in words: "3 to 12 more runs ... (assumes a spread of 2 points, not yet
    measured)"."""
    low, high = needed["low"], needed["high"]
    count = f"{low}" if low == high else f"{low} to {high}"
    what = (
        f"{count} more run(s) of it and of the pinned model"
        if unit == "runs"
        else f"{count} more input(s), each raced as many times"
    )
    low_s, high_s = needed["spreads"]
    if needed.get("assumed") is not None:
        why = (
            f"assumes a spread of {needed['assumed']:g} points, not yet measured; planned "
            f"for {low_s:.2f} to {high_s:.2f}"
        )
    else:
        why = (
            f"if its spread is between {low_s:.2f} and {high_s:.2f} points, the "
            f"{SPREAD_LEVEL:.0%} interval of the {needed['measured']:.2f} seen, tempered by "
            f"an assumed {ASSUMED_SPREAD:g}"
        )
    return f"{what} would settle it if it is as good as the pinned model ({why})"


__all__ = [
    "ASSUMED_SPREAD",
    "LOOKS",
    "SPENDING",
    "SPREAD_UNITS",
    "advice",
    "advice_text",
    "chi2_quantile",
    "level",
    "levels",
    "pooled",
    "spread_interval",
]
