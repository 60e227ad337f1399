"""Ratings: one Bradley–Terry strength per model and shape, from every comparison the data folder
holds, with bootstrap intervals.

The comparisons of a shape are the sum of:

* the verdicts' pairs (``pairs.py``, folded by the index as verdicts arrive): on one panel, a
  call judged useful over a call of another model judged not useful;
* for ``review``, the suite's units (``suiteevidence.comparisons``): a task one model got right
  and another wrong;
* for ``general``, the races' inputs (``raceevidence``): the higher mean judged total.

A model's ``rating`` is the chance it is judged better than an average model of the shape
(``bradleyterry.chance``); ``interval`` is the 95% interval on it, from the bootstrap standard
error of its log-strength (seeded by the shape, so every process gives the same figures for the
same counts). ``bounds`` widens the interval for a family of comparisons (Bonferroni), which
is how a suggestion (``panel.suggest``) stays rare among many equally good models.

Cost: nothing here reads a log. A look gathers the counts (O(pairs of models)); a shape is
refitted only when its counts changed (and, where fitting is slow and the caller allows it,
``max_age`` seconds passed since its last fit), so a look at unchanged evidence costs a
comparison of counts.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from hashlib import blake2b
from statistics import NormalDist

from panelist.metrics.home import Home
from panelist.metrics.ledger import bradleyterry, raceevidence, suiteevidence
from panelist.metrics.stats import Z95

DRAWS = 200      # bootstrap redraws per fit
ALPHA = 0.05     # the family-wise error rate a suggestion is held to
SLOW_WORK = 1000   # players² + pairs past which a fit is slow (some tens of ms, or more)


def z_for(family: int, alpha: float = ALPHA) -> float:
    """The two-sided normal quantile for ``family`` comparisons at a family-wise ``alpha``
    (Bonferroni: each at ``alpha / family``)."""
    return NormalDist().inv_cdf(1 - alpha / (2 * max(1, family)))


@dataclass(frozen=True)
class Rated:
    """One model's rating on one shape."""

    alias: str
    theta: float     # log-strength; 0 is the average model
    se: float        # bootstrap standard error of theta
    wins: float      # comparisons it won
    losses: float    # comparisons it lost

    def bounds(self, z: float = Z95) -> tuple[float, float]:
        """The interval on the rating at normal quantile ``z``."""
        return (bradleyterry.chance(self.theta - z * self.se),
                bradleyterry.chance(self.theta + z * self.se))

    def public(self) -> dict:
        lo, hi = self.bounds()
        return {"alias": self.alias, "rating": round(bradleyterry.chance(self.theta), 4),
                "interval": [round(lo, 4), round(hi, 4)], "strength": round(self.theta, 4),
                "se": round(self.se, 4), "wins": _whole(self.wins),
                "losses": _whole(self.losses)}


def _whole(x: float):
    return int(x) if float(x).is_integer() else round(x, 3)


@dataclass
class ShapeRatings:
    """Every rated model of one shape, strongest first, and where its comparisons came from."""

    shape: str
    models: list[Rated] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)   # "verdicts"/"suite"/"races" -> n
    pairs: int = 0   # pairs of models compared at least once

    def of(self, alias: str) -> Rated | None:
        return next((r for r in self.models if r.alias == alias), None)

    def by_alias(self) -> dict[str, Rated]:
        return {r.alias: r for r in self.models}

    def public(self) -> dict:
        return {"shape": self.shape, "comparisons": sum(self.sources.values()),
                "sources": dict(self.sources), "models": [r.public() for r in self.models]}


def rate(shape: str, sources: dict[str, dict[tuple[str, str], int]], *,
         draws: int = DRAWS) -> ShapeRatings:
    """Fit the ratings of ``shape`` from ``{source name: {(better, worse): count}}``."""
    wins: dict[tuple[str, str], float] = {}
    for found in sources.values():
        for pair, n in found.items():
            wins[pair] = wins.get(pair, 0) + n
    comparisons = bradleyterry.Comparisons(wins)
    theta = bradleyterry.fit(comparisons)
    seed = int.from_bytes(blake2b(shape.encode(), digest_size=8).digest(), "big")
    se = bradleyterry.bootstrap(comparisons, theta, draws=draws, seed=seed)
    totals = comparisons.totals()
    models = [Rated(a, t, s, w, l) for a, t, s, (w, l)
              in zip(comparisons.players, theta, se, totals)]
    models.sort(key=lambda r: (-r.theta, r.alias))
    return ShapeRatings(shape, models, {name: sum(found.values())
                                        for name, found in sources.items()},
                        len(comparisons.cells))


def slow(fitted: ShapeRatings) -> bool:
    """Whether refitting ``fitted`` is slow: the work of a fit grows with the players squared
    and the pairs compared (``bradleyterry.bootstrap``); counted, not timed, so a loaded
    machine decides the same."""
    return len(fitted.models) ** 2 + fitted.pairs > SLOW_WORK


class Ratings:
    """The ratings of one data folder, over its ledger, suite samples and race reports; one
    fit per shape is kept and reused while its counts are unchanged."""

    def __init__(self, ledger, suite: suiteevidence.SuiteEvidence,
                 races: raceevidence.RaceEvidence, *, draws: int = DRAWS):
        self.ledger = ledger
        self.suite = suite
        self.races = races
        self.draws = draws
        self._lock = threading.Lock()
        self._fits: dict[str, tuple[dict, float, ShapeRatings]] = {}   # (counts, when, fit)

    @classmethod
    def of_home(cls, home: Home, ledger, suite=None) -> "Ratings":
        return cls(ledger, suite or suiteevidence.SuiteEvidence.of_home(home),
                   raceevidence.RaceEvidence(home.races))

    def sources(self, shape: str) -> dict[str, dict[tuple[str, str], int]]:
        found = {"verdicts": self.ledger.pairs(shape)}
        if shape == suiteevidence.SHAPE:
            found["suite"] = self.suite.pairs()
        if shape == raceevidence.SHAPE:
            found["races"] = self.races.pairs()
        return found

    def shapes(self) -> list[str]:
        """The shapes with any comparison."""
        found = set(self.ledger.paired_shapes())
        if self.suite.pairs():
            found.add(suiteevidence.SHAPE)
        if self.races.pairs():
            found.add(raceevidence.SHAPE)
        return sorted(found)

    def of(self, shape: str, *, max_age: float = 0.0) -> ShapeRatings:
        """The ratings of ``shape``, refitted when its counts changed. A caller may allow a
        fit up to ``max_age`` seconds old when fitting is slow (the last fit took more than
        ``QUICK_FIT`` seconds: a large roster), so a stream of verdicts does not make every
        gateway seating refit; a quick fit is always redone."""
        sources = self.sources(shape)
        with self._lock:
            hit = self._fits.get(shape)
            if hit is not None and (hit[0] == sources or (
                    slow(hit[2]) and time.monotonic() - hit[1] < max_age)):
                return hit[2]
            fitted = rate(shape, sources, draws=self.draws)
            self._fits[shape] = (sources, time.monotonic(), fitted)
            return fitted

    def all(self) -> list[ShapeRatings]:
        return [self.of(s) for s in self.shapes()]
