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
  model: any other status but ``cancelled``, ``at_limit`` and ``memory``, where the model was not
  asked, no longer needed, or its answer found no room in the server's memory budget), prompt and completion tokens (of seats that reported whole counts), answers
  without token counts, and a sparse histogram of answered seats' seconds (``histogram``).
* Each window also keeps the sum of its closed slots (all but the one holding now), made when
  a slot turns and kept up as seats come in late (a panel started before the turn), so a
  window costs its current slot and its aliases; once a slot, O(its slots x their aliases),
  when the slot turns. Never a rescan.
* A seat older than the longest window when it is folded is not kept (time only moves on, so
  it can never come back into one), nor one dated more than a day ahead (a broken clock);
  slots that left their window are dropped as time moves on.
"""

from __future__ import annotations

WINDOWS = {"hour": (300, 12), "day": (3600, 24), "week": (86400, 7)}  # slot seconds, slots
_AHEAD = 86400.0
_OLDEST = -(1 << 62)
# a slot's row per alias: [seats, answered, failed, prompt, completion, uncounted, hist]
SEATS, ANSWERED_N, FAILED, PROMPT, COMPLETION, UNCOUNTED, HIST = range(7)
ANSWER, FAILURE, NEITHER = 0, 1, 2  # a seat's outcome, as ``fold`` takes it


_NONE: dict = {}


def _row() -> list:
    return [0, 0, 0, 0, 0, 0, {}]


def _add(rows: dict, alias: str, outcome: int, bucket, prompt, completion) -> None:
    row = rows.get(alias)
    if row is None:
        row = rows[alias] = _row()
    row[SEATS] += 1
    if outcome == FAILURE:
        row[FAILED] += 1
    elif outcome == ANSWER:
        row[ANSWERED_N] += 1
        if bucket is not None:
            hist = row[HIST]
            hist[bucket] = hist.get(bucket, 0) + 1
    if prompt is not None:
        row[PROMPT] += prompt
        row[COMPLETION] += completion
    elif outcome == ANSWER:
        row[UNCOUNTED] += 1


def merge(into: dict, rows: dict) -> None:
    """Add each ``{alias: row}`` of ``rows`` into ``into``'s (a row new there is copied)."""
    for alias, row in rows.items():
        acc = into.get(alias)
        if acc is None:
            into[alias] = [*row[:HIST], dict(row[HIST])]
            continue
        for i in range(HIST):
            acc[i] += row[i]
        hist = acc[HIST]
        for b, k in row[HIST].items():
            hist[b] = hist.get(b, 0) + k


class _Tier:
    """The slots of one width, and the sum of the window's closed slots (those before the one
    holding "now"), kept so a window costs its current slot, not all of its slots."""

    __slots__ = ("width", "count", "slots", "floor", "closed")

    def __init__(self, width: int, count: int):
        self.width, self.count = width, count
        self.slots: dict[int, dict[str, list]] = {}  # slot number -> alias -> row
        self.floor = _OLDEST  # slots below it are gone
        self.closed: tuple | None = None  # (first, last, alias -> summed row)


class Usage:
    """The windows' slots of one index; the caller serialises access (the ledger's lock)."""

    def __init__(self):
        # widest first: a seat too old for it is too old for every narrower one
        self._tiers = [_Tier(w, k) for w, k in sorted(set(WINDOWS.values()), reverse=True)]
        self._by_width = {t.width: t for t in self._tiers}
        self._late = float("inf")
        self.kept_from = float("-inf")  # the oldest panel start a window keeps (a quick test)

    @property
    def tiers(self) -> dict[int, dict[int, dict[str, list]]]:
        return {t.width: t.slots for t in self._tiers}

    def advance(self, now: float) -> None:
        """Time is ``now``: drop the slots that left their window."""
        self._late = now + _AHEAD
        for tier in self._tiers:
            floor = int(now // tier.width) - tier.count + 1
            if floor > tier.floor:
                tier.floor = floor
                for old in [n for n in tier.slots if n < floor]:
                    del tier.slots[old]
        widest = self._tiers[0]
        self.kept_from = float(widest.floor * widest.width)

    def fold(
        self,
        alias: str,
        seated: float,
        outcome: int,
        bucket: int | None,
        prompt: int | None,
        completion: int | None,
    ) -> None:
        """One seat of ``alias`` whose panel started at ``seated``: ``outcome`` is ``ANSWER``,
        ``FAILURE`` or ``NEITHER``; ``bucket`` its answer time's (answers only); ``prompt`` and
        ``completion`` its token counts, both None when not reported whole."""
        if seated > self._late:
            return
        for tier in self._tiers:
            n = int(seated // tier.width)
            if n < tier.floor:
                return
            per = tier.slots.get(n)
            if per is None:
                per = tier.slots[n] = {}
            _add(per, alias, outcome, bucket, prompt, completion)
            closed = tier.closed
            if closed is not None and closed[0] <= n <= closed[1]:
                # a seat of a panel that started before the slot turned: counted in the sum too
                _add(closed[2], alias, outcome, bucket, prompt, completion)

    def window(self, name: str, now: float) -> tuple[float, dict[str, list]]:
        """``(since, {alias: row})`` of window ``name`` at ``now``, the slots' rows summed."""
        tier = self._by_width[WINDOWS[name][0]]
        current = int(now // tier.width)
        first = current - tier.count + 1
        closed = tier.closed
        if closed is None or closed[0] != first or closed[1] != current - 1:
            rows: dict[str, list] = {}
            for n in range(first, current):
                merge(rows, tier.slots.get(n) or {})
            closed = tier.closed = (first, current - 1, rows)
        out: dict[str, list] = {}
        merge(out, closed[2])
        merge(out, tier.slots.get(current) or {})
        return float(first * tier.width), out

    def slots(self, name: str, now: float) -> tuple[int, int, list[dict[str, list]]]:
        """``(first slot's start, slot seconds, [{name: row} per slot])`` of window ``name`` at
        ``now``, oldest first, the last the slot holding ``now``: O(its slots), summing
        nothing."""
        width, count = WINDOWS[name]
        slots = self._by_width[width].slots
        current = int(now // width)
        return (
            (current - count + 1) * width,
            width,
            [slots.get(n, _NONE) for n in range(current - count + 1, current + 1)],
        )

    def rows(self, name: str, now: float, keys) -> list[list | None]:
        """The rows of ``keys`` per slot of window ``name`` at ``now`` (each None when no key
        had a seat in it; the rows of several keys summed into a new one)."""
        _, _, slots = self.slots(name, now)
        keys = list(keys)
        wanted = set(keys)
        out: list[list | None] = []
        for per in slots:
            # whichever is smaller is walked: a slot's names, or the names asked for
            found = (
                [row for k, row in per.items() if k in wanted]
                if len(per) < len(keys)
                else [row for k in keys if (row := per.get(k)) is not None]
            )
            if len(found) > 1:
                summed: dict = {}
                for row in found:
                    merge(summed, {"": row})  # the first is copied: no slot's row changes
                found = [summed[""]]
            out.append(found[0] if found else None)
        return out

    # -- snapshots --------------------------------------------------------------------------------
    def encode(self) -> list:
        return [
            [
                t.width,
                [
                    [
                        n,
                        [
                            [alias, *row[:HIST], [x for b, k in row[HIST].items() for x in (b, k)]]
                            for alias, row in per.items()
                        ],
                    ]
                    for n, per in t.slots.items()
                ],
            ]
            for t in self._tiers
        ]

    @classmethod
    def decode(cls, data: list, buckets: int, intern) -> "Usage":
        """A ``Usage`` from ``encode``'s list; a bucket outside ``range(buckets)`` or a row of
        the wrong size is a ValueError (the snapshot is then replayed)."""
        usage = cls()
        for width, slots in data:
            if int(width) not in usage._by_width:
                raise ValueError(f"no window has {width}-second slots")
            tier = usage._by_width[int(width)].slots
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
        """The slots, copied (a snapshot's; the closed sums are derived again when asked)."""
        other = Usage()
        for mine, theirs in zip(self._tiers, other._tiers):
            theirs.slots = {
                n: {a: [*row[:HIST], dict(row[HIST])] for a, row in per.items()}
                for n, per in mine.slots.items()
            }
            theirs.floor = mine.floor
        other._late, other.kept_from = self._late, self.kept_from
        return other
