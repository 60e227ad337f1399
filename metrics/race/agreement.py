"""How far a race's judges agree: Krippendorff's α on accuracy, its bootstrap interval, and each
judge's mean offset, with what the value means said in words.

Krippendorff's α compares the disagreement seen between coders on the same unit (``D_o``) with
the disagreement expected if their values were paired at random across units (``D_e``):
``α = 1 - D_o / D_e``. 1 is perfect agreement, 0 is no better than chance, below 0 the coders
disagree more than chance would make them (one scores high where another scores low). This is
the interval form: a disagreement counts as the squared difference of the two values, so marks
are taken as numbers on one scale. A unit with fewer than two values is left out (it has no
pair); a missing value is simply absent, as α allows.

In a race a **coder is a judge** and a **unit is a run as one prompt showed it**: a run judged in
both orders is two units (reference first, candidate first), because every judge read the very
same prompt for each, so any difference between them is the judges'. Position (the same judge
across the two orders) is reported apart (``report.judging_of``). The value is the accuracy the
judge *said*, before code's tool cap: the cap is the same for every judge, and counting it would
make judges look as if they agreed where code decided.

Invariants:

* ``alpha`` is None when there are fewer than two units with a pair, or when every value is the
  same (``D_e`` is 0: there is nothing to agree or disagree on).
* The interval is a percentile bootstrap over **runs** (a run's two orders are drawn together:
  they are not independent), ``RESAMPLES`` draws from a generator seeded with ``SEED``, so the
  same judgements always give the same interval. Draws in which α is undefined are left out and
  counted (``undefined``).
* A judge's offset is the mean, over the units it judged with at least one other judge, of its
  value minus that unit's mean over the judges who judged it: above 0 it marks higher than the
  jury, below 0 lower. The offsets of a jury sum to 0 when every judge judged every unit.
"""

from __future__ import annotations

import random
from typing import Any

RESAMPLES = 1000
SEED = 20260
LEVEL = 0.95
GOOD, TENTATIVE = 0.8, 0.667  # Krippendorff's usual thresholds for relying on coded data

ASSUMES = (
    "α takes accuracy marks as numbers on one scale (a 6 against a 3 is a bigger "
    "disagreement than a 5 against a 4), compares judges only on the same prompt (a run "
    "judged in both orders is two units; the interval resamples runs, so both stay "
    "together), leaves out judgements that are missing, and uses the accuracy each judge "
    "gave before code's tool cap. It measures agreement, not correctness: judges can agree "
    "and all be wrong."
)
SCALE = "1 is perfect agreement, 0 no better than chance, below 0 systematic disagreement"


# -- the statistic --------------------------------------------------------------------------------
def _unit_sums(values: list[float]) -> tuple[int, float, float, float]:
    """``(m, Σv, Σv², the unit's share of D_o before dividing by n)`` of one unit's values."""
    m = len(values)
    s = sum(values)
    s2 = sum(v * v for v in values)
    # Σ over ordered pairs i ≠ j of (v_i - v_j)² is 2(mΣv² - (Σv)²); D_o weighs it by 1/(m - 1)
    return m, s, s2, 2 * (m * s2 - s * s) / (m - 1)


def _alpha_of(sums: list[tuple[int, float, float, float]]) -> float | None:
    n = sum(u[0] for u in sums)
    if len(sums) < 2 or n < 2:
        return None
    total, total2 = sum(u[1] for u in sums), sum(u[2] for u in sums)
    expected = 2 * (n * total2 - total * total) / (n * (n - 1))
    if expected <= 1e-12:
        return None
    observed = sum(u[3] for u in sums) / n
    return 1.0 - observed / expected


def alpha(units: list[list[float]]) -> float | None:
    """Krippendorff's α (interval) of ``units``, each the values its coders gave (missing
    values simply absent); units with fewer than two values are left out."""
    return _alpha_of([_unit_sums([float(v) for v in u]) for u in units if len(u) >= 2])


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated linearly between neighbours."""
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def alpha_interval(
    clusters: list[list[list[float]]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> dict:
    """α of every unit of ``clusters`` (each cluster: the units drawn together, a race's run)
    with a percentile bootstrap interval over clusters: ``{"value", "interval", "units",
    "clusters", "resamples", "undefined", "level"}``. ``interval`` is None when α is."""
    kept = [[_unit_sums([float(v) for v in u]) for u in c if len(u) >= 2] for c in clusters]
    kept = [c for c in kept if c]
    value = _alpha_of([u for c in kept for u in c])
    out: dict[str, Any] = {
        "value": None if value is None else round(value, 4),
        "interval": None,
        "units": sum(len(c) for c in kept),
        "clusters": len(kept),
        "resamples": 0,
        "undefined": 0,
        "level": level,
        "method": "percentile bootstrap over runs",
    }
    if value is None:
        return out
    # each cluster's sums added once, so a draw costs O(clusters), not O(values)
    summed = [
        (
            sum(u[0] for u in c),
            sum(u[1] for u in c),
            sum(u[2] for u in c),
            sum(u[3] for u in c),
            len(c),
        )
        for c in kept
    ]
    rng = random.Random(seed)
    k = len(summed)
    draws = []
    for _ in range(resamples):
        n = s = s2 = o = 0.0
        units = 0
        for _ in range(k):
            c = summed[rng.randrange(k)]
            n, s, s2, o, units = n + c[0], s + c[1], s2 + c[2], o + c[3], units + c[4]
        expected = 2 * (n * s2 - s * s) / (n * (n - 1)) if n > 1 else 0.0
        if units < 2 or expected <= 1e-12:
            out["undefined"] += 1
            continue
        draws.append(1.0 - (o / n) / expected)
    out["resamples"] = len(draws)
    if draws:
        draws.sort()
        tail = (1 - level) / 2
        out["interval"] = [round(_quantile(draws, tail), 4), round(_quantile(draws, 1 - tail), 4)]
    return out


def offsets(units: list[dict[str, float]]) -> dict[str, dict]:
    """Each coder's mean offset from the unit means over the units it shares with another coder
    (``units``: ``{coder: value}`` each): ``{coder: {"offset", "units"}}``."""
    gaps: dict[str, list[float]] = {}
    for unit in units:
        if len(unit) < 2:
            continue
        mean = sum(unit.values()) / len(unit)
        for coder, v in unit.items():
            gaps.setdefault(coder, []).append(v - mean)
    return {
        c: {"offset": round(sum(g) / len(g), 4), "units": len(g)} for c, g in sorted(gaps.items())
    }


# -- a race's judgements --------------------------------------------------------------------------
def said(judgement: dict) -> int | None:
    """The accuracy a judge gave, before code's cap."""
    if judgement.get("capped_from") is not None:
        return judgement["capped_from"]
    return judgement.get("accuracy")


def race_units(rows: list[dict]) -> list[list[dict[str, float]]]:
    """The runs of ``rows`` as clusters of units: per run, per order, ``{judge: accuracy said}``
    of the judgements that came back."""
    clusters = []
    for row in rows:
        by_order: dict[str, dict[str, float]] = {}
        for j in row.get("judgements") or ():
            accuracy = said(j)
            if j.get("error") or accuracy is None:
                continue
            by_order.setdefault(j["order"], {})[j["judge"]] = accuracy
        if by_order:
            clusters.append([by_order[o] for o in sorted(by_order)])
    return clusters


def meaning(value: float | None, interval: list[float] | None) -> str:
    """What ``value`` (with its ``interval``) says, in words, with the scale."""
    if value is None:
        return (
            "α cannot be computed: too few runs were judged by two judges or more, or every "
            "judgement gave the same accuracy, so there is nothing to agree on"
        )
    low, high = interval if interval else (value, value)
    if high < 0:
        said_ = "the judges disagree systematically: one marks high where another marks low"
    elif low <= 0:
        said_ = (
            "no evidence the judges agree beyond chance"
            if value < TENTATIVE
            else "too few runs to show the judges agree beyond chance"
        )
    elif value >= GOOD:
        said_ = "the judges agree well beyond chance"
    elif value >= TENTATIVE:
        said_ = "the judges agree beyond chance, but not closely"
    else:
        said_ = "the judges agree only a little beyond chance: too little to rely on one alone"
    span = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    return f"α {value:.2f}{span}: {said_}; {SCALE}"


def jury_agreement(rows: list[dict], judges: list[str], *, seed: int = SEED) -> dict:
    """The ``alpha`` section of a race's report: ``{"value", "interval", "units", "runs",
    "offsets", "meaning", "assumes", ...}`` over the judgements of ``rows``."""
    clusters = race_units(rows)
    found = alpha_interval([[list(u.values()) for u in c] for c in clusters], seed=seed)
    found["runs"] = found.pop("clusters")
    found["judges"] = list(judges)
    found["offsets"] = offsets([u for c in clusters for u in c])
    found["meaning"] = meaning(found["value"], found["interval"])
    found["assumes"] = ASSUMES
    return found
