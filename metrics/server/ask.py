"""The dashboard's Ask (``POST /api/ask``): a chat request run as a panel for the logged-in admin,
so the Ask page needs no gateway key pasted into it.

Invariants:

* The route sits behind the dashboard's login (the ``admin`` gate: a live session cookie when
  ``PANELIST_ADMIN_TOKEN`` is set), never behind a gateway key, and ``/v1`` is not touched: a
  caller of ``/v1`` still needs its key when keys are required.
* Its panels are logged with the caller ``dashboard`` (a name no gateway key may take), so the
  logs tell the admin's panels from any key's.
* The body is checked as a dashboard write (``metrics.server.bodies``) and then whole by the same
  parser ``/v1/chat/completions`` uses, and the panel runs through the same code: one panel, one
  log, one stream format.
* No secret is minted or kept for this: the session cookie (``HttpOnly``, ``SameSite=Strict``)
  is the admin's proof, as for every other ``/api/`` write.
"""

from __future__ import annotations

from panelist.metrics.server import routes
from panelist.metrics.server.bodies import ABSENT, Body, Flag, Items, Text, takes
from panelist.metrics.server.guard import Caller
from panelist.metrics.server.front.handler import Handler
from panelist.metrics.server.keys import DASHBOARD

ADMIN = Caller(DASHBOARD)   # every collection, no rate limit: the admin owns the server
MAX_ITEMS = 10_000          # messages or tools in one request; the parser checks each
ASK = Body(model=Text(200, required=True, hint="a collection such as bench/reviewers, with an "
                                                 "optional reply mode such as :pick"),
           messages=Items(MAX_ITEMS, required=True, hint="the chat's messages, as /v1 takes them"),
           tools=Items(MAX_ITEMS, hint="tools offered, as /v1 takes them"),
           stream=Flag(hint="true: each seat's answer as it arrives (server-sent events)"))


@takes(ASK)
def post_ask(h: Handler, params: dict) -> None:
    body = ASK.check(h.read_json() if h.server.guard.has_body(h.headers) else ABSENT)
    h.caller = ADMIN
    routes.chat(h, body)
