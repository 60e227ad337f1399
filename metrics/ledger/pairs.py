"""Pairwise outcomes of verdicts: per shape, how often one model's answer was judged useful and
another's not useful on the same panel (the comparisons the ratings are fitted from).

Invariants:

* ``wins[shape][(a, b)]`` is the number of panels of that shape where a call of ``a`` has a
  current useful verdict and a call of ``b`` a current not-useful one; a pair judged alike (both
  useful, or both not) is a tie and counts nowhere; two seats of one model never compare.
* The current verdicts of the most recent ``kept`` panels with a verdict are held (panel ->
  ``[shape, call, alias, useful, call, alias, useful, ...]``), so a replacing verdict uncounts
  its predecessor's pairs in O(seats). A verdict on a panel that has left the map still counts
  with its model's useful counts (``Index.counts``) but changes no pair: the pairs a panel
  made stay as they were when it left.
* A panel has one shape, its first verdict's; a verdict naming another is foreign and skipped.
"""

from __future__ import annotations

from collections import OrderedDict


class Pairs:
    """The pairwise counts, fed verdict by verdict in log order by ``Index``."""

    __slots__ = ("kept", "wins", "panels")

    def __init__(self, kept: int):
        self.kept = max(1, int(kept))
        self.wins: dict[str, dict[tuple[str, str], int]] = {}
        self.panels: OrderedDict[str, list] = OrderedDict()

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
                self._count(entry, i, -1)
                entry[i + 1], entry[i + 2] = alias, useful
                self._count(entry, i, +1)
                return
        entry += (call, alias, useful)
        self._count(entry, len(entry) - 3, +1)

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

    def copy(self) -> "Pairs":
        other = Pairs(self.kept)
        other.wins = {s: dict(w) for s, w in self.wins.items()}
        other.panels = OrderedDict((p, list(e)) for p, e in self.panels.items())
        return other

    def encode(self) -> dict:
        return {"wins": [[s, a, b, n] for s, w in self.wins.items() for (a, b), n in w.items()],
                "panels": [[p, *e] for p, e in self.panels.items()]}

    @classmethod
    def decode(cls, data: dict, kept: int, intern) -> "Pairs":
        pairs = cls(kept)
        for s, a, b, n in data["wins"]:
            if not (isinstance(n, int) and n > 0):
                raise ValueError("a pair count is not a positive whole number")
            pairs.wins.setdefault(intern(s), {})[(intern(a), intern(b))] = n
        for p, shape, *rest in data["panels"]:
            if len(rest) % 3:
                raise ValueError("a panel's verdicts are not (call, alias, useful) triples")
            entry = [intern(shape)]
            for k in range(0, len(rest), 3):
                entry += (rest[k], intern(rest[k + 1]), bool(rest[k + 2]))
            pairs.panels[p] = entry
        while len(pairs.panels) > pairs.kept:
            pairs.panels.popitem(last=False)
        return pairs
