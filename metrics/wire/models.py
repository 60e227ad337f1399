"""What ``GET /v1/models`` says about each collection, so a caller can choose before it asks.

``together`` describes the collection as a whole: the smallest known context window among its
members (roster or learned, whichever is lower) and the capabilities every member has.
"""

from __future__ import annotations

from panelist.metrics.roster.collection import REPLIES, Collection, Limits
from panelist.metrics.roster.roster import RosterView
from panelist.metrics.panel.seating import window_of

CAPABILITIES = ("vision", "tools")


def together(c: Collection, roster: RosterView, states: dict) -> dict:
    models = [roster.models[a] for a in c.members if a in roster.models]
    windows = [w for w in (window_of(m, states.get(m.alias)) for m in models) if w]
    caps = [cap for cap in CAPABILITIES if models and all(getattr(m, cap) for m in models)]
    return {"context_window": min(windows) if windows else None, "capabilities": caps}


def describe(c: Collection, roster: RosterView, limits: Limits, states: dict) -> dict:
    return {
        "id": c.model_id, "object": "model", "created": 0, "owned_by": "panelist",
        "description": c.description, "tags": list(c.tags), "members": list(c.members),
        "shape": c.shape or "general", "explorers": c.explorers(limits), "reply": c.reply,
        "merger": c.merger or None, "together": together(c, roster, states),
    }


def models_list(collections: dict[str, Collection], roster: RosterView, limits: Limits,
                states: dict) -> dict:
    """Each collection as itself, then in each other reply mode (``:all``, ``:merged``,
    ``:pick``), for clients that can only pick a model name."""
    data = []
    for c in sorted(collections.values(), key=lambda c: c.name):
        entry = describe(c, roster, limits, states)
        data.append(entry)
        data.extend(dict(entry, id=f"{c.model_id}:{mode}", reply=mode)
                    for mode in REPLIES if mode != c.reply)
    return {"object": "list", "data": data}
