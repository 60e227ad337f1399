"""How much each collection is used, for the Collections page: beside each row of
``GET /api/collections``, its panels, seats and verdicts (the ledger index's per-collection
counts) and its spend in the current UTC day and month against its caps (``panel.budgets``).

Invariants: nothing here reads a log. The counts are O(1) per collection, copied out of the
index; spend is read only for a collection with a cap, because only a capped collection's
spend is counted (``Budgets.charge``): an uncapped one says ``spend: null``, never zero.
"""

from __future__ import annotations

from typing import Any


def with_use(req: Any, rows: list[dict]) -> list[dict]:
    """``rows`` (collections as listed), each given ``use``: ``{"panels", "seats", "useful",
    "not_useful", "spend"}``; ``spend`` is the budget report (``{"day": {"cap", "spent",
    "resets"}, "month": …, "currency"}``) or null where no cap counts it."""
    panels = req.panels
    stats = panels.ledger.collection_stats()
    for row in rows:
        seen = stats.get(row["id"]) or {}
        row["use"] = {k: seen.get(k, 0) for k in ("panels", "seats", "useful", "not_useful")}
        row["use"]["spend"] = panels.budgets.report("collection", row["name"])
    return rows
