"""Suggestions to change a collection: a model whose answers are clearly more useful than a
member's, on the same shape of work.

"Clearly" means the 95% Wilson intervals of the two useful rates do not overlap (``stats``). A
model with no verdicts, or a member with none, is never part of a suggestion: nothing is known.
Invariants: each member is named at most once and each model suggested at most once, pairing the
best-supported model (highest lower bound) with the weakest member (lowest upper bound) first;
retired models and the collection's own members are never suggested. Nothing is changed: a
person decides, with ``panelist collection save``.
"""

from __future__ import annotations

from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import RosterView
from panelist.metrics.stats import clearly_above, wilson

CANDIDATES_SHOWN = 5  # non-members listed as evidence when there is no suggestion


def _rounded(interval: tuple[float, float]) -> list[float]:
    return [round(interval[0], 3), round(interval[1], 3)]


def _judged(alias: str, state) -> dict | None:
    if state is None or not (state.useful or state.not_useful):
        return None  # the common case on a long roster: nothing to compute
    n = state.useful + state.not_useful
    return {"alias": alias, "useful": state.useful, "of": n,
            "interval": wilson(state.useful, n)}


def evidence(collection: Collection, roster: RosterView, states: dict) -> tuple[list, list]:
    """``(members, candidates)``: the judged members, weakest first, and the judged non-members
    that could be suggested, strongest first. ``states`` maps aliases to their ledger state."""
    members, candidates = [], []
    for alias in collection.members:
        row = _judged(alias, states.get(alias))
        if row is not None:
            members.append(row)
    for alias, model in roster.models.items():
        if alias in collection.members or model.retired:
            continue
        row = _judged(alias, states.get(alias))
        if row is not None:
            candidates.append(row)
    members.sort(key=lambda r: (r["interval"][1], r["alias"]))
    candidates.sort(key=lambda r: (-r["interval"][0], -r["of"], r["alias"]))
    return members, candidates


def suggestions(collection: Collection, roster: RosterView, states: dict,
                shape: str) -> list[dict]:
    """Each ``{"alias", "instead_of", "shape", "useful", "of", "interval", "member_interval"}``
    where ``alias`` is clearly more useful than the member ``instead_of`` on ``shape``."""
    members, candidates = evidence(collection, roster, states)
    out = []
    for member, candidate in zip(members, candidates):
        if not clearly_above(candidate["interval"], member["interval"]):
            break  # both lists are ordered, so no later pair can do better
        out.append({"alias": candidate["alias"], "instead_of": member["alias"], "shape": shape,
                    "useful": candidate["useful"], "of": candidate["of"],
                    "interval": _rounded(candidate["interval"]),
                    "member_interval": _rounded(member["interval"])})
    return out


def report(collection: Collection, roster: RosterView, states: dict, shape: str) -> dict:
    """The suggestions plus the evidence behind them (every judged member, and the strongest
    judged non-members), for ``panelist collection suggest``."""
    members, candidates = evidence(collection, roster, states)
    rows = [dict(r, seat="member", interval=_rounded(r["interval"])) for r in members]
    rows += [dict(r, seat="candidate", interval=_rounded(r["interval"]))
             for r in candidates[:CANDIDATES_SHOWN]]
    unjudged = [a for a in collection.members if _judged(a, states.get(a)) is None]
    return {"collection": collection.model_id, "shape": shape,
            "suggest": suggestions(collection, roster, states, shape),
            "evidence": rows, "members_without_verdicts": unjudged}
