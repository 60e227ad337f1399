"""Pairwise outcomes of verdicts: per shape, how often one model's answer was judged useful and
another's not useful on the same panel (the comparisons the ratings are fitted from), and the
pattern of those outcomes each panel made (what the ratings' intervals are estimated from).

Invariants:

* ``wins[shape][(a, b)]`` is the number of panels of that shape where a call of ``a`` has a
  current useful verdict and a call of ``b`` a current not-useful one; a pair judged alike (both
  useful, or both not) is a tie and counts nowhere; two seats of one model never compare.
* ``patterns[shape][key]`` is how many panels of that shape made exactly the outcomes ``key``
  (``pattern``: the sorted tuple of a panel's ``(better, worse)`` pairs, a pair repeated when
  two seats of one model made it). A panel is one unit of evidence, its pairs are not
  independent (one useful answer on a four-seat panel beats up to three), so the ratings need
  each panel's pairs together; two panels with the same outcomes need only a count. A panel
  that made no pair is in no pattern. Summing each pattern's pairs times its count gives
  ``wins`` exactly, always.
* The current verdicts of the most recent ``kept`` panels with a verdict are held (panel ->
  ``[shape, call, alias, useful, call, alias, useful, ...]``), so a replacing verdict uncounts
  its predecessor's pairs and moves the panel from its old pattern to its new one in O(seats²).
  A verdict on a panel that has left the map still counts with its model's useful counts
  (``Index.counts``) but changes none of the pairs or the pattern that panel made: they stay as
  they were when it left. The verdict starts a new entry, which makes pairs (and a pattern, a
  panel of its own) only with later verdicts on the same panel.
* A panel has one shape, its first verdict's; a verdict naming another is foreign and skipped.
* ``stamp(shape)`` changes whenever that shape's counts do (a number no other change in this
  process was given, so a reader that kept a fit can tell in O(1) it is still current).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

_STAMPS = itertools.count(1)  # shared by every Pairs of the process: a stamp is never reused


def pattern(entry: list) -> tuple:
    """The sorted ``(better, worse)`` pairs of one panel entry (``[shape, call, alias, useful,
    ...]``): the key its outcomes are counted under."""
    found = []
    for i in range(2, len(entry), 3):
        if not entry[i + 1]:
            continue
        alias = entry[i]
        for j in range(2, len(entry), 3):
            if not entry[j + 1] and entry[j] != alias:
                found.append((alias, entry[j]))
    found.sort()
    return tuple(found)


def pairs_of(patterns: dict[tuple, int]) -> dict[tuple[str, str], int]:
    """``{(better, worse): count}`` summed over ``{pattern: units}``."""
    out: dict[tuple[str, str], int] = {}
    for key, n in patterns.items():
        for pair in key:
            out[pair] = out.get(pair, 0) + n
    return out


class Pairs:
    """The pairwise counts and panel patterns, fed verdict by verdict in log order by
    ``Index``."""

    __slots__ = ("kept", "wins", "patterns", "panels", "stamps")

    def __init__(self, kept: int):
        self.kept = max(1, int(kept))
        self.wins: dict[str, dict[tuple[str, str], int]] = {}
        self.patterns: dict[str, dict[tuple, int]] = {}
        self.panels: OrderedDict[str, list] = OrderedDict()
        self.stamps: dict[str, int] = {}

    def stamp(self, shape: str) -> int:
        """A number that changes whenever ``shape``'s counts do (0: never counted here)."""
        return self.stamps.get(shape, 0)

    def fold(self, panel: str, call: str, alias: str, shape: str, useful: bool) -> None:
        """Count a call's current verdict on ``panel``."""
        entry = self.panels.get(panel)
        if entry is None:
            entry = self.panels[panel] = [shape]
            while len(self.panels) > self.kept:
                self.panels.popitem(last=False)
        elif entry[0] != shape:
            return
        else:
            self.panels.move_to_end(panel)
        for i in range(1, len(entry), 3):
            if entry[i] == call:
                if entry[i + 1] == alias and entry[i + 2] == useful:
                    return
                before = pattern(entry)
                self._count(entry, i, -1)
                entry[i + 1], entry[i + 2] = alias, useful
                self._count(entry, i, +1)
                self._move(shape, before, pattern(entry))
                return
        before = pattern(entry) if len(entry) > 4 else ()
        entry += (call, alias, useful)
        self._count(entry, len(entry) - 3, +1)
        self._move(shape, before, pattern(entry))

    def _move(self, shape: str, before: tuple, after: tuple) -> None:
        """One panel's outcomes went from ``before`` to ``after``."""
        if before == after:
            return
        self.stamps[shape] = next(_STAMPS)
        counts = self.patterns.get(shape)
        if counts is None:
            counts = self.patterns[shape] = {}
        if before:
            n = counts.get(before, 0) - 1
            if n > 0:
                counts[before] = n
            else:  # (a pattern missing here could only come of a hand-edited snapshot)
                counts.pop(before, None)
        if after:
            counts[after] = counts.get(after, 0) + 1

    def _count(self, entry: list, i: int, step: int) -> None:
        alias, useful = entry[i + 1], entry[i + 2]
        wins = self.wins.get(entry[0])
        if wins is None:
            wins = self.wins[entry[0]] = {}
        for j in range(1, len(entry), 3):
            other = entry[j + 1]
            if j == i or entry[j + 2] == useful or other == alias:
                continue
            pair = (alias, other) if useful else (other, alias)
            n = wins.get(pair, 0) + step
            if n:
                wins[pair] = n
            else:
                del wins[pair]

    def of(self, shape: str) -> dict[tuple[str, str], int]:
        """A copy of one shape's counts."""
        return dict(self.wins.get(shape, ()))

    def patterns_of(self, shape: str) -> dict[tuple, int]:
        """A copy of one shape's pattern counts (``{pattern: panels}``)."""
        return dict(self.patterns.get(shape, ()))

    def copy(self) -> "Pairs":
        other = Pairs(self.kept)
        other.wins = {s: dict(w) for s, w in self.wins.items()}
        other.patterns = {s: dict(c) for s, c in self.patterns.items()}
        other.panels = OrderedDict((p, list(e)) for p, e in self.panels.items())
        other.stamps = dict(self.stamps)
        return other

    def encode(self) -> dict:
        # a pattern is written flat: [shape, panels, better, worse, better, worse, ...]
        return {
            "wins": [[s, a, b, n] for s, w in self.wins.items() for (a, b), n in w.items()],
            "patterns": [
                [s, n, *(x for pair in key for x in pair)]
                for s, c in self.patterns.items()
                for key, n in c.items()
            ],
            "panels": [[p, *e] for p, e in self.panels.items()],
        }

    @classmethod
    def decode(cls, data: dict, kept: int, intern) -> "Pairs":
        pairs = cls(kept)
        for s, a, b, n in data["wins"]:
            if not (isinstance(n, int) and n > 0):
                raise ValueError("a pair count is not a positive whole number")
            pairs.wins.setdefault(intern(s), {})[(intern(a), intern(b))] = n
        names: dict = {}  # one copy of each name, looked up once (a file has many patterns)
        for row in data["patterns"]:
            n = row[1]
            if not (n.__class__ is int and n > 0) or len(row) < 4 or len(row) % 2:
                raise ValueError("a pattern is not a positive count of (better, worse) pairs")
            # written sorted (``encode`` of canonical keys): read as they stand
            flat = iter([names.get(x) or names.setdefault(x, intern(x)) for x in row[2:]])
            shape = row[0]
            counts = pairs.patterns.get(shape)
            if counts is None:
                counts = pairs.patterns[intern(shape)] = {}
            counts[tuple(zip(flat, flat))] = n
        for p, shape, *rest in data["panels"]:
            if len(rest) % 3:
                raise ValueError("a panel's verdicts are not (call, alias, useful) triples")
            entry = [intern(shape)]
            for k in range(0, len(rest), 3):
                entry += (rest[k], intern(rest[k + 1]), bool(rest[k + 2]))
            pairs.panels[p] = entry
        while len(pairs.panels) > pairs.kept:
            pairs.panels.popitem(last=False)
        pairs.stamps = {shape: next(_STAMPS) for shape in pairs.patterns}
        return pairs
