"""What ``GET /v1/models`` says about each collection, so a caller can choose before it asks.

A collection is listed under its own id (``bench/<name>``, in the collection's reply mode), then
under ``bench/<name>:<mode>`` for each other reply mode; ``entry`` describes any of them, the
one mode the listing leaves out (the collection's own, suffixed) included, for
``models.retrieve``.

Invariants:

* Every entry says what a request to *its* id may carry: ``together`` is the smallest known
  context window among the members (roster or learned, whichever is lower: a prompt within it
  reaches every member), the largest (``max_context_window``: a longer prompt seats no member,
  a shorter one seats those it fits) and the capabilities every member has that its reply mode
  takes. The ``all`` mode answers with every
  seat's section as markdown and refuses ``tools`` (and JSON response formats), so an ``all``
  id never lists ``tools``, whatever its members can do.
* ``max_input_tokens`` (what Anthropic's ``models.retrieve`` reads) is ``together``'s
  ``context_window``.
* ``takes_tools`` (the same on every entry of a collection) names the listed ids of the
  collection whose reply mode takes tools and JSON response formats: a client that reads one
  entry learns where to send an agent.
"""

from __future__ import annotations

from panelist.metrics.roster.collection import REPLIES, Collection, Limits
from panelist.metrics.roster.roster import RosterView
from panelist.metrics.panel.seating import window_of

CAPABILITIES = ("vision", "tools")
ONE_ANSWER = ("merged", "pick")  # the reply modes that give one answer: tools and JSON go there


def together(c: Collection, roster: RosterView, states: dict, mode: str | None = None) -> dict:
    """The members' shared facts, as a request in reply ``mode`` (default: the collection's)
    may use them."""
    models = [roster.models[a] for a in c.members if a in roster.models]
    windows = [w for w in (window_of(m, states.get(m.alias)) for m in models) if w]
    caps = [cap for cap in CAPABILITIES if models and all(getattr(m, cap) for m in models)]
    if (mode or c.reply) not in ONE_ANSWER:
        caps = [cap for cap in caps if cap != "tools"]
    return {
        "context_window": min(windows) if windows else None,
        "max_context_window": max(windows) if windows else None,
        "capabilities": caps,
    }


def listed_ids(c: Collection) -> list[tuple[str, str]]:
    """``(id, reply mode)`` of each listed id of ``c``: its own first, then the other modes."""
    return [(c.model_id, c.reply)] + [
        (f"{c.model_id}:{mode}", mode) for mode in REPLIES if mode != c.reply
    ]


def entry(
    c: Collection, mode: str, model_id: str, roster: RosterView, limits: Limits, states: dict
) -> dict:
    """``c`` as the id ``model_id`` (which asks for reply ``mode``) describes it; in OpenAI's
    shape, with the fields Anthropic's clients read beside it (``type``, ``display_name``,
    ``created_at``, ``max_input_tokens``: the window every member takes)."""
    shared = together(c, roster, states, mode)
    return {
        "id": model_id,
        "object": "model",
        "created": 0,
        "owned_by": "panelist",
        "type": "model",
        "display_name": model_id,
        "created_at": "1970-01-01T00:00:00Z",
        "max_input_tokens": shared["context_window"],
        "description": c.description,
        "tags": list(c.tags),
        "members": list(c.members),
        "shape": c.shape or "general",
        "explorers": c.explorers(limits),
        "reply": mode,
        "merger": c.merger or None,
        "together": shared,
        "takes_tools": [i for i, m in listed_ids(c) if m in ONE_ANSWER],
    }


def describe(c: Collection, roster: RosterView, limits: Limits, states: dict) -> dict:
    """``c`` under its own id, in its own reply mode."""
    return entry(c, c.reply, c.model_id, roster, limits, states)


def models_list(
    collections: dict[str, Collection], roster: RosterView, limits: Limits, states: dict
) -> dict:
    """Each collection as itself, then in each other reply mode (``:all``, ``:merged``,
    ``:pick``), for clients that can only pick a model name."""
    data = [
        entry(c, mode, model_id, roster, limits, states)
        for c in sorted(collections.values(), key=lambda c: c.name)
        for model_id, mode in listed_ids(c)
    ]
    return {"object": "list", "data": data}


def one_model(
    model_id: str,
    collections: dict[str, Collection],
    roster: RosterView,
    limits: Limits,
    states: dict,
) -> dict | None:
    """The entry ``GET /v1/models/{model_id}`` answers with, or None when no collection of
    ``collections`` has that id in any reply mode (``bench/<name>:<its own mode>`` included,
    which a request may name although the listing shows it once, unsuffixed)."""
    name, _, mode = model_id.partition(":")
    found = next((c for c in collections.values() if c.model_id == name), None)
    if found is None or (mode and mode not in REPLIES):
        return None
    return entry(found, mode or found.reply, model_id, roster, limits, states)


def unknown_hint(collections: dict[str, Collection], most: int = 30) -> str:
    """What a 404 for an unknown model id says to ask for instead: the forms of an id, every
    reply mode, and the ids there are (the first ``most``)."""
    ids = [i for c in sorted(collections.values(), key=lambda c: c.name) for i, _ in listed_ids(c)]
    shown = ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")
    there = f"the ids here are {shown}" if ids else "there are no collections yet"
    modes = ", ".join(f":{m}" for m in REPLIES)
    return (
        f"the models are collections, asked as bench/<name> or bench/<name> with a reply "
        f"mode suffix ({modes}); {there} (GET /v1/models lists them)"
    )
