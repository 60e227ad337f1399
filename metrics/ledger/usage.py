"""Seats per model over the recent windows (the last hour, day and week), for the Overview.

Part of the index's pure fold (``index.py``): ``Usage.fold`` takes one seat's alias, panel start,
outcome, answer-time bucket and tokens; ``advance`` is told the time (by ``Index.fold_all``);
nothing here opens a file or reads the clock. ``Queries.usage`` reads it.

Invariants:

* A window is a run of fixed slots ending with the slot that holds ``now`` (``WINDOWS``):
  ``hour`` twelve 5-minute slots, ``day`` twenty-four hours, ``week`` seven UTC days. Its figures
  cover from its first slot's start (``since``) to now: "hour" is the last 55 to 60 minutes,
  "week" today and the six UTC days before it. A seat counts by its panel's start.
* Each slot holds, per alias: seats, answered (``ok``, ``tool_calls``), failed (a failure of the
  model: any other status but ``cancelled`` and ``at_limit``, where the model was not asked or
  no longer needed), prompt and completion tokens (of seats that reported whole counts), answers
  without token counts, and a sparse histogram of answered seats' seconds (``histogram``). A
  window costs O(its slots x their aliases x the buckets they use), never a rescan.
* A seat older than the longest window when it is folded is not kept (time only moves on, so
  it can never come back into one), nor one dated more than a day ahead (a broken clock);
  slots that left their window are dropped as time moves on.
"""

from __future__ import annotations

WINDOWS = {"hour": (300, 12), "day": (3600, 24), "week": (86400, 7)}   # slot seconds, slots
_TIERS = sorted(set(WINDOWS.values()), reverse=True)   # widest first: the first to leave
_AHEAD = 86400.0
_OLDEST = -(1 << 62)
# a slot's row per alias: [seats, answered, failed, prompt, completion, uncounted, hist]
SEATS, ANSWERED_N, FAILED, PROMPT, COMPLETION, UNCOUNTED, HIST = range(7)
ANSWER, FAILURE, NEITHER = 0, 1, 2   # a seat's outcome, as ``fold`` takes it


def _row() -> list:
    return [0, 0, 0, 0, 0, 0, {}]


class Usage:
    """The windows' slots of one index; the caller serialises access (the ledger's lock)."""

    def __init__(self):
        # slot width -> slot number -> alias -> row
        self.tiers: dict[int, dict[int, dict[str, list]]] = {w: {} for w, _ in _TIERS}
        self._floor = {w: _OLDEST for w, _ in _TIERS}
        self._late = float("inf")

    def advance(self, now: float) -> None:
        """Time is ``now``: drop the slots that left their window."""
        self._late = now + _AHEAD
        for width, count in _TIERS:
            floor = int(now // width) - count + 1
            if floor > self._floor[width]:
                self._floor[width] = floor
                slots = self.tiers[width]
                for old in [n for n in slots if n < floor]:
                    del slots[old]

    def fold(self, alias: str, seated: float, outcome: int, bucket: int | None,
             prompt: int | None, completion: int | None) -> None:
        """One seat of ``alias`` whose panel started at ``seated``: ``outcome`` is ``ANSWER``,
        ``FAILURE`` or ``NEITHER``; ``bucket`` its answer time's (answers only); ``prompt`` and
        ``completion`` its token counts, None when not reported whole."""
        if seated > self._late:
            return
        for width, _ in _TIERS:
            n = int(seated // width)
            if n < self._floor[width]:
                return   # too old for this window, so for every narrower one too
            slots = self.tiers[width]
            per = slots.get(n)
            if per is None:
                per = slots[n] = {}
            row = per.get(alias)
            if row is None:
                row = per[alias] = _row()
            row[SEATS] += 1
            if outcome == FAILURE:
                row[FAILED] += 1
            elif outcome == ANSWER:
                row[ANSWERED_N] += 1
                if bucket is not None:
                    hist = row[HIST]
                    hist[bucket] = hist.get(bucket, 0) + 1
            if prompt is not None and completion is not None:
                row[PROMPT] += prompt
                row[COMPLETION] += completion
            elif outcome == ANSWER:
                row[UNCOUNTED] += 1

    def window(self, name: str, now: float) -> tuple[float, dict[str, list]]:
        """``(since, {alias: row})`` of window ``name`` at ``now``, the slots' rows summed."""
        width, count = WINDOWS[name]
        first = int(now // width) - count + 1
        out: dict[str, list] = {}
        slots = self.tiers[width]
        for n in range(first, first + count):
            for alias, row in (slots.get(n) or {}).items():
                acc = out.get(alias)
                if acc is None:
                    acc = out[alias] = _row()
                for i in range(HIST):
                    acc[i] += row[i]
                hist = acc[HIST]
                for b, k in row[HIST].items():
                    hist[b] = hist.get(b, 0) + k
        return float(first * width), out

    # -- snapshots --------------------------------------------------------------------------------
    def encode(self) -> list:
        return [[width, [[n, [[alias, *row[:HIST], [x for b, k in row[HIST].items()
                                                    for x in (b, k)]]
                              for alias, row in per.items()]]
                         for n, per in slots.items()]]
                for width, slots in self.tiers.items()]

    @classmethod
    def decode(cls, data: list, buckets: int, intern) -> "Usage":
        """A ``Usage`` from ``encode``'s list; a bucket outside ``range(buckets)`` or a row of
        the wrong size is a ValueError (the snapshot is then replayed)."""
        usage = cls()
        for width, slots in data:
            if int(width) not in usage.tiers:
                raise ValueError(f"no window has {width}-second slots")
            tier = usage.tiers[int(width)]
            for n, rows in slots:
                per = tier[int(n)] = {}
                for alias, *counts, flat in rows:
                    if len(counts) != HIST:
                        raise ValueError("a usage row of the wrong size")
                    hist = {}
                    for b, k in zip(flat[::2], flat[1::2], strict=True):
                        if not 0 <= int(b) < buckets:
                            raise ValueError("a histogram bucket that does not exist")
                        hist[int(b)] = int(k)
                    per[intern(alias)] = [*(int(c) for c in counts), hist]
        return usage

    def copy(self) -> "Usage":
        other = Usage()
        other.tiers = {w: {n: {a: [*row[:HIST], dict(row[HIST])] for a, row in per.items()}
                           for n, per in slots.items()} for w, slots in self.tiers.items()}
        other._floor, other._late = dict(self._floor), self._late
        return other
