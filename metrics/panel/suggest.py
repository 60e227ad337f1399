"""Suggestions to change a collection: a model rated clearly above a member on the same shape
of work. The one rule behind a reply's ``bench.suggest`` and ``panelist collection suggest``.

The ratings are ``ledger.ratings``' (a Bradley–Terry fit over verdict pairs, suite units and
race inputs, its intervals counted in the panels, tasks and inputs the pairs came from, so a
panel's several pairs are not taken for independent evidence). "Clearly" means the two
intervals do not overlap after a Bonferroni correction for the number of candidates compared:
with ``m`` rated non-members each interval is taken at ``1 - 0.05 / m``, so among many equally
good models a suggestion stays rare (at most about one in twenty families of comparisons),
while a truly better one is suggested once its comparisons narrow the intervals. A model without comparisons, or a member without any, is never part of
a suggestion: nothing is known.

Invariants: each member is named at most once and each model suggested at most once, pairing
the best-supported model (highest lower bound) with the weakest member (lowest upper bound)
first; retired models and the collection's own members are never suggested. Nothing is
changed: a person decides, with ``panelist collection save``.
"""

from __future__ import annotations

from typing import TypeGuard

from panelist.metrics.ledger.ratings import Rated, Ratings, ShapeRatings, z_for
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import RosterView

CANDIDATES_SHOWN = 5  # non-members listed as evidence when there is no suggestion
# seconds a reply's suggestion may lag the newest verdicts when the ratings are slow to fit
# (a large roster), so a stream of verdicts does not refit them at every seating
REPLY_AGE = 10.0


def _rounded(interval: tuple[float, float]) -> list[float]:
    return [round(interval[0], 3), round(interval[1], 3)]


def _compared(r: Rated | None) -> TypeGuard[Rated]:
    return r is not None and r.wins + r.losses > 0


def evidence(
    collection: Collection, roster: RosterView, ratings: ShapeRatings
) -> tuple[list, list, float]:
    """``(members, candidates, z)``: the rated members, weakest first, and the rated
    non-members that could be suggested, strongest first, as ``(Rated, interval)`` at the
    corrected quantile ``z``."""
    rated = ratings.by_alias()
    candidates = [
        rated[a]
        for a, m in roster.models.items()
        if a not in collection.members and not m.retired and _compared(rated.get(a))
    ]
    z = z_for(len(candidates))
    members = [(r, r.bounds(z)) for a in collection.members if _compared(r := rated.get(a))]
    found = [(r, r.bounds(z)) for r in candidates]
    members.sort(key=lambda x: (x[1][1], x[0].alias))
    found.sort(key=lambda x: (-x[1][0], -(x[0].wins + x[0].losses), x[0].alias))
    return members, found, z


def suggestions(
    collection: Collection, roster: RosterView, ratings: ShapeRatings, shape: str
) -> list[dict]:
    """Each ``{"alias", "instead_of", "shape", "rating", "interval", "member_rating",
    "member_interval", "compared"}`` where ``alias`` is rated clearly above the member
    ``instead_of`` on ``shape`` (intervals corrected for ``compared`` candidates)."""
    members, candidates, _ = evidence(collection, roster, ratings)
    out = []
    for (member, mb), (cand, cb) in zip(members, candidates):
        if not cb[0] > mb[1]:
            break  # both lists are ordered, so no later pair can do better
        out.append(
            {
                "alias": cand.alias,
                "instead_of": member.alias,
                "shape": shape,
                "rating": cand.public()["rating"],
                "interval": _rounded(cb),
                "member_rating": member.public()["rating"],
                "member_interval": _rounded(mb),
                "compared": len(candidates),
            }
        )
    return out


class ReplySuggestions:
    """A reply's ``bench.suggest``: ``suggestions`` over the data folder's ratings, worked out
    again only when what it reads changed. A collection, a roster view and a shape's fit stay
    the same objects until their file or the counts behind them change (``configfile.Cached``,
    ``Ratings.of``). The list handed out is shared: a reply only reads it."""

    def __init__(self, book: Ratings):
        self.book = book
        self._last: tuple = (None, None, None, None, [])

    def of(self, collection: Collection, roster: RosterView, shape: str) -> list:
        fit = self.book.ready(shape, max_age=REPLY_AGE)
        if fit is None:  # the first fit of a large roster is being made: no reply waits for it
            return []
        last = self._last
        if last[0] is collection and last[1] is roster and last[2] is fit and last[3] == shape:
            return last[4]
        found = suggestions(collection, roster, fit, shape)
        self._last = (collection, roster, fit, shape, found)  # one tuple: swapped whole
        return found


def _row(seat: str, r: Rated, bounds) -> dict:
    p = r.public()
    return {
        "seat": seat,
        "alias": r.alias,
        "rating": p["rating"],
        "wins": p["wins"],
        "losses": p["losses"],
        "interval": _rounded(bounds),
    }


def report(collection: Collection, roster: RosterView, ratings: ShapeRatings, shape: str) -> dict:
    """The suggestions plus the evidence behind them (every rated member, and the strongest
    rated non-members, with their corrected intervals), for ``panelist collection suggest``."""
    members, candidates, z = evidence(collection, roster, ratings)
    rows = [_row("member", r, b) for r, b in members]
    rows += [_row("candidate", r, b) for r, b in candidates[:CANDIDATES_SHOWN]]
    rated = {r.alias for r, _ in members}
    return {
        "collection": collection.model_id,
        "shape": shape,
        "suggest": suggestions(collection, roster, ratings, shape),
        "compared": len(candidates),
        "z": round(z, 4),
        "evidence": rows,
        "members_without_verdicts": [a for a in collection.members if a not in rated],
    }
