"""How far a judge agrees with people, from a judge check's panels: Cohen's κ on useful / not,
accuracy on the pairs a person separated, the position flip rate, the own-family lift and the
length slope, each with a bootstrap interval over panels, beside the same figures for a
constant and a length-only baseline.

A **panel** here is one sampled panel: its answers, each with the person's verdict (useful or
not), its length, whether the judge is of its model's family and what the judge said of it; and
its **separated pairs** (one answer the person called useful, one not), each with what the judge
preferred when the useful one was shown first (``good_first``) and when it was shown second
(``bad_first``). A judge's decision is True / False for a mark, ``"good"`` / ``"bad"`` for a
pair, or None when its question failed (left out of every figure).

Invariants:

* Every figure is a ratio of sums over panels (``_SUMS``), so a bootstrap draw is the sum of
  the drawn panels' rows: the panel is the unit resampled, since one panel's answers share a
  prompt and a person and are not independent of each other.
* The draws are seeded (``seed``); the judge and its baselines are drawn from the same panels in
  each draw, so the interval of a difference (``versus``) is a paired one.
* A figure with nothing to stand on (no pair, no answer of the judge's family, κ when everyone
  said one thing) is None, never 0.
* The baselines: ``constant`` calls every answer useful and prefers whichever answer it is shown
  first; ``length`` calls an answer useful when it is at least as long as the median answer of
  the sample and prefers the longer of two (the first shown when they are as long).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

DRAWS = 1000
FIGURES = ("kappa", "accuracy", "flip_rate", "own_family_lift", "length_slope", "agreement")
BASELINES = ("constant", "length")
# one panel's row: marks (judge × person), pairs, flips, own-family pairs, length terms
_SUMS = (
    "n11",
    "n10",
    "n01",
    "n00",
    "pairs",
    "right",
    "both",
    "flips",
    "family",
    "family_judge",
    "family_person",
    "sxd",
    "sxx",
)


@dataclass
class Answer:
    useful: bool  # the person's verdict
    chars: int  # its length, as the judge read it
    own: bool = False  # its model is of the judge's family


@dataclass
class Pair:
    good: int  # index of the answer the person called useful
    bad: int  # and of the one they did not


@dataclass
class Panel:
    shape: str
    answers: list[Answer]
    pairs: list[Pair] = field(default_factory=list)


def separated(answers: list[Answer]) -> list[Pair]:
    """Every pair of a panel's answers the person separated: one useful, one not."""
    return [
        Pair(g, b)
        for g, ag in enumerate(answers)
        if ag.useful
        for b, ab in enumerate(answers)
        if not ab.useful
    ]


# -- decisions -------------------------------------------------------------------------------------
@dataclass
class Decisions:
    """What one judge (or baseline) said of one panel: a mark per answer, and per pair its
    preference in each order (``{"good_first": "good", "bad_first": "bad"}``)."""

    marks: list
    prefs: list


def constant(panel: Panel) -> Decisions:
    return Decisions(
        [True] * len(panel.answers),
        [{"good_first": "good", "bad_first": "bad"} for _ in panel.pairs],
    )


def by_length(panel: Panel, median: float) -> Decisions:
    marks = [a.chars >= median for a in panel.answers]
    prefs = []
    for p in panel.pairs:
        g, b = panel.answers[p.good].chars, panel.answers[p.bad].chars
        if g == b:
            prefs.append({"good_first": "good", "bad_first": "bad"})
        else:
            longer = "good" if g > b else "bad"
            prefs.append({"good_first": longer, "bad_first": longer})
    return Decisions(marks, prefs)


def median_chars(panels: list[Panel]) -> float:
    sizes = sorted(a.chars for p in panels for a in p.answers)
    if not sizes:
        return 0.0
    mid = len(sizes) // 2
    return float(sizes[mid]) if len(sizes) % 2 else (sizes[mid - 1] + sizes[mid]) / 2


# -- sums and figures ------------------------------------------------------------------------------
def row(panel: Panel, said: Decisions) -> tuple:
    """One panel's contribution to every sum of ``_SUMS``."""
    n = dict.fromkeys(_SUMS, 0.0)
    for answer, mark in zip(panel.answers, said.marks):
        if mark is None:
            continue
        n["n" + ("1" if answer.useful else "0") + ("1" if mark else "0")] += 1
    for pair, pref in zip(panel.pairs, said.prefs):
        seen = [v for v in (pref.get("good_first"), pref.get("bad_first")) if v is not None]
        if not seen:
            continue
        share = sum(v == "good" for v in seen) / len(seen)  # how often it preferred the good
        n["pairs"] += 1
        n["right"] += share
        if len(seen) == 2:
            n["both"] += 1
            n["flips"] += seen[0] != seen[1]
        good, bad = panel.answers[pair.good], panel.answers[pair.bad]
        if good.own != bad.own:
            n["family"] += 1
            n["family_judge"] += share if good.own else 1 - share
            n["family_person"] += 1 if good.own else 0
        if good.chars > 0 and bad.chars > 0 and good.chars != bad.chars:
            # x: how much longer the useful answer is (doublings); d: the judge's preference for
            # it less the person's (who preferred it: 1). Through the origin, the same whichever
            # of the two is taken as first, so the slope is the judge's less the person's
            x = math.log2(good.chars / bad.chars)
            n["sxd"] += x * (share - 1)
            n["sxx"] += x * x
    return tuple(n[k] for k in _SUMS)


def figures(sums) -> dict:
    """Each figure from summed rows (None where there is nothing to stand on)."""
    s = dict(zip(_SUMS, sums))
    marked = s["n11"] + s["n10"] + s["n01"] + s["n00"]
    kappa = agreement = None
    if marked:
        agreement = (s["n11"] + s["n00"]) / marked
        judge_yes = (s["n11"] + s["n01"]) / marked
        person_yes = (s["n11"] + s["n10"]) / marked
        chance = judge_yes * person_yes + (1 - judge_yes) * (1 - person_yes)
        kappa = None if chance >= 1 else (agreement - chance) / (1 - chance)
    return {
        "kappa": kappa,
        "accuracy": s["right"] / s["pairs"] if s["pairs"] else None,
        "flip_rate": s["flips"] / s["both"] if s["both"] else None,
        "own_family_lift": (s["family_judge"] - s["family_person"]) / s["family"]
        if s["family"]
        else None,
        "length_slope": s["sxd"] / s["sxx"] if s["sxx"] else None,
        "agreement": agreement,
    }


def _sum(rows: list[tuple]) -> list[float]:
    return [sum(col) for col in zip(*rows)] if rows else [0.0] * len(_SUMS)


def _interval(values: list) -> list[float] | None:
    values = sorted(v for v in values if v is not None)
    if len(values) < 20:
        return None
    lo = values[int(0.025 * (len(values) - 1))]
    hi = values[int(math.ceil(0.975 * (len(values) - 1)))]
    return [round(lo, 4), round(hi, 4)]


def _r(v):
    return None if v is None else round(v, 4)


def score(
    panels: list[Panel],
    judged: list[Decisions],
    *,
    seed: int = 0,
    draws: int = DRAWS,
    median: float | None = None,
) -> dict:
    """The judge's figures with intervals, its baselines' beside them and the paired
    differences (judge less baseline) on κ and accuracy. ``median``: the length baseline's
    threshold (default: the median answer of ``panels``)."""
    median = median_chars(panels) if median is None else median
    sources = {
        "judge": judged,
        "constant": [constant(p) for p in panels],
        "length": [by_length(p, median) for p in panels],
    }
    rows = {k: [row(p, d) for p, d in zip(panels, said)] for k, said in sources.items()}
    points = {k: figures(_sum(r)) for k, r in rows.items()}
    drawn: dict[str, list[dict]] = {k: [] for k in rows}
    rng = random.Random(seed)
    n = len(panels)
    for _ in range(draws if n >= 2 else 0):
        picks = [rng.randrange(n) for _ in range(n)]
        for k, r in rows.items():
            drawn[k].append(figures(_sum([r[i] for i in picks])))

    def described(k: str) -> dict:
        return {
            f: {"value": _r(points[k][f]), "interval": _interval([d[f] for d in drawn[k]])}
            for f in FIGURES
        }

    versus: dict[str, Any] = {}
    for base in BASELINES:
        versus[base] = {}
        for f in ("kappa", "accuracy"):
            a, b = points["judge"][f], points[base][f]
            diffs = [
                None if x[f] is None or y[f] is None else x[f] - y[f]
                for x, y in zip(drawn["judge"], drawn[base])
            ]
            versus[base][f] = {
                "difference": None if a is None or b is None else _r(a - b),
                "interval": _interval(diffs),
            }
    return {
        "figures": described("judge"),
        "baselines": {b: described(b) for b in BASELINES},
        "versus": versus,
        "median_chars": median,
        "findings": findings(points["judge"], versus),
    }


BASELINE_NAMES = {
    "constant": "the constant baseline (always useful, always the first shown)",
    "length": "the length-only baseline (the longer answer)",
}


def findings(judge: dict, versus: dict) -> list[str]:
    """What a person should know first: a judge whose pairwise accuracy does not clear a
    baseline's (the paired difference's interval reaches 0 or below) is said to be no better."""
    out = []
    if judge.get("accuracy") is None:
        return ["no pair the person separated was judged: pairwise accuracy is unknown"]
    for base in BASELINES:
        diff = versus[base]["accuracy"]
        if diff["difference"] is None:
            continue
        low = diff["interval"][0] if diff["interval"] else None
        if low is None or low <= 0:
            span = (
                f"{diff['interval'][0]:+.2f} to {diff['interval'][1]:+.2f}"
                if diff["interval"]
                else "too few panels for an interval"
            )
            out.append(
                f"no better than {BASELINE_NAMES[base]} on pairs: accuracy "
                f"{diff['difference']:+.2f} against it (95% interval {span})"
            )
    kappa = judge.get("kappa")
    if kappa is not None and kappa <= 0:
        out.append("its useful / not marks agree with people no better than chance (κ ≤ 0)")
    return out
