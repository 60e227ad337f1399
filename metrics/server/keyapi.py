"""The dashboard's gateway keys: each key with when it was last used, making one (its secret
shown once, in the reply) and revoking one.

Invariants (beside ``metrics.server.api``'s): a key's secret appears only in the reply that
made it; every list and log holds its public view (``Key.public``).
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.server.api import NAME, ApiRequest, edits_config
from panelist.metrics.server.bodies import NOTHING, Body, Strings, Text, Whole, takes
from panelist.metrics.server.keys import MAX_RPM, Keys


def list_keys(req: ApiRequest) -> dict:
    last = req.panels.ledger.keys_last_used()
    return {
        "data": [dict(k.public(), last_used=last.get(k.name)) for k in Keys(req.panels.home).all()]
    }


@edits_config
@takes(
    Body(
        name=Text(
            NAME,
            nonempty=True,
            required=True,
            hint="who or what uses the key: lower-case letters, digits or '-'",
        ),
        collections=Strings(
            1000, NAME, comma=True, hint="the collections it may ask; leave it out for all"
        ),
        rpm=Whole(1, MAX_RPM, hint="requests a minute; leave it out for no limit"),
    )
)
def create_key(req: ApiRequest) -> dict:
    body = req.body
    secret, key = Keys(req.panels.home).create(
        body.get("name"),
        collections=body.get("collections"),
        rpm=body.get("rpm"),
        known=req.panels.collections.all().keys(),
        by=req.who,
    )
    return dict(key.public(), key=secret, last_used=None)


@edits_config
@takes(NOTHING)
def revoke_key(req: ApiRequest) -> dict:
    Keys(req.panels.home).revoke(req.params["name"], by=req.who)
    return {"revoked": req.params["name"]}


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/keys", {"GET": list_keys, "POST": create_key}),
    ("/api/keys/{name}", {"DELETE": revoke_key}),
]
