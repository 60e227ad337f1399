"""The dashboard's webhooks (``upkeep.webhooks``): list them with their latest delivery, add,
remove, and send a test alert.

Invariants (beside ``metrics.server.api``'s): no answer holds a webhook's whole URL (``mask``);
only the test route opens a connection, once per hook, and waits for it.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.server.api import ApiRequest
from panelist.metrics.server.bodies import NOTHING, Body, Flag, Strings, Text, takes
from panelist.metrics.upkeep import webhooks

URL = 2000


def list_hooks(req: ApiRequest) -> dict:
    return {"data": webhooks.Hooks(req.panels.home).public()}


@takes(
    Body(
        url=Text(URL, nonempty=True, required=True, hint="where alerts are POSTed"),
        kinds=Strings(20, 40, comma=True, hint="the alert kinds to send; none: every kind"),
        slack=Flag(hint='send a Slack-compatible {"text": …} body'),
    )
)
def add_hook(req: ApiRequest) -> dict:
    hooks = webhooks.Hooks(req.panels.home)
    kinds = req.body.get("kinds") or []
    if isinstance(kinds, str):
        kinds = kinds.split(",")
    made = hooks.add(req.body["url"], kinds, bool(req.body.get("slack")), by=req.who)
    return next(h for h in hooks.public() if h["id"] == made["id"])


@takes(NOTHING)
def remove_hook(req: ApiRequest) -> dict:
    webhooks.Hooks(req.panels.home).remove(req.params["hook"], by=req.who)
    return {"removed": req.params["hook"]}


@takes(Body(id=Text(40, hint="one webhook's id; none: every webhook")))
def test_hooks(req: ApiRequest) -> dict:
    return {"data": webhooks.send_test(req.panels.home, req.body.get("id"))}


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/alerts/webhooks", {"GET": list_hooks, "POST": add_hook}),
    ("/api/alerts/webhooks/test", {"POST": test_hooks}),
    ("/api/alerts/webhooks/{hook}", {"DELETE": remove_hook}),
]
