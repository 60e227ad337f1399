"""Ratings: one Bradley–Terry strength per model and shape, from every comparison the data folder
holds, with intervals that account for how the comparisons were gathered.

The comparisons of a shape are the sum of:

* the verdicts' pairs (``pairs.py``, folded by the index as verdicts arrive): on one panel, a
  call judged useful over a call of another model judged not useful;
* for ``review``, the suite's units (``suiteevidence``): a task one model got right and another
  wrong;
* for ``general``, the races' inputs (``raceevidence``): the higher mean accuracy after the
  tool cap.

A model's ``rating`` is the chance it is judged better than an average model of the shape
(``bradleyterry.chance``; "average" is the player of log-strength 0 the prior anchors, so the
strengths are read against the roster's middle); ``interval`` is the 95% interval on it.

The interval. Comparisons come in units: a panel (all its pairs at once), a race input, a
suite task. The pairs of one unit share a prompt and a judge, so they are not independent (a
hard prompt fails every seat; a useful explorer on a four-seat panel wins three pairs at
once), and an interval that counts each pair as its own draw is too narrow: on simulated
gateway panels such intervals held the truth about 84% of the time, not 95%. The unit that was
sampled is what the error must come from. A cluster bootstrap would redraw units, but it needs
every unit listed and a refit per draw; the sandwich variance (``bradleyterry.errors``) gives
the same first-order answer from the units' scores, and a unit's score depends only on the
multiset of pairs it made, so the sources keep **counts per pattern** (``{pattern: units}``)
instead of a list of units: the work grows with the patterns seen, not the verdicts, and
nothing reads a log on a request. Where a model is in few units the robust estimate is noisy
and runs small, so each model's part is widened for the ``G`` units it is in (``G / (G - 1)``
and Student's t at ``G - 1`` degrees of freedom) and never taken below the model-based error
of independent pairs (``bradleyterry.errors``); ``scripts/bench_ratings.py``
checks the coverage this gives by simulation. The fit is deterministic: the same counts give
the same figures in every process.

``bounds`` widens the interval for a family of comparisons (Bonferroni), which is how a
suggestion (``panel.suggest``) stays rare among many equally good models.

Cost: nothing here reads a log. A look compares the sources' stamps (the ledger's changes with
every pattern count, ``Pairs.stamp``); a shape is refitted, from copies of its pattern counts
(O(patterns)), only when they changed, so a look at unchanged evidence costs O(1). A slow fit
(``slow``: hundreds of models; the robust error is players² × the pairs sharing a unit, in pure
Python: 25 s at 500 models, ``scripts/bench_ratings.py --fit-models 500``) never runs on a
caller's thread once a fit of the shape exists: the caller gets the last fit (``refitting``
says a newer one is being made) and one background thread per shape fits again, no sooner
than ``max_age`` seconds after the last fit ended and ``REST`` times its length (so fitting
takes at most a fifth of the interpreter's time while verdicts keep coming). Before any fit
exists, a caller that may not wait (``ready``: a reply's ``bench.suggest``, ``/api/ratings``)
gets None while the first one is made; one that may (``of``: ``panelist ratings``) waits.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import cast

from panelist.metrics.home import Home
from panelist.metrics.ledger import bradleyterry, raceevidence, suiteevidence
from panelist.metrics.stats import Z95

ALPHA = 0.05  # the family-wise error rate a suggestion is held to
SLOW_WORK = 1000  # players² + pairs past which a fit is slow (some tens of ms, or more)
REST = 4  # a slow fit is redone no sooner than this many times its own length after it ended


log = logging.getLogger("panelist.ratings")


def z_for(family: int, alpha: float = ALPHA) -> float:
    """The two-sided normal quantile for ``family`` comparisons at a family-wise ``alpha``
    (Bonferroni: each at ``alpha / family``)."""
    return NormalDist().inv_cdf(1 - alpha / (2 * max(1, family)))


@dataclass(frozen=True)
class Rated:
    """One model's rating on one shape."""

    alias: str
    theta: float  # log-strength; 0 is the average model
    se: float  # standard error of theta, from the units of evidence (clustered)
    wins: float  # comparisons it won
    losses: float  # comparisons it lost
    clusters: float = 0  # units of evidence (panels, race inputs, suite tasks) it is in

    def bounds(self, z: float = Z95) -> tuple[float, float]:
        """The interval on the rating at normal quantile ``z``."""
        return (
            bradleyterry.chance(self.theta - z * self.se),
            bradleyterry.chance(self.theta + z * self.se),
        )

    def public(self) -> dict:
        lo, hi = self.bounds()
        return {
            "alias": self.alias,
            "rating": round(bradleyterry.chance(self.theta), 4),
            "interval": [round(lo, 4), round(hi, 4)],
            "strength": round(self.theta, 4),
            "se": round(self.se, 4),
            "wins": _whole(self.wins),
            "losses": _whole(self.losses),
            "clusters": _whole(self.clusters),
        }


def _whole(x: float):
    return int(x) if float(x).is_integer() else round(x, 3)


@dataclass
class ShapeRatings:
    """Every rated model of one shape, strongest first, and where its comparisons came from."""

    shape: str
    models: list[Rated] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)  # "verdicts"/"suite"/"races" -> n
    pairs: int = 0  # pairs of models compared at least once
    clusters: dict[str, int] = field(default_factory=dict)  # per source, its units of evidence

    def of(self, alias: str) -> Rated | None:
        return next((r for r in self.models if r.alias == alias), None)

    def by_alias(self) -> dict[str, Rated]:
        return {r.alias: r for r in self.models}

    def public(self) -> dict:
        return {
            "shape": self.shape,
            "comparisons": sum(self.sources.values()),
            "sources": dict(self.sources),
            "clusters": dict(self.clusters),
            "models": [r.public() for r in self.models],
        }


def units_of(found: dict) -> dict[tuple, int]:
    """One source's ``{pattern: units}``. Plain pair counts (``{(better, worse): n}``, keys of
    two names) are taken as ``n`` units of one pair each: independent comparisons."""
    first = next(iter(found), None)
    if not first or not isinstance(first[0], str):
        return found
    return {(pair,): n for pair, n in found.items()}


def rate(shape: str, sources: dict[str, dict]) -> ShapeRatings:
    """Fit the ratings of ``shape`` from ``{source name: {pattern: units}}`` (``units_of``:
    plain pair counts are accepted too, each pair its own unit)."""
    wins: dict[tuple[str, str], float] = {}
    given = {name: units_of(found) for name, found in sources.items()}
    comparisons_of, units = {}, {}
    for name, found in given.items():
        made = 0
        for key, n in found.items():
            made += n * len(key)
            for pair in key:
                wins[pair] = wins.get(pair, 0) + n
        comparisons_of[name] = made
        units[name] = sum(found.values())
    seen_by = [found for found in given.values() if found]  # each source's patterns
    if len(seen_by) == 1:
        clusters = seen_by[0]
    else:  # a pattern two sources both saw is counted for each
        merged: dict[tuple, int] = {}
        for found in seen_by:
            for key, n in found.items():
                merged[key] = merged.get(key, 0) + n
        clusters = merged
    comparisons = bradleyterry.Comparisons(wins)
    theta = bradleyterry.fit(comparisons)
    se, seen = bradleyterry.errors(comparisons, theta, clusters)
    totals = comparisons.totals()
    models = [
        Rated(a, t, s, w, l, c)
        for a, t, s, (w, l), c in zip(comparisons.players, theta, se, totals, seen)
    ]
    models.sort(key=lambda r: (-r.theta, r.alias))
    return ShapeRatings(shape, models, comparisons_of, len(comparisons.cells), units)


def slow(fitted: ShapeRatings) -> bool:
    """Whether refitting ``fitted`` is slow: the work of a fit grows with the players squared
    and the pairs compared (``bradleyterry.fit`` and ``errors``); counted, not timed, so a loaded
    machine decides the same."""
    return len(fitted.models) ** 2 + fitted.pairs > SLOW_WORK


def slow_to_fit(sources: dict[str, dict]) -> bool:
    """``slow`` before a fit: the same count from the patterns themselves (O(patterns))."""
    players: set[str] = set()
    pairs: set[frozenset] = set()
    for found in sources.values():
        for key in units_of(found):
            for pair in key:
                players.update(pair)
                pairs.add(frozenset(pair))
    return len(players) ** 2 + len(pairs) > SLOW_WORK


def _same(kept: tuple, now: tuple) -> bool:
    return kept[0] == now[0] and all(a is b or a == b for a, b in zip(kept[1:], now[1:]))


class Ratings:
    """The ratings of one data folder, over its ledger, suite samples and race reports; one
    fit per shape is kept and reused while its counts are unchanged, and a slow one is redone
    on a thread of its own while callers read the last (see the module's cost)."""

    def __init__(
        self,
        ledger,
        suite: suiteevidence.SuiteEvidence,
        races: raceevidence.RaceEvidence,
        *,
        rest: float = REST,
    ):
        self.ledger = ledger
        self.rest = rest  # a slow fit's pause after it, in multiples of its length (``REST``)
        self.suite = suite
        self.races = races
        self._lock = threading.Lock()
        # (stamp, when it was made, the fit, the seconds it took)
        self._fits: dict[str, tuple[tuple, float, ShapeRatings, float]] = {}
        self._fitting: dict[str, threading.Thread] = {}  # shape -> its background fit
        self._reading = threading.Lock()  # held while a background fit copies its sources
        self._closed = False

    @classmethod
    def of_home(cls, home: Home, ledger, suite=None, *, rest: float = REST) -> "Ratings":
        return cls(
            ledger,
            suite or suiteevidence.SuiteEvidence.of_home(home),
            raceevidence.RaceEvidence(home.races),
            rest=rest,
        )

    def sources(self, shape: str) -> dict[str, dict[tuple, int]]:
        """``{source: {pattern: units}}`` of ``shape``: panels, suite tasks, race inputs."""
        found = {"verdicts": self.ledger.patterns(shape)}
        if shape == suiteevidence.SHAPE:
            found["suite"] = self.suite.patterns()
        if shape == raceevidence.SHAPE:
            found["races"] = self.races.patterns()
        return found

    def shapes(self) -> list[str]:
        """The shapes with any comparison."""
        found = set(self.ledger.paired_shapes())
        if self.suite.patterns():
            found.add(suiteevidence.SHAPE)
        if self.races.patterns():
            found.add(raceevidence.SHAPE)
        return sorted(found)

    def _stamp(self, shape: str) -> tuple:
        """What tells whether ``shape``'s sources changed: the ledger's stamp (O(1)), and
        the suite's and races' patterns themselves (a few hundred units at most)."""
        return (
            self.ledger.patterns_stamp(shape),
            self.suite.patterns() if shape == suiteevidence.SHAPE else None,
            self.races.patterns() if shape == raceevidence.SHAPE else None,
        )

    def of(self, shape: str, *, max_age: float = 0.0) -> ShapeRatings:
        """The ratings of ``shape``, refitted when its counts changed: at once when the fit is
        quick; when it is slow, the last fit is returned and a background fit started (no
        sooner than ``max_age`` seconds after the last). With no fit yet, the caller waits for
        the first. A look at unchanged counts compares stamps, not the counts."""
        return cast(ShapeRatings, self._look(shape, max_age, wait=True))

    def ready(self, shape: str, *, max_age: float = 0.0) -> ShapeRatings | None:
        """``of`` for a caller that may not wait for a slow fit: None while the first fit of
        ``shape`` is made in the background."""
        return self._look(shape, max_age, wait=False)

    def _look(self, shape: str, max_age: float, wait: bool) -> ShapeRatings | None:
        stamp = self._stamp(shape)  # before the sources: a change between them refits later
        with self._lock:
            hit = self._fits.get(shape)
            if hit is not None and _same(hit[0], stamp):
                return hit[2]
            if hit is not None and slow(hit[2]):
                # at most one fit per REST times its own length: a roster whose verdicts never
                # stop keeps a background fit from taking more than a share of the interpreter
                if time.monotonic() - hit[1] >= max(max_age, self.rest * hit[3]):
                    self._start(shape)
                return hit[2]
            running = self._fitting.get(shape)
        if running is not None:  # a first fit under way
            if not wait:
                return None
            running.join()
            with self._lock:
                kept = self._fits.get(shape)
            if kept is not None:
                return kept[2]
            # it failed (the database away): fit here, where the error reaches the caller
        sources = self.sources(shape)
        if hit is None and not wait and slow_to_fit(sources):
            with self._lock:
                self._start(shape)
            return None
        t0 = time.monotonic()
        fitted = rate(shape, sources)
        self._keep(shape, stamp, fitted, time.monotonic() - t0)
        return fitted

    def refitting(self, shape: str) -> bool:
        """Whether a newer fit of ``shape`` than the one ``of`` returns is being made."""
        with self._lock:
            return shape in self._fitting

    def idle(self) -> bool:
        """Wait until no background fit runs (True, for a caller's assert)."""
        while True:
            with self._lock:
                running = next(iter(self._fitting.values()), None)
            if running is None:
                return True
            running.join()

    def close(self) -> None:
        """No background fit starts or reads from now on; one still reading the ledger (which
        closes next) finishes its read first. One already fitting its copies is not waited
        for: a large fit takes seconds, and it writes nothing."""
        with self._lock:
            self._closed = True
        with self._reading:
            pass

    def _keep(self, shape: str, stamp: tuple, fitted: ShapeRatings, took: float) -> None:
        with self._lock:
            self._fits[shape] = (stamp, time.monotonic(), fitted, took)

    def _start(self, shape: str) -> threading.Thread | None:
        """Under ``_lock``: fit ``shape`` on a thread of its own, unless one already does (or
        the book is closed); that thread."""
        running = self._fitting.get(shape)
        if running is not None or self._closed:
            return running
        thread = threading.Thread(
            target=self._fit_behind, args=(shape,), name=f"ratings-{shape}", daemon=True
        )
        self._fitting[shape] = thread
        thread.start()
        return thread

    def _fit_behind(self, shape: str) -> None:
        try:
            with self._reading:  # what is read of the ledger, read before it can close
                if self._closed:
                    return
                stamp = self._stamp(shape)
                sources = self.sources(shape)
            t0 = time.monotonic()
            fitted = rate(shape, sources)
            self._keep(shape, stamp, fitted, time.monotonic() - t0)
        except Exception:  # the database away: the last fit stays, and the next look retries
            log.warning("refitting the ratings of %s failed", shape, exc_info=True)
        finally:
            with self._lock:
                self._fitting.pop(shape, None)

    def all(self) -> list[ShapeRatings]:
        return [self.of(s) for s in self.shapes()]
