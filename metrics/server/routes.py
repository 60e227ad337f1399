"""The gateway's routes: ``/v1`` (OpenAI's chat, Responses and Anthropic's Messages formats, the
collections as models), ``/bench`` (verdicts, what is owed, panels, races), ``/health`` (alive), ``/ready`` (able to
serve now: ``readiness``) and ``/metrics`` (the Prometheus text format: ``exposition``).

Thin: each action parses its body through ``metrics.wire`` or ``metrics.panel``, calls the
domain and replies. Every refusal of a panel (its body checked whole included) happens before
any seat is asked; every reply of a seated panel (a reply, a stream, or an error such as a
panel in which no seat answered, or a fault while making the reply) carries
``X-Panelist-Panel: <panel id>``, and its line is written however the reply went
(``answering``).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

from panelist.metrics.errors import (
    BadRequest,
    DatabaseUnreachable,
    NotFound,
    PanelistError,
    Unavailable,
)
from panelist.metrics.ledger import verdict
from panelist.metrics.panel.live import Live
from panelist.metrics.panel import owedorder
from panelist.metrics.race import registry
from panelist.metrics.server import exposition, fanout, readiness
from panelist.metrics.server.front.handler import Handler, fault
from panelist.metrics.server.routing import KEYS, OPEN, Route
from panelist.metrics.server.stream import PANEL_HEADER, answer_of, stream_panel
from panelist.metrics.wire import messages, models, responses
from panelist.metrics.wire.chat import Events as ChatEvents

ROUTES_HELP = (
    "GET /v1/models, POST /v1/chat/completions, POST /v1/responses, "
    "POST /v1/messages, POST /v1/messages/count_tokens, POST /bench/verdict, "
    "GET /bench/pending, GET /bench/panels/<panel>"
)
# says that a token count is the gateway's own estimate (characters / 4 and 10%, images at a
# flat rate), not a tokenizer's count
COUNT_HEADER = "X-Panelist-Token-Count"


def models_of(h: Handler) -> tuple:
    """What describing this caller's collections takes: (collections, roster view, limits,
    the members' ledger states)."""
    panels = h.server.panels
    view = panels.known.view()
    states = panels.ledger.states(view.models.keys(), "general")
    mine = {n: c for n, c in panels.collections.all().items() if h.caller.may_use(n)}
    return mine, view, panels.collections.limits(), states


def get_models_listing(h: Handler) -> dict:
    """The collections this caller may use, each in every reply mode."""
    return models.models_list(*models_of(h))


def get_models(h: Handler, _):
    h.send_json(200, get_models_listing(h))


def get_model(h: Handler, params: dict):
    """One collection in one reply mode, as ``GET /v1/models`` lists it
    (``client.models.retrieve``)."""
    wanted = params["rest"]
    mine, view, limits, states = models_of(h)
    found = models.one_model(wanted, mine, view, limits, states)
    if found is None:
        raise NotFound(
            f"no model '{wanted}' here; {models.unknown_hint(mine)}",
            param="model",
            code="model_not_found",
        )
    h.send_json(200, found)


def post_chat(h: Handler, _):
    chat(h, h.read_json())


def chat(h: Handler, body, **chosen) -> None:
    """Run a chat request's panel for ``h.caller`` and reply (a stream, or one reply);
    ``chosen``: the members and explorer seats the caller picked (``Panels.parse``)."""
    h.caller.check_model(body.get("model") if isinstance(body, dict) else None)  # 403
    panels = h.server.panels
    req = panels.parse(body, **chosen)  # the whole body is checked here, before anything is asked
    room(h)
    seating = panels.seat(req, h.caller.name)  # every refusal is here, before any call
    live = Live() if req.stream else None
    run = panels.start(req, seating, key=h.caller.name, live=live, budget=h.server.in_flight)
    with answering(h, run):
        if req.stream:
            stream_panel(h, run, ChatEvents(run.panel, run.req.asked, int(run.started)))
            return
        reply = panels.complete(run, verdict_url=h.base_url(), alive=h.client_alive)
        if reply is None:  # the caller left; the panel was cancelled and logged
            h.close_connection = True
            return
        # written before the reply goes out, so a caller that has it finds it owed a verdict
        run.delivered_reply(reply)
        h.send_json(200, reply, {PANEL_HEADER: run.panel})


def room(h: Handler) -> None:
    """503 before any seat is asked when the memory budget is wholly taken (by large bodies and
    the answers panels hold): the seats' answers would have no room either."""
    budget = h.server.in_flight
    if not budget.fits(1):
        raise Unavailable(budget.refusal(), headers={"Retry-After": "1"})


@contextmanager
def answering(h: Handler, run):
    """The caller's part of a started panel. From here on every answer names its panel, errors
    included, so any client can find it; a fault while the reply is made or sent is a 500 that
    says the panel is logged; and however the block ends, the run is settled
    (``PanelRun.settle``): once a seat was asked, the panel's line is written."""
    with run:
        try:
            yield run
        except PanelistError as exc:
            exc.headers = {**exc.headers, PANEL_HEADER: run.panel}
            raise
        except (ConnectionError, TimeoutError):
            raise  # the caller went away: nobody to tell
        except Exception as exc:
            error = fault(
                f"{h.command} {h.path} (panel {run.panel})",
                f"internal error while answering panel {run.panel}; its seats' "
                f"answers are logged (GET /bench/panels/{run.panel})",
            )["error"]
            raise PanelistError(
                error["message"], code=error["code"], headers={PANEL_HEADER: run.panel}
            ) from exc
    # Once the caller has its answer, this panel's own lines are folded, off its time, so that
    # the next request's seating has nothing of them left to read.
    h.after_reply(lambda: _fold_own(h.server.panels.ledger))


def _fold_own(ledger) -> None:
    try:
        ledger.refresh()
    except PanelistError:
        pass  # an unreachable database: the next request's own read meets it and says so
    except (OSError, ValueError):
        pass  # the server closed its logs meanwhile: there is no next request to spare


# -- other wire formats: thin adapters over the same panel ---------------------------------------
def open_panel(h: Handler, chat: dict, stream: bool):
    """Seat and start the panel a translated request asks for, as ``post_chat`` does."""
    h.caller.check_model(chat.get("model"))  # 403
    panels = h.server.panels
    req = panels.parse(chat)
    room(h)
    seating = panels.seat(req, h.caller.name)  # every refusal is here, before any call
    return panels.start(
        req, seating, key=h.caller.name, live=Live() if stream else None, budget=h.server.in_flight
    )


def answer_translated(h: Handler, chat: dict, stream: bool, events, whole) -> None:
    """Run the panel a request of another format asks for (``chat``, translated from it) and
    answer in that format: a stream of ``events(run)``, or ``whole(reply, panel)`` as one JSON
    reply."""
    with answering(h, open_panel(h, chat, stream)) as run:
        if stream:
            stream_panel(h, run, events(run))
            return
        reply = answer_of(h, run, h.client_alive)
        if reply is None:  # the caller left; the panel was cancelled and logged
            h.close_connection = True
            return
        run.delivered_reply(reply)
        h.send_json(200, whole(reply, run.panel), {PANEL_HEADER: run.panel})


def post_responses(h: Handler, _):
    body = h.read_json()
    chat, stream = responses.to_chat(body)  # the whole body is checked, as post_chat's is
    answer_translated(
        h,
        chat,
        stream,
        lambda run: responses.Events(body, run.panel, run.req.asked, int(run.started)),
        lambda reply, panel: responses.from_chat(reply, body, panel),
    )


def post_messages(h: Handler, _):
    body = h.read_json()
    chat, stream = messages.to_chat(body)  # the whole body is checked, as post_chat's is
    answer_translated(
        h, chat, stream, lambda run: messages.Events(run.panel, run.req.asked), messages.from_chat
    )


def post_count_tokens(h: Handler, _):
    """Anthropic's ``count_tokens``: the estimate a panel of this request would check each
    seat's window against, for a collection this caller may use; nothing is seated."""
    model, estimate = messages.count_tokens(h.read_json())
    h.caller.check_model(model)  # 403
    h.server.panels.collections.resolve(model)  # 404: an unknown collection
    h.send_json(200, {"input_tokens": estimate}, {COUNT_HEADER: "estimate"})


def post_verdict(h: Handler, _):
    """A verdict on a call id, or on a panel id and the model's alias (``merger`` for the
    merged answer)."""
    v = verdict.check(h.read_json())
    ledger = h.server.panels.ledger
    if v["call"] is None and h.caller.keyed:
        h.caller.check_owner(ledger.panel(v["panel"]), f"panel '{v['panel']}'")
    call = verdict.call_of(v, ledger, key=h.caller.scope)
    if h.caller.keyed:  # a key judges only its own calls
        h.caller.check_owner(ledger.call(call), f"call '{call}'")
    result = ledger.record_verdict(
        call, useful=v["useful"], note=v["note"], real=v["real"], false=v["false"], by=h.caller.name
    )
    h.send_json(200, result)


def get_pending(h: Handler, _):
    """Calls owed a verdict (``data``, newest first, or ``?order=oldest|value``, the reply
    naming its ``order``), and apart from them the panels whose reply never reached the caller
    (``abandoned``): their seats are owed nothing."""
    query = parse_qs(urlsplit(h.path).query)
    try:
        limit = int(query.get("limit", ["50"])[0])
    except ValueError:
        raise BadRequest("'limit' must be a whole number", param="limit") from None
    if not 1 <= limit <= 500:
        raise BadRequest("'limit' must be between 1 and 500", param="limit")
    panels = h.server.panels
    asked = query.get("order")
    order = owedorder.check(asked[0] if asked else None, "newest")
    owed = owedorder.ordered(
        panels.ledger,
        panels.collections,
        panels.known.view(),
        order,
        key=h.caller.scope,
        limit=limit,
    )
    left = panels.ledger.undelivered(key=h.caller.scope, limit=limit)
    h.send_json(
        200,
        {
            "object": "list",
            "data": owed,
            "order": order,
            "abandoned": [verdict.not_owed(p) for p in left],
        },
    )


def get_panel(h: Handler, params: dict):
    panel_id = params["panel"]
    found = h.server.panels.ledger.panel(panel_id)
    if found is None:
        raise NotFound(f"unknown panel '{panel_id}'; panel ids are bench.panel in a reply")
    h.caller.check_owner(found, f"panel '{panel_id}'")
    h.send_json(200, found)


def post_race(h: Handler, _):
    registry.admit(h.caller)
    race = h.server.parts.races.start(h.read_json(), admit=lambda calls: fanout.admit(h, calls))
    h.send_json(202, race, {"Location": f"/bench/race/{race['race']}"})


def post_race_again(h: Handler, params: dict):
    """Race a race's job again as its next look: 202 as a new race is, 404 for an unknown race,
    409 while it runs or when its job changed, moved on or spent its looks."""
    registry.admit(h.caller)
    race = h.server.parts.races.again(
        params["race"], h.read_json(), admit=lambda calls: fanout.admit(h, calls)
    )
    h.send_json(202, race, {"Location": f"/bench/race/{race['race']}"})


def get_race(h: Handler, params: dict):
    registry.admit(h.caller)
    h.send_json(200, h.server.parts.races.get(params["race"]))


def get_race_prompt(h: Handler, params: dict):
    registry.admit(h.caller)
    h.send_json(200, h.server.parts.races.prompt(params["race"], params["name"]))


def get_races(h: Handler, _):
    registry.admit(h.caller)
    query = {k: v[0] for k, v in parse_qs(urlsplit(h.path).query).items()}
    h.send_json(200, h.server.parts.races.listing(query.get("limit"), query.get("before")))


def get_ready(h: Handler, _):
    status, body, headers = readiness.readiness(h.server.parts)
    h.send_json(status, body, headers)


def get_metrics(h: Handler, _):
    """Open where the server needs no admin token (it then listens on loopback only); with one,
    the token itself, as ``Authorization: Bearer``, as a scraper sends it."""
    h.server.guard.check_admin_bearer(h.headers)
    panels = h.server.panels
    ledger = panels.ledger
    try:
        lag = ledger.catch_up()
        ledger.seat_totals()  # the index answers (a database may have dropped just now)
    except DatabaseUnreachable:
        ledger, lag = None, 0  # the process's own figures still answer
    database = None
    if panels.home.database:
        from panelist.metrics.store.pgstats import STATS

        database = STATS.snapshot()
    waiting = {e: panels.admission.waiting(e) for e in panels.roster.view().endpoint_limits}
    text = exposition.render(
        ledger, worker=h.server.role.index, lag=lag, waiting=waiting, database=database
    )
    h.send_bytes(200, text.encode(), exposition.CONTENT_TYPE)


def get_health(h: Handler, _):
    # which process answered: one of several workers on the port tells itself apart
    h.send_json(
        200, {"ok": True, "time": time.time(), "pid": os.getpid(), "worker": h.server.role.index}
    )


GATEWAY_ROUTES = (
    Route("/v1/models", {"GET": get_models}, gate=KEYS),
    # an id holds a "/" (bench/name), which clients send as it is or percent-encoded
    Route("/v1/models/*", {"GET": get_model}, gate=KEYS),
    Route("/v1/chat/completions", {"POST": post_chat}, gate=KEYS),
    Route("/bench/verdict", {"POST": post_verdict}, gate=KEYS),
    Route("/bench/pending", {"GET": get_pending}, gate=KEYS),
    Route("/bench/panels/{panel}", {"GET": get_panel}, gate=KEYS),
    Route("/health", {"GET": get_health}, gate=OPEN),
    Route("/ready", {"GET": get_ready}, gate=OPEN),
    Route("/metrics", {"GET": get_metrics}, gate=OPEN),
    Route("/v1/responses", {"POST": post_responses}, gate=KEYS),
    Route("/v1/messages", {"POST": post_messages}, gate=KEYS),
    Route("/v1/messages/count_tokens", {"POST": post_count_tokens}, gate=KEYS),
    Route("/bench/race", {"POST": post_race}, gate=KEYS),
    Route("/bench/race/{race}", {"GET": get_race}, gate=KEYS),
    Route("/bench/race/{race}/again", {"POST": post_race_again}, gate=KEYS),
    Route("/bench/race/{race}/judge/{name}", {"GET": get_race_prompt}, gate=KEYS),
    Route("/bench/races", {"GET": get_races}, gate=KEYS),
)
