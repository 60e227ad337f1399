"""The owed-verdict queue ordered by the value of each verdict, with the reason beside each item.

``ORDERS``: ``oldest`` (the order each answer became owed), ``newest``, or ``value``: how far a
verdict on that answer could move its collection's pending swap (``explore.verdict_values``:
the leading candidate and the weakest member the swap is decided on, the one less known first;
another model only while it could still become one of those two). Values are worked out per (collection, shape) from the ledger's
per-model counts, nothing read from logs but the owed items themselves; the most valuable come
first and equal values keep the oldest first. Only the ``WINDOW`` oldest owed answers are ranked,
so a very long queue is ranked from its oldest part. A verdict given through any path changes the
counts at once, so the next listing, in either order, reflects it.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest
from panelist.metrics.panel import explore
from panelist.metrics.roster.collection import PREFIX

ORDERS = ("oldest", "newest", "value")
WINDOW = 500  # owed answers ranked at most (the gateway's own page bound)


def check(order: str | None, default: str) -> str:
    order = order or default
    if order not in ORDERS:
        raise BadRequest(
            f"'order' must be one of {', '.join(ORDERS)}; got {order!r}", param="order"
        )
    return order


def ordered(
    ledger, collections, roster, order: str, *, key: str | None = None, limit: int = 50
) -> list[dict]:
    """The owed items (``verdict.owed`` dicts) in ``order``, at most ``limit``."""
    from panelist.metrics.ledger import verdict

    if order == "newest":
        return [verdict.owed(r) for r in ledger.pending(key=key, limit=limit)]
    if order == "oldest":
        return [verdict.owed(r) for r in ledger.pending(key=key, limit=limit, oldest=True)]
    rows = [verdict.owed(r) for r in ledger.pending(key=key, limit=max(limit, WINDOW), oldest=True)]
    return by_value(rows, ledger, collections, roster)[:limit]


def by_value(rows: list[dict], ledger, collections, roster) -> list[dict]:
    """``rows`` (owed items, oldest first, each with ``alias``, ``collection``, ``shape``) sorted
    by value, each given ``value`` and ``reason``."""
    # (collection, shape) -> the models' states and each one's verdict value
    groups: dict[tuple, tuple[dict, dict[str, float]]] = {}
    known = collections.all()
    out = []
    for i, row in enumerate(rows):
        name = (row.get("collection") or "").removeprefix(PREFIX)
        shape = row.get("shape") or "general"
        collection = known.get(name)
        if collection is None:
            out.append(
                (0.0, i, dict(row, value=0.0, reason="its collection is gone: no swap to decide"))
            )
            continue
        key = (name, shape)
        if key not in groups:
            aliases = list(dict.fromkeys([*roster.models, *collection.members]))
            states = ledger.states(aliases, shape)
            groups[key] = (states, explore.verdict_values(states, collection.members))
        states, values = groups[key]
        alias = row.get("alias")
        value = values.get(alias, 0.0) if isinstance(alias, str) else 0.0
        out.append(
            (
                value,
                i,
                dict(row, value=round(value, 6), reason=_reason(alias, collection.members, states)),
            )
        )
    out.sort(key=lambda item: (-item[0], item[1]))
    return [row for _, _, row in out]


def _reason(alias, members, states) -> str:
    if alias not in states:
        return "not in the roster: no swap to decide"
    found = explore.pending(states, members)
    if found is None:
        return "no candidate to compare with a member"
    top, weak = found
    if alias == weak:
        p = explore.p_beats(states[top], states[weak])
        return f"member; {top} may beat it (p={p:.2f})"
    if alias in members:
        p = explore.p_beats(states[weak], states[alias])
        return f"member; it matters if it is weaker than {weak} (p={p:.2f})"
    if alias == top:
        p = explore.p_beats(states[top], states[weak])
        return f"could decide a swap for {weak} (p={p:.2f} it is better)"
    if explore.p_beats(states[top], states[weak]) < 0.5:  # no candidate leads yet
        p = explore.p_beats(states[alias], states[weak])
        return f"could decide a swap for {weak} (p={p:.2f} it is better)"
    p = explore.p_beats(states[alias], states[top])
    return f"could overtake {top} as the candidate for {weak} (p={p:.2f})"
