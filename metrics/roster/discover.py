"""Discover: models an endpoint serves that the roster does not hold yet.

A model is "on the roster" when a roster model has the same endpoint and served id, whatever
its alias. One the roster already serves from another endpoint is still listed (a second way to
reach it), with ``also_on_roster`` naming the aliases that serve it there. Each found model
carries the facts its listing entry states, over those the catalog stored for it (the listing
is the fresher word). Free models (both prices known and 0) come
first, then those with an unknown price, then paid ones; ids in order within each. Listing
writes nothing; ``add`` registers models under their served id as alias (``alias_for``: made
valid, and ``endpoint/served`` when another model holds that alias) and stores their listed
facts in the catalog with source ``endpoint``.
"""

from __future__ import annotations

import re

from panelist.metrics.roster.catalog import ENDPOINT, Catalog, from_listing, servable, stored_entry
from panelist.metrics.errors import BadRequest, NotFound


def alias_for(taken, endpoint: str, served: str) -> str:
    """The alias a discovered model is added under: its served id, with what an alias cannot
    hold replaced; ``endpoint/served`` when that is ``taken`` (a model served elsewhere)."""

    def valid(text: str) -> str:
        text = re.sub(r"^[^A-Za-z0-9]+", "", re.sub(r"[^A-Za-z0-9._:/-]+", "-", text))[:96]
        return text or "model"

    alias = valid(served)
    return valid(f"{endpoint}/{served}") if alias in taken else alias


def _free(facts: dict) -> bool:
    return facts.get("price_in") == 0 and facts.get("price_out") == 0


def _rank(row: dict) -> tuple:
    f = row["facts"]
    priced = "price_in" in f or "price_out" in f
    return (0 if _free(f) else 2 if priced else 1, row["id"])


def find(
    catalog: Catalog, upstream, endpoint: str | None = None, *, free_only: bool = False
) -> dict:
    """``{"models": [{"endpoint", "id", "free", "facts", "also_on_roster"}],
    "failed": [{"endpoint", "error"}]}``."""
    found = _find(catalog, upstream, endpoint, free_only)
    for row in found["models"]:
        del row["_listed"]
    return found


def _find(catalog: Catalog, upstream, endpoint: str | None, free_only: bool) -> dict:
    view = catalog.roster.view()
    if endpoint is not None and endpoint not in view.endpoints:
        raise NotFound(f"unknown endpoint '{endpoint}'; see `panelist endpoint list`")
    names = [endpoint] if endpoint else sorted(view.endpoints)
    held = {(m.endpoint, m.served) for m in view.models.values()}
    served_by: dict[str, list[str]] = {}
    for alias, m in sorted(view.models.items()):
        served_by.setdefault(m.served, []).append(alias)
    stored = catalog.stored()
    rows = []
    read, failed = catalog.listings(upstream, names)
    for name, entries in read:
        seen = set()
        for entry in filter(servable, entries):
            mid = entry["id"]
            if (name, mid) in held or mid in seen:
                continue
            seen.add(mid)
            facts = {k: v["value"] for k, v in stored_entry(stored, name, mid).items()}
            listed = from_listing(entry)
            facts.update(listed)
            rows.append(
                {
                    "endpoint": name,
                    "id": mid,
                    "free": _free(facts),
                    "facts": facts,
                    "also_on_roster": served_by.get(mid, []),
                    "_listed": listed,
                }
            )
    if free_only:
        rows = [r for r in rows if r["free"]]
    rows.sort(key=_rank)
    return {"models": rows, "failed": failed}


def add(catalog: Catalog, upstream, ids: list[str], endpoint: str | None = None) -> list[dict]:
    """Register the discovered models ``ids`` (served ids, used as aliases)."""
    if len(set(ids)) != len(ids):
        raise BadRequest("each model to add must be named once")
    found = _find(catalog, upstream, endpoint, False)
    if found["failed"] and not found["models"]:
        raise BadRequest(
            "could not read any endpoint's model list ("
            + "; ".join(f"{f['endpoint']}: {f['error']}" for f in found["failed"])
            + "); check the endpoints and try again"
        )
    plan = []
    for mid in ids:
        rows = [r for r in found["models"] if r["id"] == mid]
        if not rows:
            where = f"endpoint {endpoint}" if endpoint else "any endpoint"
            raise NotFound(
                f"'{mid}' is not a model {where} serves outside the roster; see `panelist discover`"
            )
        if len(rows) > 1:
            raise BadRequest(
                f"'{mid}' is served by {', '.join(r['endpoint'] for r in rows)}; "
                "pick one with --endpoint"
            )
        plan.append(rows[0])
    added = []
    for row in plan:
        alias = alias_for(catalog.roster.view().models, row["endpoint"], row["id"])
        catalog.roster.add_model(alias, row["endpoint"], served=row["id"], by="discover", expect="")
        added.append(
            {
                "alias": alias,
                "endpoint": row["endpoint"],
                "served": row["id"],
                "facts": row["facts"],
            }
        )
    catalog.store(
        [
            (r["endpoint"], r["id"], r["_listed"], ENDPOINT, "GET /models")
            for r in plan
            if r["_listed"]
        ],
        "discover add",
    )
    return added
