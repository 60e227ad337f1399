"""Suite evidence: a model's review-suite record counted beside its verdicts when seating.

The rule, for the ``review`` shape only (a collection whose shape is ``review``; requests of
any other shape are never touched):

* each model's record in ``runs/suite/samples.jsonl`` (or, with a database, the
  ``suite_samples`` table every host writes: ``ledger.samples``) adds to the verdict counts
  seating reads (``Ledger.states``): ``useful += pairs right + claims right`` and
  ``not_useful += (pairs + claims) - (pairs right + claims right)``;
* a bug/control pair, or a claim task, counts once however many epochs asked it: right when its
  mean over epochs, rounded, is 1 (a half rounds up). A pair is right in an epoch when both its
  halves were; epochs where one half is missing do not count for it. Only each task's latest
  version counts (the report's ``results.latest``: per task, model and epoch the last scored
  sample of the task's current hash); samples whose way to the model failed never count;
* for the ratings (``ledger.ratings``), a unit (pair or claim) one model got right and another
  wrong is a comparison the first won, in the ``review`` shape; a unit is also the ratings'
  unit of evidence (``patterns``: every comparison one task made is counted together, since
  a task that is easy for one model tends to be easy for the others);
* once a model has 20 real verdicts for the shape (``REAL_ENOUGH``), its suite part is dropped:
  the callers' own judgement is then evidence enough, and a benchmark should not outvote it.

So a model with a strong suite record is seated as an explorer, picked and chosen as merger
ahead of an equal never judged, while a model the suite found weak waits behind it; the bounds
of the rotation (``panel.seating``) still hold, since weights stay between 1 and 2.

Cost: seating stays O(1) in the size of the suite log. The samples file is followed from its
last read offset (``jsonl.Tail``) and summed up again only when its size or mtime changed; a
request costs one ``stat`` and a dict lookup per model; with a database, one ``max(id)`` a
second at most, then only the rows past the last one read. A ``Panels`` owns one ``SuiteEvidence``
for its data folder (``of_home``).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from panelist.metrics.ledger import samples
from panelist.metrics.home import Home

SHAPE = "review"
REAL_ENOUGH = 20  # real verdicts for the shape past which the suite no longer counts


class SuiteEvidence:
    """Per model ``(right, counted)`` from one samples file, refreshed when the file changes."""

    @classmethod
    def of_home(cls, home: Home) -> "SuiteEvidence":
        return cls(samples.of_home(home))

    def __init__(self, source):
        """``source``: the samples (``ledger.samples``), or the path of a samples file."""
        self.samples = (
            samples.FileSamples(Path(source)) if isinstance(source, (str, Path)) else source
        )
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._tail = None  # opened at the first read: a database may be out of reach at start
        self._version: dict[str, str] = {}  # task -> hash of its latest line
        # (task, hash, model, epoch) -> (pair, kind, right), the last scored line of each
        self._scored: dict[tuple, tuple] = {}
        self._record: dict[str, tuple[int, int]] = {}
        self._pairs: dict[tuple[str, str], int] = {}
        self._patterns: dict[tuple, int] = {}

    def record(self) -> dict[str, tuple[int, int]]:
        """``{alias: (right, counted)}``: pairs and claims right, of those counted."""
        # a database's stamp is asked at most once a second: seating reads this per request
        stamp = self.samples.stamp(max_age=samples.STAMP_AGE)
        with self._lock:
            if stamp != self._stamp:
                self._follow(stamp[0])
                self._stamp = stamp
            return self._record

    def pairs(self) -> dict[tuple[str, str], int]:
        """``{(better, worse): units}`` of the latest samples (``comparisons``)."""
        self.record()
        with self._lock:
            return self._pairs

    def patterns(self) -> dict[tuple, int]:
        """``{pattern: units}``: how many units made exactly each sorted tuple of
        ``(better, worse)`` pairs (``patterns``)."""
        self.record()
        with self._lock:
            return self._patterns

    def _follow(self, size: int) -> None:
        if self._tail is None:
            self._tail = self.samples.reader()
        if size < self._tail.offset:  # replaced or truncated: start over
            self._tail = self.samples.reader()
            self._version.clear()
            self._scored.clear()
        for _, s in self._tail.read():
            if s.get("kind") != "sample" or not isinstance(s.get("task"), str):
                continue
            task, digest = s["task"], s.get("task_hash")
            self._version[task] = digest
            if s.get("outcome") == "scored":
                # the seat record's alias; lines of earlier versions named it ``model``
                alias = s["alias"] if "alias" in s else s.get("model")
                self._scored[(task, digest, alias, s.get("epoch", 1))] = (
                    s.get("pair") or task,
                    s.get("task_kind"),
                    bool(s.get("right")),
                )
        found = units(self._version, self._scored)
        self._pairs = comparisons(found)
        self._patterns = patterns(found)
        self._record = tally(found)

    def close(self) -> None:
        self.samples.close()


def units(version: dict[str, str], scored: dict[tuple, tuple]) -> dict[tuple, dict[str, bool]]:
    """``{unit: {model: right}}`` by the module's rule, a unit being a claim task
    (``("claim", task)``) or a bug/control pair (``("pair", pair)``)."""
    claims: dict[tuple, list[int]] = {}  # (model, task) -> hit per epoch
    halves: dict[tuple, dict[str, bool]] = {}  # (model, pair, epoch) -> {kind: right}
    for (task, digest, model, epoch), (pair, kind, right) in scored.items():
        if version.get(task) != digest or not isinstance(model, str):
            continue
        if kind == "claim":
            claims.setdefault((model, task), []).append(int(right))
        elif kind in ("bug", "control"):
            halves.setdefault((model, pair, epoch), {})[kind] = right
    pairs: dict[tuple, list[int]] = {}
    for (model, pair, _), got in halves.items():
        if len(got) == 2:
            pairs.setdefault((model, pair), []).append(int(all(got.values())))
    out: dict[tuple, dict[str, bool]] = {}
    for tag, found in (("claim", claims), ("pair", pairs)):
        for (model, unit), hits in found.items():
            out.setdefault((tag, unit), {})[model] = 2 * sum(hits) >= len(hits)
    return out


def summarise(version: dict[str, str], scored: dict[tuple, tuple]) -> dict:
    """``{model: (right, counted)}`` by the module's rule from the latest scored samples."""
    return tally(units(version, scored))


def tally(found: dict[tuple, dict[str, bool]]) -> dict[str, tuple[int, int]]:
    """``{model: (right, counted)}`` of ``units``."""
    out: dict[str, tuple[int, int]] = {}
    for got in found.values():
        for model, right in got.items():
            r, counted = out.get(model, (0, 0))
            out[model] = (r + right, counted + 1)
    return out


def comparisons(found: dict[tuple, dict[str, bool]]) -> dict[tuple[str, str], int]:
    """``{(better, worse): units}``: the units one model got right and the other wrong (the
    suite's part of the ratings, beside the verdicts' pairs)."""
    out: dict[tuple[str, str], int] = {}
    for got in found.values():
        right = [m for m, r in got.items() if r]
        wrong = [m for m, r in got.items() if not r]
        for a in right:
            for b in wrong:
                out[(a, b)] = out.get((a, b), 0) + 1
    return out


def patterns(found: dict[tuple, dict[str, bool]]) -> dict[tuple, int]:
    """``{pattern: units}``: the sorted ``(better, worse)`` pairs each unit made, counted
    (a unit that separated no two models makes none)."""
    out: dict[tuple, int] = {}
    for got in found.values():
        right = [m for m, r in got.items() if r]
        wrong = [m for m, r in got.items() if not r]
        key = tuple(sorted((a, b) for a in right for b in wrong))
        if key:
            out[key] = out.get(key, 0) + 1
    return out


def adjust(evidence: SuiteEvidence, states: dict, shape: str) -> dict:
    """``states`` (``Ledger.states`` for ``shape``) with suite records counted by the rule;
    the same dict, its entries replaced, for ``review``; untouched for any other shape."""
    if shape != SHAPE:
        return states
    record = evidence.record()
    if not record:
        return states
    for alias, state in states.items():
        got = record.get(alias)
        if got is None or state.useful + state.not_useful >= REAL_ENOUGH:
            continue
        right, counted = got
        states[alias] = dataclasses.replace(
            state, useful=state.useful + right, not_useful=state.not_useful + counted - right
        )
    return states
