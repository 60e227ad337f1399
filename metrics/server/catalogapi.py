"""The dashboard's model discovery and catalog: what one endpoint or every endpoint serves
outside the roster, adding one such model, refreshing the catalog from the listings, and
what the catalog knows of one model, as ``panelist discover`` and ``panelist catalog`` do.

Invariants (beside ``metrics.server.api``'s): an endpoint's listing is asked with the same
bounded timeout as a Test (``api.TEST_TIMEOUT``); an endpoint that cannot be read is named,
never a reason to fail the others.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.errors import NotFound
from panelist.metrics.server.api import NAME, TEST_TIMEOUT, ApiRequest, edits_config
from panelist.metrics.server.bodies import NOTHING, Body, Text, takes


def model_catalog(req: ApiRequest) -> dict:
    """What the catalog knows of one model, each fact with its source and date, typed first;
    a learned fact sits beside the one that wins (``panelist catalog show``)."""
    from panelist.metrics.roster.catalog import Catalog

    alias = req.params["alias"]
    return {"alias": alias, "facts": Catalog(req.panels.home).facts(alias)}


def discover(req: ApiRequest) -> dict:
    view = req.panels.roster.view()
    ep = view.endpoints.get(req.params["name"])
    if ep is None:
        raise NotFound(f"unknown endpoint '{req.params['name']}'; see GET /api/endpoints")
    served = {m.served for m in view.models.values() if m.endpoint == ep.name}
    listed = req.panels.upstream.models(
        ep.base_url, req.panels.roster.api_key(ep), timeout=TEST_TIMEOUT
    )
    return {
        "data": [
            {"served": e["id"], "on_roster": e["id"] in served}
            for e in sorted(listed, key=lambda e: e["id"])
        ]
    }


def discover_all(req: ApiRequest) -> dict:
    """What ``panelist discover`` lists: models served outside the roster, free first."""
    from panelist.metrics.roster import discover as found
    from panelist.metrics.roster.catalog import Catalog

    endpoint = req.query.get("endpoint") or None
    return found.find(
        Catalog(req.panels.home),
        req.panels.upstream,
        endpoint,
        free_only=req.query.get("free") in ("1", "true"),
    )


@takes(NOTHING)
def catalog_refresh(req: ApiRequest) -> dict:
    """Read every endpoint's listing into the catalog, as ``panelist catalog refresh`` does;
    an endpoint that cannot be read is named in ``failed``."""
    from panelist.metrics.roster.catalog import Catalog

    return Catalog(req.panels.home).refresh(req.panels.upstream)


@edits_config
@takes(
    Body(
        endpoint=Text(NAME, nonempty=True, required=True, hint="from GET /api/discover"),
        served=Text(NAME, nonempty=True, required=True, hint="from GET /api/discover"),
    )
)
def discover_add(req: ApiRequest) -> dict:
    """Register one discovered model, as ``panelist discover --add`` does."""
    from panelist.metrics.roster import discover as found
    from panelist.metrics.roster.catalog import Catalog

    body = req.body
    added = found.add(
        Catalog(req.panels.home), req.panels.upstream, [body["served"]], body["endpoint"]
    )
    return {"added": added}


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/models/{alias}/catalog", {"GET": model_catalog}),
    ("/api/endpoints/{name}/discover", {"GET": discover}),
    ("/api/discover", {"GET": discover_all}),
    ("/api/discover/add", {"POST": discover_add}),
    ("/api/catalog/refresh", {"POST": catalog_refresh}),
]
