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
* ``models`` (2 to 4 roster aliases, any models on the roster) are asked in place of the
  collection's members, and ``"explorers": 0`` seats no explorer: with both, exactly the chosen
  models are asked. An alias not on the roster is refused (400) before anything is asked. The
  panel is still logged under the collection named by ``model``, which gives it its reply mode.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest
from panelist.metrics.server import routes
from panelist.metrics.server.bodies import ABSENT, Body, Flag, Items, Strings, Text, Whole, takes
from panelist.metrics.server.guard import Caller
from panelist.metrics.server.front.handler import Handler
from panelist.metrics.server.keys import DASHBOARD

ADMIN = Caller(DASHBOARD)  # every collection, no rate limit: the admin owns the server
MAX_ITEMS = 10_000  # messages or tools in one request; the parser checks each
FEWEST, MOST = 2, 4  # models one ask may choose: a comparison needs two, a page shows four


class Zero(Whole):
    """Only 0: a switch that can only turn something off."""

    def __init__(self, **kw):
        super().__init__(0, 0, **kw)

    def what(self) -> str:
        return "0"


ASK = Body(
    model=Text(
        200,
        required=True,
        hint="a collection such as bench/reviewers, with an optional reply mode such as :pick",
    ),
    messages=Items(MAX_ITEMS, required=True, hint="the chat's messages, as /v1 takes them"),
    tools=Items(MAX_ITEMS, hint="tools offered, as /v1 takes them"),
    stream=Flag(hint="true: each seat's answer as it arrives (server-sent events)"),
    models=Strings(
        MOST,
        200,
        hint=f"{FEWEST} to {MOST} roster aliases to ask in place of the collection's members",
    ),
    explorers=Zero(hint="0 seats no explorer for this ask; leave it out to seat the collection's"),
)


@takes(ASK)
def post_ask(h: Handler, params: dict) -> None:
    body = ASK.check(h.read_json() if h.server.guard.has_body(h.headers) else ABSENT)
    chosen = {"explorers": body.pop("explorers", None)}
    if "models" in body:
        chosen["members"] = chosen_models(h, body.pop("models"))
    h.caller = ADMIN
    routes.chat(h, body, **chosen)


def chosen_models(h: Handler, aliases: list[str]) -> tuple[str, ...]:
    """The models an ask chose, each once and each on the roster, or a 400 saying which not."""
    if len(aliases) < FEWEST:
        raise BadRequest(
            f"'models' must name {FEWEST} to {MOST} models to compare; got {len(aliases)}",
            param="models",
        )
    if len(set(aliases)) < len(aliases):
        twice = next(a for i, a in enumerate(aliases) if a in aliases[:i])
        raise BadRequest(f"'models' names {twice!r} twice; name each model once", param="models")
    roster = h.server.panels.known.view().models
    unknown = [a for a in aliases if a not in roster]
    if unknown:
        raise BadRequest(
            f"'models' names {unknown[0]!r}, which is not on the roster; choose "
            "aliases from GET /api/models (the Models page), or add the model "
            "there first",
            param="models",
        )
    return tuple(aliases)
