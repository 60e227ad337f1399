"""Simulated evidence with known strengths, to check what the ratings print
(``scripts/bench_ratings.py`` prints ``run``'s figures).

The worlds. Every model has a true log-strength ``θ``; an answer is judged useful with chance
``σ(θ + d)``, ``d`` the prompt's difficulty (0 in a world without, else drawn per panel or
input). Given that one of two answers was useful and the other not, the chance it was ``a``'s
is ``σ(θ_a - θ_b)`` whatever ``d``: the Bradley–Terry model the ratings fit holds exactly, so
the truth is well defined, while the pairs of one panel share its prompt (and one useful
answer beats every not-useful one), which is what the intervals must account for. A race input
is the same with every model answering it once, marked 7 for accuracy when right and 2 when
wrong, read through ``raceevidence.patterns`` (the rule the ratings use).

The truth, like with like. The fit reads strengths against the average player its prior
anchors: its strengths satisfy ``Σ tanh(θ̂ / 2) = 0`` over the rated models (the prior's
gradient is all that is left at the fit, and it sums to zero there). The true strengths are
shifted by the constant that makes the same sum zero, so "the true rating" is the chance of
beating that same average player, ``chance(θ + c)``.

The figures (``run``):

* ``coverage``: the share of (data set, model) where the 95% interval held the true strength;
  ``worst_model``: the lowest share of one model; ``se_over_sd``: per model, the mean printed
  error over the standard deviation of the estimate about the truth, the median over models
  (1 is honest, below 1 too narrow); ``as_independent_pairs``: the coverage of the same data
  when every pair counts as its own unit, as the ratings counted before they kept patterns.
* ``false_suggestions``: collections of 3 members, every model equally good (useful half the
  time on a prompt of average difficulty; prompts vary, sd 1.0 in log-odds, which ties the
  pairs of a panel together), each panel the 3 members and the next candidate in turn: the
  share of collections where ``panel.suggest`` proposed any swap. Target at most 5%.
* ``power``: one candidate useful 0.8 of the time, every other model 0.5 (prompts alike, so
  those are its rates): the share of collections where it was suggested. Target at least 90%
  at 500 panels.

The coverage worlds fold every verdict through the index's own ``Pairs``; the suggestion grid
(millions of panels) builds each panel's pattern with the same ``pairs.pattern`` directly.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any

from panelist.metrics.ledger import raceevidence
from panelist.metrics.ledger.pairs import Pairs, pairs_of, pattern
from panelist.metrics.ledger.ratings import rate
from panelist.metrics.panel.suggest import suggestions
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import Endpoint, Model, RosterView

MEMBERS = ("m1", "m2", "m3")
Z = 1.959963984540054


def _useful(rng: random.Random, theta: float) -> bool:
    return rng.random() < 1.0 / (1.0 + math.exp(-theta))


def _spread(k: int, width: float) -> dict[str, float]:
    """``k`` models evenly spread over ``[-width, width]`` in log-strength."""
    return {f"s{i:02d}": -width + 2 * width * i / (k - 1) for i in range(k)}


def anchored(truth: dict[str, float], rated: list[str]) -> dict[str, float]:
    """The true strengths of ``rated`` shifted so that ``Σ tanh(θ / 2) = 0``, as the fit's."""
    lo, hi = -20.0, 20.0
    for _ in range(60):
        c = (lo + hi) / 2
        if sum(math.tanh((truth[a] + c) / 2) for a in rated) > 0:
            hi = c
        else:
            lo = c
    return {a: truth[a] + c for a in rated}


def panels(rng, truth, seatings, difficulty: float) -> dict[tuple, int]:
    """``{pattern: panels}`` of panels seated as ``seatings``, folded verdict by verdict."""
    pairs = Pairs(kept=len(seatings) + 1)
    for p, seats in enumerate(seatings):
        d = rng.gauss(0.0, difficulty) if difficulty else 0.0
        for s, alias in enumerate(seats):
            pairs.fold(f"p{p}", f"p{p}.s{s}", alias, "general", _useful(rng, truth[alias] + d))
    return pairs.patterns_of("general")


def race_inputs(rng, truth, inputs: int, difficulty: float) -> dict[tuple, int]:
    """``{pattern: inputs}`` of one race report where every model answered every input once."""
    rows = []
    for i in range(inputs):
        d = rng.gauss(0.0, difficulty)
        for alias, theta in truth.items():
            rows.append(
                {"model": alias, "input": i, "accuracy": 7 if _useful(rng, theta + d) else 2}
            )
    return raceevidence.patterns({"rows": rows})


def _scenarios():
    """``(name, truth, make(rng) -> {pattern: units})`` of each coverage world."""
    eight = _spread(8, 1.2)
    members, others = ["s00", "s03", "s05"], ["s01", "s02", "s04", "s06", "s07"]
    twenty = _spread(20, 1.2)
    few_members = ["s03", "s10", "s16"]
    few_others = [a for a in twenty if a not in few_members]
    six = _spread(6, 1.0)
    names = sorted(eight)
    return [
        (
            "independent pairs: 8 models, 800 two-seat panels",
            eight,
            lambda rng: panels(rng, eight, [rng.sample(names, 2) for _ in range(800)], 0.0),
        ),
        (
            "gateway: 3 members + 1 of 5 explorers, 800 panels",
            eight,
            lambda rng: panels(
                rng, eight, [members + [rng.choice(others)] for _ in range(800)], 0.0
            ),
        ),
        (
            "gateway with prompt difficulty (sd 1.5): 3 + 1 of 5, 800 panels",
            eight,
            lambda rng: panels(
                rng, eight, [members + [rng.choice(others)] for _ in range(800)], 1.5
            ),
        ),
        (
            "gateway with prompt difficulty (sd 1.0): 3 + 1 of 17, 300 panels",
            twenty,
            lambda rng: panels(
                rng, twenty, [few_members + [rng.choice(few_others)] for _ in range(300)], 1.0
            ),
        ),
        (
            "race inputs: 6 models, 120 inputs, input difficulty (sd 1.5)",
            six,
            lambda rng: race_inputs(rng, six, 120, 1.5),
        ),
    ]


def coverage(truth, make, trials: int, rng: random.Random) -> dict:
    """The coverage figures of one world over ``trials`` data sets (the module docstring)."""
    held = {a: 0 for a in truth}
    seen = {a: 0 for a in truth}
    errors: dict[str, list[float]] = {a: [] for a in truth}
    ses: dict[str, list[float]] = {a: [] for a in truth}
    pairs_held = pairs_seen = 0
    for _ in range(trials):
        found = make(rng)
        fit = rate("general", {"verdicts": found})
        true = anchored(truth, [r.alias for r in fit.models])
        for r in fit.models:
            seen[r.alias] += 1
            held[r.alias] += abs(r.theta - true[r.alias]) <= Z * r.se
            errors[r.alias].append(r.theta - true[r.alias])
            ses[r.alias].append(r.se)
        apart = rate("general", {"verdicts": pairs_of(found)})
        for r in apart.models:
            pairs_seen += 1
            pairs_held += abs(r.theta - true[r.alias]) <= Z * r.se
    per = {a: held[a] / seen[a] for a in truth if seen[a]}
    ratio = [
        statistics.fmean(ses[a]) / statistics.pstdev(errors[a])
        for a in truth
        if len(errors[a]) > 2 and statistics.pstdev(errors[a]) > 0
    ]
    return {
        "coverage": round(sum(held.values()) / max(1, sum(seen.values())), 4),
        "worst_model": round(min(per.values()), 4),
        "se_over_sd": round(statistics.median(ratio), 3),
        "as_independent_pairs": round(pairs_held / max(1, pairs_seen), 4),
        "intervals": sum(seen.values()),
    }


def _view(aliases) -> RosterView:
    return RosterView(
        {"e": Endpoint("e", "http://127.0.0.1:1/v1", "K")},
        {a: Model(alias=a, endpoint="e", served=a, family=a) for a in aliases},
    )


def collection_trial(
    rng, candidates: int, panel_count: int, rates: dict, difficulty: float = 0.0
) -> list[dict]:
    """One collection's suggestions after ``panel_count`` panels of the members and the next
    candidate in turn, each answer useful at its model's rate (0.5 unless ``rates`` says) on a
    prompt of average difficulty (sd ``difficulty`` in log-odds)."""
    others = [f"c{i:02d}" for i in range(candidates)]
    logit = {a: math.log(r / (1 - r)) for a, r in rates.items()}
    found: dict[tuple, int] = {}
    for p in range(panel_count):
        entry: list[Any] = ["general"]
        d = rng.gauss(0.0, difficulty) if difficulty else 0.0
        for s, alias in enumerate((*MEMBERS, others[p % candidates])):
            entry += (s, alias, _useful(rng, logit.get(alias, 0.0) + d))
        key = pattern(entry)
        if key:
            found[key] = found.get(key, 0) + 1
    fit = rate("general", {"verdicts": found})
    return suggestions(Collection("c", MEMBERS), _view([*MEMBERS, *others]), fit, "general")


def run(trials: int, suggest_trials: int, seed: int = 1) -> dict:
    """Every figure of the module docstring, seeded."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"coverage": {}, "false_suggestions": {}, "power": {}}
    rng = random.Random(seed)
    for name, truth, make in _scenarios() if trials > 0 else ():
        out["coverage"][name] = coverage(truth, make, trials, rng)
    if suggest_trials > 0:
        for candidates in (5, 20, 50):
            for panel_count in (200, 2000, 5000):
                hits = sum(
                    bool(collection_trial(rng, candidates, panel_count, {}, 1.0))
                    for _ in range(suggest_trials)
                )
                out["false_suggestions"][f"{candidates} candidates, {panel_count} panels"] = round(
                    hits / suggest_trials, 4
                )
        for candidates, panel_count in ((5, 500), (20, 500), (20, 2000)):
            hits = sum(
                any(
                    s["alias"] == "c00"
                    for s in collection_trial(rng, candidates, panel_count, {"c00": 0.8})
                )
                for _ in range(suggest_trials)
            )
            out["power"][f"0.8 vs 0.5, {candidates} candidates, {panel_count} panels"] = round(
                hits / suggest_trials, 4
            )
    out["trials"] = {"coverage": trials, "suggestions": suggest_trials}
    out["targets"] = {
        "coverage": [0.93, 0.97],
        "false_suggestions": 0.05,
        "power_at_500_panels": 0.9,
    }
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out
