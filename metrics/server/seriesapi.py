"""``GET /api/series``: a time axis of seats, failures and answer times for one model, one
endpoint, one gateway key or the whole gateway, over the last hour, day or week
(``ledger.series``).

Invariants (beside ``metrics.server.api``'s): exactly one of ``model``, ``endpoint``, ``key`` or
``all`` names what is charted; a name the roster or the key list does not hold is 404. An
endpoint's series counts the seats served through it, as each seat's record names its endpoint
(a model moved to another endpoint leaves its history with the old one). Served from the
index's window slots: O(buckets), never a log read.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.ledger.usage import WINDOWS
from panelist.metrics.server.api import ApiRequest
from panelist.metrics.server.keys import Keys

SCOPES = ("model", "endpoint", "key", "all")
ASK = "send exactly one of model=ALIAS, endpoint=NAME, key=NAME or all=1, and window=" + "|".join(
    WINDOWS
)


def get_series(req: ApiRequest) -> dict:
    given = [s for s in SCOPES if s in req.query]
    if len(given) != 1:
        named = " and ".join(given) if given else "none of them"
        raise BadRequest(
            f"a series is of one thing: {ASK} (this request sent {named})", param="model"
        )
    scope = given[0]
    name = req.query[scope].strip()
    window = req.query.get("window", "day")
    if window not in WINDOWS:
        raise BadRequest(
            f"'window' must be one of {', '.join(WINDOWS)}, not {window!r}", param="window"
        )
    ledger = req.panels.ledger
    view = req.panels.roster.view()
    if scope == "all":
        if name not in ("1", "true"):
            raise BadRequest("'all' takes 1 (all=1: every seat of the gateway)", param="all")
        out = ledger.series(window)
        models = None
    elif scope == "model":
        if name not in view.models:
            raise NotFound(f"unknown model {name!r}; see GET /api/models for the aliases")
        out = ledger.series(window, aliases=[name])
        models = [name]
    elif scope == "endpoint":
        if name not in view.endpoints:
            raise NotFound(f"unknown endpoint {name!r}; see GET /api/endpoints for the names")
        models = sorted(a for a, m in view.models.items() if m.endpoint == name)
        out = ledger.series(window, endpoint=name)
    else:
        if (
            name not in {k.name for k in Keys(req.panels.home).all()}
            and name not in ledger.keys_last_used()
        ):
            raise NotFound(f"unknown gateway key {name!r}; see GET /api/keys for the names")
        out = ledger.series(window, key=name)
        models = None
    out.update(scope=scope, name=None if scope == "all" else name, models=models)
    return out


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/series", {"GET": get_series}),
]
