"""The dashboard's JSON API: thin adapters from a request to the domain and back.

Each handler takes an ``ApiRequest`` and returns what becomes the JSON reply, or raises one of
``metrics.errors``; no handler knows HTTP. ``ROUTES`` lists them by method and path pattern
(``{name}`` matches one path segment); a server maps its requests onto that table.

Invariants:

* Every write declares its body (``@takes``, ``metrics.server.bodies``): JSON types and bounds
  are checked, and undeclared fields refused, before its handler runs.
* Every write goes through the same validation as the CLI (``Roster``, ``Collections``,
  ``Keys``, ``verdict.check``) and is logged in ``config/changes.jsonl`` (or the evidence log)
  with ``who`` as its author.
* With a database, a handler marked ``edits_config`` is answered only once its edit is in the
  database (``store.pgconfig.ConfigMirror.editing``): merged with another instance's, or
  refused with 409 when both changed the same value, or 503 when the database is out of reach.
* Every editable object is read with a ``version`` (``configfile.version_of`` its stored value);
  an edit must send it back and is refused with 409 ``stale`` when the object changed meanwhile.
  Creating a name that exists is 409 ``exists``.
* No handler rescans a log: counts come from the ledger's index, pages from ``panels.idx``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from panelist.metrics.upkeep import retirement
from panelist.metrics.upkeep.failing import describe
from panelist.metrics.upkeep.health import ask_endpoint
from panelist.metrics.ledger import verdict
from panelist.metrics.panel import owedorder
from panelist.metrics.alerts import Alerts
from panelist.metrics.roster.collection import (
    EXPLORER_POLICIES,
    MAX_DESCRIPTION,
    MAX_TAGS,
    PREFIX,
    REPLIES,
    Limits,
)
from panelist.metrics.errors import BadRequest, Conflict, NotFound, UpstreamError
from panelist.metrics.server.bodies import (
    NOTHING,
    Body,
    Flag,
    Number,
    OneOf,
    Strings,
    Text,
    Whole,
    takes,
)
from panelist.metrics.server import collectionuse, modelpage, panelquery
from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.roster.roster import Model
from panelist.metrics.stats import wilson

if TYPE_CHECKING:  # parts imports the domains whose routes are here
    from panelist.metrics.server.parts import Parts


def edits_config(fn):
    """Marks a handler that edits the config files: with a database, the dashboard runs it
    under the config mirror's ``editing``, so its edit lands in the database (or is refused)
    before the reply."""
    fn.edits_config = True
    return fn


PAGE, MAX_PAGE = 50, 200
TEST_TIMEOUT = 10.0  # seconds a Test or a Discover may take
APART = 20  # panels never delivered that the first page of /api/panels lists apart


@dataclass
class ApiRequest:
    method: str
    parts: Parts  # the server's Parts: its panels, races, onboarding, schedule
    params: dict = field(default_factory=dict)  # from the path pattern
    query: dict = field(default_factory=dict)  # one value per name
    body: Any = None  # the parsed JSON body (None for a read)
    who: str = "dashboard"
    base_url: str = ""  # where this server is reached, for the /v1 hint
    token_required: bool = False  # the dashboard asks for the admin token (a login)

    @property
    def panels(self):
        """The server's Panels: roster, collections, ledger, upstream, home."""
        return self.parts.panels


# -- helpers --------------------------------------------------------------------------------------
NAME = 200  # characters of a name, alias or id a body may carry (each domain checks its own)
URL = 2000  # characters of a base URL
ENV = 128  # characters of an environment variable's name
VERSION = 64  # characters of a version read from a listing


def _limit(req: ApiRequest) -> int:
    raw = req.query.get("limit", str(PAGE))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise BadRequest(f"'limit' must be a whole number from 1 to {MAX_PAGE}", param="limit")
    return int(raw)


def _seq(value: str, param: str) -> int:
    seq = panel_seq(value)
    if seq is None:
        raise BadRequest(f"'{param}' must be a panel id such as p20260101-7", param=param)
    return seq


# -- models ---------------------------------------------------------------------------------------
KNOWN_FIELDS = ("context", "max_output", "vision", "tools", "price_in", "price_out", "currency")


def _model_row(
    model: Model,
    known: Model,
    version: str,
    stats: dict,
    state,
    now: float,
    failing: dict | None = None,
    probe: dict | None = None,
) -> dict:
    """A model's row: its typed fields as stored (what an edit starts from), ``known`` the
    facts the catalog fills where nothing is typed, ``window`` the one seating uses; its
    status (retired, cooling, failing, untested, answering: the first that holds), why it is
    failing (``upkeep.failing``) and its newest probe."""
    useful, not_useful = stats.get("useful", 0), stats.get("not_useful", 0)
    judged = useful + not_useful
    cooling = state.cooling_until if state is not None and state.cooling_until > now else None
    if model.retired:
        status = "retired"
    elif cooling:
        status = "cooling"
    elif failing is not None:
        status = "failing"
    elif not stats.get("seats") and not (probe and probe.get("status") == "ok"):
        status = "untested"
    else:
        status = "answering"
    learned = state.window if state is not None else None
    windows = [w for w in (known.context, learned) if w]
    filled = {k: getattr(known, k) for k in KNOWN_FIELDS if getattr(known, k) != getattr(model, k)}
    if "price_in" in filled:
        filled["currency"] = known.currency  # a price is never shown without its currency
    return dict(
        model.public(),
        version=version,
        known=filled,
        status=status,
        cooling_until=cooling,
        window=min(windows) if windows else None,
        seats=stats.get("seats", 0),
        useful=useful,
        not_useful=not_useful,
        rate=useful / judged if judged else None,
        interval=list(wilson(useful, judged)),
        last_answer=stats.get("last_answer"),
        failing=None if failing is None else dict(failing, why=describe(model.alias, failing)),
        probe=probe,
    )


def list_models(req: ApiRequest) -> dict:
    panels = req.panels
    view = panels.roster.view()
    versions = panels.roster.versions()["models"]
    stats = panels.ledger.model_stats()
    states = panels.ledger.states(view.models.keys(), "general")
    failing = panels.ledger.failing(*req.parts.failures.rule())
    probes = panels.ledger.probes()
    now = time.time()
    known = panels.known.view().models
    rows = [
        _model_row(
            m,
            known.get(a, m),
            versions.get(a, ""),
            stats.get(a, {}),
            states.get(a),
            now,
            failing.get(a),
            probes.get(a),
        )
        for a, m in sorted(view.models.items())
    ]
    return {"data": rows, "shapes": panels.ledger.shapes()}


def get_model(req: ApiRequest) -> dict:
    """The model page: its row, facts, stats per shape, latency, panels, failures, suite and
    race results and alerts (``metrics.server.modelpage``)."""
    alias = req.params["alias"]
    return modelpage.page(req, _one_model(req, alias))


def _one_model(req: ApiRequest, alias: str) -> dict:
    """One model's row of ``GET /api/models``, built alone (its stats summed over its shapes,
    as the listing's are), so a model's page or an edit costs the same at 5 or 500 models."""
    panels = req.panels
    model = panels.roster.view().models.get(alias)
    if model is None:
        raise NotFound(f"unknown model '{alias}'; see GET /api/models")
    shapes = panels.ledger.model_shapes(alias).values()
    answered = [st["last_answer"] for st in shapes if st["last_answer"] is not None]
    stats = {name: sum(st[name] for st in shapes) for name in ("seats", "useful", "not_useful")}
    stats["last_answer"] = max(answered) if answered else None
    state = panels.ledger.states([alias], "general").get(alias)
    known = panels.known.view().models.get(alias, model)
    failing = panels.ledger.failing(*req.parts.failures.rule()).get(alias)
    return _model_row(
        model,
        known,
        panels.roster.versions()["models"].get(alias, ""),
        stats,
        state,
        time.time(),
        failing,
        panels.ledger.probes().get(alias),
    )


MODEL_FACTS = dict(
    endpoint=Text(NAME, nonempty=True, required=True, hint="the endpoint that serves the model"),
    served=Text(NAME, hint="the model id the endpoint knows; leave it out for the alias"),
    family=Text(NAME, hint="explorers are never of a member's family"),
    grade=Text(NAME, hint="a quality tier such as light, general or strong"),
    context=Whole(1, hint="the context window in tokens; leave it out when unknown"),
    max_output=Whole(1, hint="the most tokens one answer may have"),
    vision=Flag(),
    tools=Flag(),
    price_in=Number(0, 1e9, hint="per million tokens"),
    price_out=Number(0, 1e9, hint="per million tokens"),
    currency=Text(3, hint="a 3-letter code such as USD"),
)
ALIAS = "the name a collection uses for the model"
VERSIONED = Text(
    VERSION,
    nonempty=True,
    required=True,
    hint="the version you read, so a change made meanwhile is not overwritten",
)


def _save_model(req: ApiRequest, alias: str, expect: str) -> dict:
    body = req.body
    fields = {k: v for k, v in body.items() if k in MODEL_FACTS and k != "endpoint"}
    known = req.panels.roster.view().models.get(alias)
    if known is not None and known.retired:
        fields["retired"] = True  # an edit of facts keeps a retirement; restore ends it
    req.panels.roster.add_model(alias, body["endpoint"], by=req.who, expect=expect, **fields)
    return _one_model(req, alias)


@edits_config
@takes(
    Body(
        alias=Text(NAME, nonempty=True, required=True, hint=ALIAS),
        version=Text(VERSION),
        **MODEL_FACTS,
    )
)
def create_model(req: ApiRequest) -> dict:
    return _save_model(req, req.body["alias"], "")


@edits_config
@takes(Body(version=VERSIONED, alias=Text(NAME, hint=ALIAS), **MODEL_FACTS))
def update_model(req: ApiRequest) -> dict:
    return _save_model(req, req.params["alias"], req.body["version"])


@takes(NOTHING)
def probe_model(req: ApiRequest) -> dict:
    """One probe of one model, as ``panelist probe ALIAS`` makes it (logged, counted, and
    retiring or restoring as health says), through the server's own seats and admission."""
    from panelist.metrics.upkeep.health import Health

    alias = req.params["alias"]
    health = Health.of(req.panels)
    try:
        [probe] = health.probe([alias])
    finally:
        health.close()
    return {"probe": probe.public(), "model": _one_model(req, alias)}


@edits_config
@takes(NOTHING)
def retire_model(req: ApiRequest) -> dict:
    alerts = Alerts(req.panels.home)
    try:
        retirement.retire(req.panels.roster, alerts, req.params["alias"], by=req.who)
    finally:
        alerts.close()
    return _one_model(req, req.params["alias"])


@edits_config
@takes(NOTHING)
def restore_model(req: ApiRequest) -> dict:
    alias = req.params["alias"]
    alerts = Alerts(req.panels.home)
    try:
        retirement.restore(req.panels.roster, req.panels.ledger, alias, by=req.who, alerts=alerts)
    finally:
        alerts.close()
    return _one_model(req, alias)


@edits_config
@takes(NOTHING)
def delete_model(req: ApiRequest) -> dict:
    alias = req.params["alias"]
    users = req.panels.collections.using(alias)
    if users:
        raise Conflict(
            f"model '{alias}' is used by collection(s) {', '.join(users)}; change them first",
            code="in_use",
        )
    req.panels.roster.remove_model(alias, by=req.who)
    return {"removed": alias}


# -- endpoints ------------------------------------------------------------------------------------
def list_endpoints(req: ApiRequest) -> dict:
    roster = req.panels.roster
    view = roster.view()
    versions = roster.versions()["endpoints"]
    rows = []
    for name, ep in sorted(view.endpoints.items()):
        refused = roster.key_envs.problem(ep.key_env, name)  # why its key is not read, if so
        rows.append(
            {
                "name": name,
                "base_url": ep.base_url,
                "key_env": ep.key_env,
                "key_set": refused is None and bool(roster.api_key(ep)),
                "key_refused": refused,
                "version": versions.get(name, ""),
                "models": sorted(a for a, m in view.models.items() if m.endpoint == name),
            }
        )
    return {"data": rows}


ENDPOINT_NAME = "lower-case letters, digits, '-' or '_'"
ENDPOINT = dict(
    base_url=Text(
        URL,
        nonempty=True,
        required=True,
        hint="an http:// or https:// URL such as http://127.0.0.1:11434/v1",
    ),
    key_env=Text(ENV, hint="the environment variable holding the endpoint's key"),
)


@takes(
    Body(
        name=Text(NAME, hint=ENDPOINT_NAME),
        **ENDPOINT,
        model=Text(NAME, hint="a served model id: a one-token chat instead of the listing"),
    )
)
def test_endpoint(req: ApiRequest) -> dict:
    """One real call to an endpoint not yet saved: its model list, or a one-token chat. A key
    variable saving would refuse is refused (400) before anything is read or sent."""
    body = req.body
    ep = req.panels.roster.check_endpoint(
        body.get("name") or "test", body.get("base_url"), body.get("key_env")
    )
    upstream = req.panels.upstream
    t0 = time.monotonic()
    try:
        if body.get("model"):
            # through the seats core: admission, and a "probe" line with role "test"
            ask_endpoint(
                req.panels.seats, req.panels.ledger, ep, body["model"], timeout=TEST_TIMEOUT
            )
            listed = []
        else:
            listed = [
                e["id"]
                for e in upstream.models(
                    ep.base_url, req.panels.roster.api_key(ep), timeout=TEST_TIMEOUT
                )
            ]
    except UpstreamError as exc:
        # the upstream's own status (a 401 for a wrong key), never ours: None when no reply came
        return {
            "ok": False,
            "status": exc.upstream_status,
            "seconds": round(time.monotonic() - t0, 3),
            "error": f"{exc.kind}: {exc.message}",
            "models": [],
        }
    return {
        "ok": True,
        "status": 200,
        "seconds": round(time.monotonic() - t0, 3),
        "error": None,
        "models": listed,
    }


@edits_config
@takes(
    Body(
        name=Text(NAME, nonempty=True, required=True, hint=ENDPOINT_NAME),
        **ENDPOINT,
        tested=Flag(
            required=True, hint="true once POST /api/endpoints/test passed for this endpoint"
        ),
    )
)
def create_endpoint(req: ApiRequest) -> dict:
    body = req.body
    if body["tested"] is not True:
        raise BadRequest(
            "test the endpoint first (POST /api/endpoints/test) and send "
            '"tested": true once it passes',
            param="tested",
        )
    ep = req.panels.roster.add_endpoint(
        body.get("name"), body.get("base_url"), body.get("key_env"), by=req.who, expect=""
    )
    return next(r for r in list_endpoints(req)["data"] if r["name"] == ep.name)


@edits_config
@takes(NOTHING)
def delete_endpoint(req: ApiRequest) -> dict:
    name = req.params["name"]
    users = sorted(a for a, m in req.panels.roster.view().models.items() if m.endpoint == name)
    if users:
        raise Conflict(
            f"endpoint '{name}' still serves {', '.join(users)}; remove or move those models first",
            code="in_use",
        )
    req.panels.roster.remove_endpoint(name, by=req.who)
    return {"removed": req.params["name"]}


# -- collections and limits -----------------------------------------------------------------------
def _limits_view(req: ApiRequest) -> dict:
    limits: Limits = req.panels.collections.limits()
    return dict(vars(limits), version=req.panels.collections.versions()["limits"])


def list_collections(req: ApiRequest) -> dict:
    collections = req.panels.collections
    limits = collections.limits()
    versions = collections.versions()["collections"]
    rows = []
    for name, c in sorted(collections.all().items()):
        explorers = c.explorers(limits)
        rows.append(
            dict(
                c.public(),
                id=c.model_id,
                explorers=explorers,
                calls=len(c.members) + explorers,
                version=versions.get(name, ""),
            )
        )
    return {"data": collectionuse.with_use(req, rows), "limits": _limits_view(req)}


COLLECTION = dict(
    members=Strings(
        64, NAME, comma=True, required=True, hint="the aliases of the models that answer"
    ),
    description=Text(MAX_DESCRIPTION, hint="what the collection is for"),
    tags=Strings(MAX_TAGS, NAME, comma=True, hint="lower-case words"),
    shape=Text(NAME, hint="one lower-case word such as review, or auto"),
    reply=OneOf(*REPLIES),
    merger=Text(NAME, hint="the alias of the model that merges"),
    explorer_policy=OneOf(*EXPLORER_POLICIES),
)
COLLECTION_NAME = "what the collection is for, asked as bench/<name>"


def _save_collection(req: ApiRequest, name: str, expect: str) -> dict:
    body = req.body
    fields = {k: v for k, v in body.items() if k in COLLECTION and k != "members"}
    c = req.panels.collections.save(
        req.panels.roster.view(), name, body.get("members"), by=req.who, expect=expect, **fields
    )
    return next(r for r in list_collections(req)["data"] if r["name"] == c.name)


@edits_config
@takes(
    Body(
        name=Text(NAME, nonempty=True, required=True, hint=COLLECTION_NAME),
        version=Text(VERSION),
        **COLLECTION,
    )
)
def create_collection(req: ApiRequest) -> dict:
    return _save_collection(req, req.body["name"].removeprefix(PREFIX), "")


@edits_config
@takes(Body(version=VERSIONED, name=Text(NAME, hint=COLLECTION_NAME), **COLLECTION))
def update_collection(req: ApiRequest) -> dict:
    return _save_collection(req, req.params["name"], req.body["version"])


@edits_config
@takes(NOTHING)
def delete_collection(req: ApiRequest) -> dict:
    req.panels.collections.remove(req.params["name"], by=req.who)
    return {"removed": req.params["name"]}


SECONDS = 86_400  # a day: longer than any seat, panel or rest should take


@edits_config
@takes(
    Body(
        version=VERSIONED,
        max_explorers=Whole(0, 1000, hint="explorer seats added to each panel"),
        max_calls=Whole(1, 1000, hint="members plus explorers never exceed it"),
        **{
            name: Number(0, SECONDS, above=True, hint="seconds")
            for name in (
                "seat_timeout",
                "panel_timeout",
                "cooldown",
                "max_cooldown",
                "decider_budget",
                "stall_timeout",
            )
        },
    )
)
def update_limits(req: ApiRequest) -> dict:
    body = dict(req.body)
    version = body.pop("version")
    req.panels.collections.set_limits(body, version=version, by=req.who)
    return _limits_view(req)


# -- panels, calls and verdicts -------------------------------------------------------------------
def list_panels(req: ApiRequest) -> dict:
    """Finished panels newest first (``before``), or newer than a cursor (``after``); with any
    filter (``q``, ``model``, ``collection``, ``key``, ``status``, ``since``, ``until``: see
    ``metrics.server.panelquery``), only those that match, from the search index."""
    ledger = req.panels.ledger
    panelquery.check_names(req.query)
    limit = _limit(req)
    if "before" in req.query and "after" in req.query:
        raise BadRequest(
            "give 'before' (older panels) or 'after' (newer ones), not both", param="after"
        )
    if panelquery.wanted(req.query):
        return panelquery.listing(req, limit, _seq)
    # cursors are panel ids; one may name no finished panel (the ledger reads only its number)
    if "after" in req.query:
        after = req.query["after"]
        data, cursor = ledger.panels_after(_seq(after, "after") if after else None, limit)
        nxt = f"p00000000-{cursor}" if cursor >= 0 else None
    else:
        before = _seq(req.query["before"], "before") if "before" in req.query else None
        data, next_seq = ledger.panels_page(before, limit)
        nxt = None if next_seq is None else f"p00000000-{next_seq}"
        if before is None:
            # the first page also lists apart the recent panels whose reply never reached the
            # caller (their seats are owed no verdict), as /bench/pending does
            return {
                "data": data,
                "next": nxt,
                "latest": ledger.latest_panel(),
                "owed": ledger.owed_count(),
                "apart": [
                    {
                        "panel": p["panel"],
                        "reason": p["reason"],
                        "calls": [c.get("call") for c in p["calls"]],
                    }
                    for p in ledger.undelivered(limit=APART)
                ],
            }
    return {"data": data, "next": nxt, "latest": ledger.latest_panel(), "owed": ledger.owed_count()}


def get_panel(req: ApiRequest) -> dict:
    ledger = req.panels.ledger
    found = ledger.panel(req.params["panel"])
    if found is None:
        raise NotFound(f"unknown panel '{req.params['panel']}'; it may still be running")
    found = dict(found)
    found["seats"] = [
        dict(s, verdict=ledger.verdict_of(s.get("call")))
        for s in found.get("seats") or ()
        if isinstance(s, dict)
    ]
    if isinstance(found.get("merger"), dict):
        found["merger"] = dict(
            found["merger"], verdict=ledger.verdict_of(found["merger"].get("call"))
        )
    return found


def get_call(req: ApiRequest) -> dict:
    call = req.params["call"]
    ledger = req.panels.ledger
    panel_id = call.split(".", 1)[0]
    record = ledger.panel(panel_id)
    seats = list((record or {}).get("seats") or ())
    if record and isinstance(record.get("merger"), dict):
        seats.append(record["merger"])
    for seat in seats:
        if isinstance(seat, dict) and seat.get("call") == call:
            return {
                "call": call,
                "panel": panel_id,
                "alias": seat.get("alias"),
                "seat": seat.get("seat"),
                "status": seat.get("status"),
                "seconds": seat.get("seconds"),
                "error": seat.get("error"),
                "answer": seat.get("answer"),
                "prompt": record.get("prompt"),
                "collection": record.get("collection"),
                "verdict": ledger.verdict_of(call),
            }
    raise NotFound(
        f"unknown call '{call}'; call ids look like p20260101-7.member1 (the panel "
        "must have finished)"
    )


_ID = re.compile(r"(p\d{8}-\d{1,15})(\.[a-z]+\d*)?")


def find(req: ApiRequest) -> dict:
    q = (req.query.get("q") or "").strip()
    m = _ID.fullmatch(q)
    if m is None:
        raise BadRequest(
            "search for a panel id (p20260101-7) or a call id (p20260101-7.member1)", param="q"
        )
    if req.panels.ledger.panel(m.group(1)) is None:
        raise NotFound(f"no finished panel '{m.group(1)}'")
    return {"panel": m.group(1), "call": q if m.group(2) else None}


def list_owed(req: ApiRequest) -> dict:
    """The seats owed a verdict, oldest first (the queue a person works through) or by the value
    of a verdict (``?order=value``: each with its ``reason``), and how many are owed in all."""
    ledger, panels = req.panels.ledger, req.panels
    order = owedorder.check(req.query.get("order"), "oldest")
    rows = owedorder.ordered(
        ledger, panels.collections, panels.known.view(), order, limit=_limit(req)
    )
    return {"data": rows, "owed": ledger.owed_count(), "order": order}


@takes(
    Body(
        call=Text(verdict.MAX_CALL, hint="a seat's call id, or send panel and alias"),
        panel=Text(verdict.MAX_CALL, hint="a panel id, sent with alias"),
        alias=Text(verdict.MAX_CALL, hint="the model judged, or merger"),
        useful=Flag(required=True, hint="whether the answer helped"),
        note=Text(verdict.MAX_NOTE),
        real=Strings(verdict.MAX_CLAIMS, verdict.MAX_CLAIM, hint="claims you confirmed"),
        false=Strings(verdict.MAX_CLAIMS, verdict.MAX_CLAIM, hint="claims you refuted"),
    )
)
def post_verdict(req: ApiRequest) -> dict:
    v = verdict.check(req.body)
    ledger = req.panels.ledger
    return ledger.record_verdict(
        verdict.call_of(v, ledger),
        useful=v["useful"],
        note=v["note"],
        real=v["real"],
        false=v["false"],
        by=req.who,
    )


def evidence(req: ApiRequest) -> dict:
    shape = req.query.get("shape") or None
    if shape == "all":
        shape = None
    ledger = req.panels.ledger
    # "all" is each model over every shape (one row a model); a shape, each model in it
    rows = []
    for alias, st in sorted(ledger.model_stats(shape).items()):
        judged = st.get("useful", 0) + st.get("not_useful", 0)
        low, high = wilson(st.get("useful", 0), judged)
        rows.append(
            dict(st, alias=alias, shape=shape or "all", interval=[round(low, 4), round(high, 4)])
        )
    return {"data": rows, "shapes": ledger.shapes(), "buckets": ledger.buckets(30)}


class Accepted(dict):
    """A reply for work taken on and done later: sent with 202."""

    status = 202


# -- alerts ---------------------------------------------------------------------------------------
def list_alerts(req: ApiRequest) -> dict:
    """The newest alerts, with one for each config edit set aside (``readiness``)."""
    from panelist.metrics.server.readiness import conflict_alerts

    found = conflict_alerts(req.panels.home.config) + Alerts(req.panels.home).recent(_limit(req))
    found.sort(key=lambda a: str(a.get("ts", "")), reverse=True)  # newest first, as the log
    return {"data": found[: _limit(req)]}


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/models", {"GET": list_models, "POST": create_model}),
    ("/api/models/{alias}", {"GET": get_model, "PUT": update_model, "DELETE": delete_model}),
    ("/api/models/{alias}/probe", {"POST": probe_model}),
    ("/api/models/{alias}/retire", {"POST": retire_model}),
    ("/api/models/{alias}/restore", {"POST": restore_model}),
    ("/api/endpoints", {"GET": list_endpoints, "POST": create_endpoint}),
    ("/api/endpoints/test", {"POST": test_endpoint}),
    ("/api/endpoints/{name}", {"DELETE": delete_endpoint}),
    ("/api/collections", {"GET": list_collections, "POST": create_collection}),
    ("/api/collections/{name}", {"PUT": update_collection, "DELETE": delete_collection}),
    ("/api/limits", {"PUT": update_limits}),
    ("/api/panels", {"GET": list_panels}),
    ("/api/panels/{panel}", {"GET": get_panel}),
    ("/api/calls/{call}", {"GET": get_call}),
    ("/api/find", {"GET": find}),
    ("/api/verdict", {"POST": post_verdict}),
    ("/api/owed", {"GET": list_owed}),
    ("/api/evidence", {"GET": evidence}),
    ("/api/alerts", {"GET": list_alerts}),
]
