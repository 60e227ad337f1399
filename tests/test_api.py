"""The dashboard's JSON API, route by route, over a real dashboard server and real sockets.

Every ``(method, pattern)`` of ``metrics.server.api.ROUTES`` has a success test (marked with
``@covers``; ``test_every_route_has_a_success_test`` fails for a route without one) and meets
the refusals that apply to it: 401 without the login, 403 from a foreign origin, 405 for a
method it does not take, 415 for a write that is not JSON, and the 400 / 404 / 409 of its own
input. Writes are checked where they land: ``config/changes.jsonl`` (``"by": "dashboard"``)
and, for verdicts, the evidence log.
"""

import hashlib
import json
import re
import socket

import pytest

from conftest import DASHBOARD_TOKEN as TOKEN, Gateway, read_jsonl, wait_until
from panelist.metrics.server import api
from panelist.metrics.cli.main import main
from panelist.metrics.roster.grades import Grades
from panelist.metrics.server.guard import WRITES
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream
from panelist.serve import make_dashboard

ROUTE_TABLE = {(method, pattern) for pattern, actions in api.ROUTES for method in actions}
COVERED: set[tuple[str, str]] = set()
MODEL_KEYS = {"alias", "endpoint", "served", "family", "grade", "context", "max_output",
              "vision", "tools", "price_in", "price_out", "currency", "retired", "version",
              "status", "cooling_until", "window", "seats", "useful", "not_useful", "rate",
              "interval", "last_answer", "known", "failing", "probe"}
PANEL_KEYS = {"panel", "collection", "key", "started", "seconds", "shape", "reply", "seats",
              "merger", "abandoned"}
SEAT_KEYS = {"call", "seat", "alias", "status", "seconds", "verdict"}


def covers(method: str, pattern: str):
    """Mark a test as the success test of one route of ``metrics.server.api.ROUTES``."""
    assert (method, pattern) in ROUTE_TABLE, f"{method} {pattern} is not in api.ROUTES"

    def mark(fn):
        COVERED.add((method, pattern))
        return fn
    return mark


def concrete(pattern: str) -> str:
    """A path the pattern matches (the gate and the guard answer before any lookup)."""
    return re.sub(r"\{\w+\}", "fast", pattern)


def version_of(value) -> str:
    """The contract's version, computed here from the stored JSON (not by the product)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def stored(home, name: str) -> dict:
    return json.loads(home.file(name).read_text())


def changes(home) -> list[dict]:
    path = home.file("changes.jsonl")
    return read_jsonl(path) if path.exists() else []


def new_changes(home, before: int) -> list[dict]:
    return changes(home)[before:]


def assert_error(status, body, expect: int, *, code=None, param=None, says=()):
    assert status == expect, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], body
    if code is not None:
        assert err["code"] == code, body
    if param is not None:
        assert err["param"] == param, body
    for fragment in ([says] if isinstance(says, str) else says):
        assert fragment in err["message"], body


def ask(client, collection="bench/trio", content="Review: def add(a, b): return a - b",
        headers=None):
    status, body, _ = client.post("/v1/chat/completions", {
        "model": collection, "messages": [{"role": "user", "content": content}]},
        headers=headers)
    assert status == 200, body
    return body["bench"]


# -- every route: covered, gated, screened, typed ------------------------------------------------
def test_every_route_has_a_success_test():
    missing = sorted(ROUTE_TABLE - COVERED)
    assert not missing, f"routes of metrics.server.api.ROUTES without a success test: {missing}"


@pytest.mark.parametrize("method,pattern", sorted(ROUTE_TABLE))
def test_every_route_wants_the_login_when_a_token_is_set(locked, home, method, pattern):
    before = changes(home)
    body = {} if method in WRITES else None
    status, reply, _ = locked.request(method, concrete(pattern), body)
    assert_error(status, reply, 401, code="login_required", says="/api/login")
    assert changes(home) == before


@pytest.mark.parametrize("method,pattern", sorted(ROUTE_TABLE))
def test_every_route_refuses_a_foreign_origin(dash, home, method, pattern):
    before = changes(home)
    body = {} if method in WRITES else None
    status, reply, _ = dash.request(method, concrete(pattern), body,
                                    headers={"Origin": "https://evil.example"})
    assert_error(status, reply, 403, says="evil.example")
    assert changes(home) == before


@pytest.mark.parametrize("pattern,actions", api.ROUTES, ids=[p for p, _ in api.ROUTES])
def test_every_route_refuses_a_method_it_does_not_take(dash, pattern, actions):
    wrong = next(m for m in ("GET", "POST", "PUT", "DELETE", "PATCH") if m not in actions)
    status, reply, headers = dash.request(wrong, concrete(pattern),
                                          {} if wrong in WRITES else None)
    allowed = ", ".join(sorted(actions))
    assert_error(status, reply, 405, says=allowed)
    assert headers["Allow"] == allowed


@pytest.mark.parametrize("method,pattern", sorted(r for r in ROUTE_TABLE if r[0] in WRITES))
def test_every_write_wants_json(dash, home, method, pattern):
    before = changes(home)
    status, reply, _ = dash.request(method, concrete(pattern), raw=b"name=x",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_error(status, reply, 415, says="application/json")
    assert changes(home) == before


def test_an_unknown_api_route_is_a_404(dash, locked):
    status, reply, _ = dash.get("/api/nothing-here")
    assert_error(status, reply, 404, says="/api/nothing-here")
    # behind the login, an unknown route says nothing of what exists
    status, reply, _ = locked.get("/api/nothing-here")
    assert_error(status, reply, 401, code="login_required")


def test_a_body_that_is_not_json_or_not_an_object_is_a_400(dash, home):
    before = changes(home)
    status, reply, _ = dash.post("/api/models", raw=b"{nope")
    assert_error(status, reply, 400, says="not valid JSON")
    status, reply, _ = dash.post("/api/models", ["alias", "x"])
    assert_error(status, reply, 400, says="JSON object")
    assert changes(home) == before


def test_the_login_opens_every_route(locked, home):
    status, body, headers = locked.post("/api/login", {"token": TOKEN})
    assert status == 200 and body == {"ok": True}
    cookie = headers["Set-Cookie"].split(";")[0]
    status, info, _ = locked.get("/api/info", headers={"Cookie": cookie})
    assert status == 200 and info["auth"] == {"token_required": True}
    status, models, _ = locked.get("/api/models", headers={"Cookie": cookie})
    assert status == 200 and len(models["data"]) == 6


# -- info and the demo ---------------------------------------------------------------------------
@covers("GET", "/api/info")
def test_info(dash, home):
    status, info, _ = dash.get("/api/info")
    assert status == 200
    assert set(info) == {"version", "python", "data_dir", "counts", "first_run", "auth",
                         "gateway"}
    assert info["counts"] == {"endpoints": 1, "models": 6, "collections": 1, "panels": 0,
                              "verdicts": 0, "owed": 0}
    assert info["first_run"] is False and info["auth"] == {"token_required": False}
    assert info["gateway"] == {"base_url": dash.url + "/v1"}
    assert info["data_dir"] == str(home.root)
    bench = ask(dash)
    dash.post("/api/verdict", {"call": bench["seats"][0]["call"], "useful": True})
    status, info, _ = dash.get("/api/info")
    assert info["counts"]["panels"] == 1 and info["counts"]["verdicts"] == 1
    assert info["counts"]["owed"] == sum(s["status"] == "ok" for s in bench["seats"]) - 1


def test_info_on_a_new_data_folder_is_a_first_run(tmp_path):
    with Gateway(make_dashboard(open_home(tmp_path / "new"), env={})) as fresh:
        status, info, _ = fresh.get("/api/info")
    assert status == 200 and info["first_run"] is True
    assert info["counts"]["endpoints"] == 0 and info["counts"]["panels"] == 0


@covers("POST", "/api/demo")
def test_demo_loads_serves_and_stops_with_the_server(home):
    dash = Gateway(make_dashboard(home, env={}))
    try:
        status, body, _ = dash.post("/api/demo")
        assert (status, body) == (200, {"loaded": True, "collection": "bench/demo"})
        status, again, _ = dash.post("/api/demo", {})   # idempotent
        assert (status, again) == (200, body)
        _, endpoints, _ = dash.get("/api/endpoints")
        (demo,) = [e for e in endpoints["data"] if e["name"] == "demo"]
        assert set(demo["models"]) >= {"sim-swift", "sim-steady", "sim-careful"}
        _, cols, _ = dash.get("/api/collections")
        assert "bench/demo" in [c["id"] for c in cols["data"]]
        bench = ask(dash, "bench/demo", "Say hello")
        members = [s for s in bench["seats"] if s["seat"] == "member"]
        assert [s["status"] for s in members] == ["ok", "ok", "ok"]
    finally:
        dash.close()
    # the simulated upstream the demo started ended with the server
    port = int(demo["base_url"].split(":")[2].split("/")[0])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


# -- models --------------------------------------------------------------------------------------
@covers("GET", "/api/models")
def test_list_models(dash, home):
    status, body, _ = dash.get("/api/models")
    assert status == 200 and set(body) == {"data", "shapes"}
    rows = {r["alias"]: r for r in body["data"]}
    assert list(rows) == sorted(rows) == ["fast", "mid", "slow", "x-one", "x-three", "x-two"]
    roster = stored(home, "roster.json")
    for alias, row in rows.items():
        assert set(row) == MODEL_KEYS, alias
        assert row["version"] == version_of(roster["models"][alias])
        assert row["status"] == "untested" and row["seats"] == 0 and row["rate"] is None
        assert row["interval"] == [0.0, 1.0] and row["last_answer"] is None
        assert row["window"] == 100_000 and row["endpoint"] == "sim"
        assert row["known"] == {}   # nothing in the catalog yet
    bench = ask(dash)
    call = next(s["call"] for s in bench["seats"] if s["alias"] == "fast")
    dash.post("/api/verdict", {"call": call, "useful": True})
    _, body, _ = dash.get("/api/models")
    fast = next(r for r in body["data"] if r["alias"] == "fast")
    assert fast["status"] == "answering" and fast["seats"] == 1
    assert (fast["useful"], fast["not_useful"], fast["rate"]) == (1, 0, 1.0)
    assert fast["interval"][1] == 1.0 and 0 < fast["interval"][0] < 1
    assert isinstance(fast["last_answer"], float)
    assert body["shapes"] == ["general"]


@covers("POST", "/api/models")
def test_create_model(dash, home):
    n = len(changes(home))
    status, row, _ = dash.post("/api/models", {
        "alias": "newbie", "endpoint": "sim", "served": "fast", "family": "new",
        "context": 32_000, "vision": True, "price_in": 0.5, "price_out": 1.5})
    assert status == 200, row
    assert set(row) == MODEL_KEYS
    assert (row["alias"], row["served"], row["context"], row["vision"]) == \
        ("newbie", "fast", 32_000, True)
    assert row["status"] == "untested"
    assert row["version"] == version_of(stored(home, "roster.json")["models"]["newbie"])
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "model newbie"
    assert change["old"] is None and change["new"]["served"] == "fast"
    _, body, _ = dash.get("/api/models")
    assert "newbie" in [r["alias"] for r in body["data"]]


def test_create_model_refusals(dash, home):
    n = len(changes(home))
    status, body, _ = dash.post("/api/models", {"alias": "fast", "endpoint": "sim"})
    assert_error(status, body, 409, code="exists", says="fast")
    status, body, _ = dash.post("/api/models", {"endpoint": "sim"})
    assert_error(status, body, 400, param="alias", says="'alias'")
    status, body, _ = dash.post("/api/models", {"alias": "a"})
    assert_error(status, body, 400, param="endpoint", says="'endpoint'")
    status, body, _ = dash.post("/api/models", {"alias": "a", "endpoint": "sim", "colour": 1})
    assert_error(status, body, 400, param="colour", says="colour")
    status, body, _ = dash.post("/api/models", {"alias": "a", "endpoint": "sim",
                                                "context": "big"})
    assert_error(status, body, 400, says="context")
    status, body, _ = dash.post("/api/models", {"alias": "a", "endpoint": "nowhere"})
    assert_error(status, body, 400, says="nowhere")
    assert changes(home)[n:] == []


@covers("PUT", "/api/models/{alias}")
def test_update_model(dash, home):
    _, body, _ = dash.get("/api/models")
    mid = next(r for r in body["data"] if r["alias"] == "mid")
    n = len(changes(home))
    status, row, _ = dash.request("PUT", "/api/models/mid", {
        "endpoint": "sim", "family": "mid", "context": 50_000, "grade": "strong",
        "version": mid["version"]})
    assert status == 200, row
    assert (row["context"], row["grade"], row["window"]) == (50_000, "strong", 50_000)
    assert row["version"] != mid["version"]
    assert row["version"] == version_of(stored(home, "roster.json")["models"]["mid"])
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "model mid"
    assert change["old"]["context"] == 100_000 and change["new"]["context"] == 50_000
    # the version read before that edit is stale now
    status, body, _ = dash.request("PUT", "/api/models/mid", {
        "endpoint": "sim", "context": 1_000, "version": mid["version"]})
    assert_error(status, body, 409, code="stale", says="reload")
    assert stored(home, "roster.json")["models"]["mid"]["context"] == 50_000
    status, body, _ = dash.request("PUT", "/api/models/mid", {"endpoint": "sim"})
    assert_error(status, body, 400, param="version", says="'version'")
    # a model removed meanwhile cannot be edited back into being
    status, body, _ = dash.request("PUT", "/api/models/ghost", {
        "endpoint": "sim", "version": mid["version"]})
    assert_error(status, body, 409, code="stale", says="ghost")
    assert "ghost" not in stored(home, "roster.json")["models"]
    assert len(changes(home)) == n + 1


@covers("POST", "/api/models/{alias}/retire")
def test_retire_model(dash, home):
    n = len(changes(home))
    status, row, _ = dash.post("/api/models/x-two/retire")
    assert status == 200 and row["alias"] == "x-two"
    assert row["retired"] is True and row["status"] == "retired"
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["new"]["retired"] is True
    (alert,) = read_jsonl(home.root / "runs" / "alerts.jsonl")
    assert (alert["kind"], alert["subject"], alert["by"]) == ("retired", "x-two", "dashboard")
    dash.post("/api/models/x-two/retire")   # retired already: no second alert
    assert len(read_jsonl(home.root / "runs" / "alerts.jsonl")) == 1
    # an edit of its facts keeps it retired
    status, row, _ = dash.request("PUT", "/api/models/x-two", {
        "endpoint": "sim", "family": "x-two", "context": 90_000, "version": row["version"]})
    assert status == 200 and row["retired"] is True and row["context"] == 90_000
    status, body, _ = dash.post("/api/models/ghost/retire")
    assert_error(status, body, 404, says="ghost")


@covers("POST", "/api/models/{alias}/restore")
def test_restore_ends_retirement_and_cooldown(dash, home, sim):
    dash.post("/api/models/x-two/retire")
    sim.script("x-one", fail="rate_limit", retry_after=600)
    bench = ask(dash)
    assert any(s["alias"] == "x-one" and s["status"] == "error" for s in bench["seats"])
    _, body, _ = dash.get("/api/models")
    rows = {r["alias"]: r for r in body["data"]}
    assert rows["x-one"]["status"] == "cooling" and rows["x-one"]["cooling_until"] > 0
    n = len(changes(home))
    status, row, _ = dash.post("/api/models/x-one/restore")
    assert status == 200 and row["status"] != "cooling" and row["cooling_until"] is None
    cooldowns = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl")
                 if e["kind"] == "cooldown" and e.get("alias") == "x-one"]
    assert "dashboard" in json.dumps(cooldowns[-1]), cooldowns[-1]
    assert new_changes(home, n) == []   # it was not retired: nothing in the config changed
    status, row, _ = dash.post("/api/models/x-two/restore")
    assert status == 200 and row["retired"] is False and row["status"] == "untested"
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "model x-two"
    assert change["old"]["retired"] is True and change["new"]["retired"] is False
    kinds = [(a["kind"], a["subject"]) for a in read_jsonl(home.root / "runs" / "alerts.jsonl")]
    assert kinds == [("retired", "x-two"), ("restored", "x-two")]   # a cooldown's end is none
    status, body, _ = dash.post("/api/models/ghost/restore")
    assert_error(status, body, 404, says="ghost")


@covers("DELETE", "/api/models/{alias}")
def test_delete_model(dash, home):
    n = len(changes(home))
    status, body, _ = dash.request("DELETE", "/api/models/fast")
    assert_error(status, body, 409, code="in_use", says="trio")
    status, body, _ = dash.request("DELETE", "/api/models/x-three")
    assert (status, body) == (200, {"removed": "x-three"})
    assert "x-three" not in stored(home, "roster.json")["models"]
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "model x-three"
    assert change["new"] is None and change["old"]["endpoint"] == "sim"
    status, body, _ = dash.request("DELETE", "/api/models/x-three")
    assert_error(status, body, 404, says="x-three")


# -- endpoints -----------------------------------------------------------------------------------
@covers("GET", "/api/endpoints")
def test_list_endpoints(dash, home, sim):
    status, body, _ = dash.get("/api/endpoints")
    assert status == 200
    (row,) = body["data"]
    assert set(row) == {"name", "base_url", "key_env", "key_set", "key_refused", "version",
                        "models"}
    assert row["name"] == "sim" and row["base_url"] == sim.url.rstrip("/")
    assert row["key_set"] is False and row["key_env"] and row["key_refused"] is None
    assert row["models"] == ["fast", "mid", "slow", "x-one", "x-three", "x-two"]
    assert row["version"] == version_of(stored(home, "roster.json")["endpoints"]["sim"])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@covers("POST", "/api/endpoints/test")
def test_endpoint_test_makes_one_real_call_and_stores_nothing(dash, home, sim):
    roster = home.file("roster.json").read_bytes()
    n = len(changes(home))
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": sim.url})
    assert status == 200, body
    assert set(body) == {"ok", "status", "seconds", "error", "models"}
    assert body["ok"] is True and body["status"] == 200 and body["error"] is None
    assert set(body["models"]) == {"fast", "mid", "slow", "x-one", "x-two", "x-three"}
    before = sim.count("mid")
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": sim.url, "model": "mid"})
    assert status == 200 and body["ok"] is True, body
    assert sim.count("mid") == before + 1
    status, body, _ = dash.post("/api/endpoints/test", {
        "base_url": f"http://127.0.0.1:{closed_port()}/v1"})
    assert status == 200 and body["ok"] is False and body["models"] == []
    assert body["error"].startswith("connection:"), body
    assert home.file("roster.json").read_bytes() == roster and new_changes(home, n) == []
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": "ftp://x"})
    assert_error(status, body, 400, says="base URL")
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": sim.url, "speed": 1})
    assert_error(status, body, 400, param="speed")


def test_endpoint_test_names_the_upstreams_own_status_not_ours(dash, sim):
    sim.script("mid", fail="auth")
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": sim.url, "model": "mid"})
    assert status == 200 and body["ok"] is False, body
    assert body["status"] == 401, body   # what the upstream said, not the 502 a caller would get
    assert body["error"].startswith("auth:") and "(401)" in body["error"], body
    sim.script("mid", fail="rate_limit")
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": sim.url, "model": "mid"})
    assert body["ok"] is False and body["status"] == 429, body
    with SimUpstream({"m": {}}, listing_key="sk-elsewhere") as keyed:   # a listing refused
        status, body, _ = dash.post("/api/endpoints/test", {"base_url": keyed.url})
    assert status == 200 and body["ok"] is False and body["status"] == 401, body
    status, body, _ = dash.post("/api/endpoints/test", {
        "base_url": f"http://127.0.0.1:{closed_port()}/v1"})
    assert body["ok"] is False and body["status"] is None, body   # no reply: no status


@covers("POST", "/api/endpoints")
def test_create_endpoint(dash, home, sim):
    n = len(changes(home))
    status, body, _ = dash.post("/api/endpoints", {"name": "other", "base_url": sim.url})
    assert_error(status, body, 400, param="tested", says="tested")
    status, body, _ = dash.post("/api/endpoints", {"name": "other", "base_url": sim.url,
                                                   "tested": "yes"})
    assert_error(status, body, 400, param="tested")
    assert new_changes(home, n) == []
    status, body, _ = dash.post("/api/endpoints", {"name": "other", "base_url": sim.url,
                                                   "key_env": "OTHER_KEY", "tested": True})
    assert_error(status, body, 400, param="key_env", says=("PANELIST_KEY_OTHER", "key_envs.json"))
    assert new_changes(home, n) == []
    status, row, _ = dash.post("/api/endpoints", {"name": "other", "base_url": sim.url,
                                                  "key_env": "PANELIST_KEY_ELSEWHERE",
                                                  "tested": True})
    assert status == 200, row
    assert row["name"] == "other" and row["key_env"] == "PANELIST_KEY_ELSEWHERE"
    assert row["models"] == []
    assert row["version"] == version_of(stored(home, "roster.json")["endpoints"]["other"])
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "endpoint other"
    assert change["old"] is None
    status, body, _ = dash.post("/api/endpoints", {"name": "other", "base_url": sim.url,
                                                   "tested": True})
    assert_error(status, body, 409, code="exists", says="other")
    status, body, _ = dash.post("/api/endpoints", {"name": "Bad Name!", "base_url": sim.url,
                                                   "tested": True})
    assert_error(status, body, 400, says="endpoint name")
    assert len(changes(home)) == n + 1


@covers("DELETE", "/api/endpoints/{name}")
def test_delete_endpoint(dash, home, sim):
    dash.post("/api/endpoints", {"name": "spare", "base_url": sim.url, "tested": True})
    n = len(changes(home))
    status, body, _ = dash.request("DELETE", "/api/endpoints/sim")
    assert_error(status, body, 409, code="in_use", says="remove or move those models first")
    status, body, _ = dash.request("DELETE", "/api/endpoints/spare")
    assert (status, body) == (200, {"removed": "spare"})
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "endpoint spare"
    assert change["new"] is None
    assert "spare" not in stored(home, "roster.json")["endpoints"]
    status, body, _ = dash.request("DELETE", "/api/endpoints/spare")
    assert_error(status, body, 404, says="spare")


@covers("GET", "/api/endpoints/{name}/discover")
def test_discover(dash, home, sim):
    sim.script("not-yet-added")
    status, body, _ = dash.get("/api/endpoints/sim/discover")
    assert status == 200, body
    found = {r["served"]: r["on_roster"] for r in body["data"]}
    assert found == {"fast": True, "mid": True, "slow": True, "x-one": True, "x-two": True,
                     "x-three": True, "not-yet-added": False}
    assert [r["served"] for r in body["data"]] == sorted(found)
    status, body, _ = dash.get("/api/endpoints/ghost/discover")
    assert_error(status, body, 404, says="ghost")
    dash.post("/api/endpoints", {"name": "gone", "tested": True,
                                 "base_url": f"http://127.0.0.1:{closed_port()}/v1"})
    status, body, _ = dash.get("/api/endpoints/gone/discover")
    assert_error(status, body, 502)


@covers("GET", "/api/discover")
def test_discover_lists_only_models_off_the_roster(dash, home, sim):
    sim.script("not-yet-added")
    status, body, _ = dash.get("/api/discover")
    assert status == 200, body
    assert [(r["endpoint"], r["id"]) for r in body["models"]] == [("sim", "not-yet-added")]
    assert body["failed"] == []
    status, body, _ = dash.get("/api/discover?endpoint=ghost")
    assert_error(status, body, 404, says="ghost")


@covers("POST", "/api/discover/add")
def test_discover_add_registers_the_model_as_the_cli_does(dash, home, sim):
    sim.script("not-yet-added")
    before = len(changes(home))
    status, body, _ = dash.post("/api/discover/add", {"endpoint": "sim", "served": "not-yet-added"})
    assert status == 200, body
    assert [a["alias"] for a in body["added"]] == ["not-yet-added"]
    model = stored(home, "roster.json")["models"]["not-yet-added"]
    assert model["endpoint"] == "sim"
    assert [c["new"]["endpoint"] for c in new_changes(home, before)
            if isinstance(c.get("new"), dict)] == ["sim"]
    status, body, _ = dash.get("/api/discover")
    assert body["models"] == []


def test_discover_add_refusals(dash, home, sim):
    status, body, _ = dash.post("/api/discover/add", {"endpoint": "sim", "served": "fast"})
    assert_error(status, body, 404, says="fast")
    status, body, _ = dash.post("/api/discover/add", {"endpoint": "sim"})
    assert_error(status, body, 400, param="served")
    status, body, _ = dash.post("/api/discover/add", {"endpoint": "sim", "served": "x",
                                                      "alias": "y"})
    assert_error(status, body, 400, param="alias")
    assert "x" not in stored(home, "roster.json")["models"]


@covers("GET", "/api/onboarding")
@covers("POST", "/api/onboarding")
def test_onboarding_enqueues_and_the_servers_worker_takes_it_to_ready(dash, home, sim):
    # the whole way, refusals and kill -9 resumes are in test_onboarding.py
    status, body, _ = dash.post("/api/onboarding", {"aliases": ["fast"]})
    assert status == 202 and [e["alias"] for e in body["enqueued"]] == ["fast"], body

    def ready():
        return dash.get("/api/onboarding")[1]["data"][0]["status"] == "ready"
    assert wait_until(ready)
    assert [r["step"] for r in read_jsonl(home.root / "runs" / "onboarding.jsonl")
            if r.get("status") == "done"] == ["register", "probe", "suite", "ready"]


@covers("GET", "/api/alerts")
def test_alerts_newest_first(dash, home):
    from panelist.metrics.alerts import Alerts
    status, body, _ = dash.get("/api/alerts")
    assert (status, body) == (200, {"data": []})
    book = Alerts(home)
    book.raise_alert("retired", "fast", "fast retired after 3 hard failures")
    book.raise_alert("restored", "fast", "fast answers again")
    book.close()
    status, body, _ = dash.get("/api/alerts")
    assert status == 200, body
    assert [a["kind"] for a in body["data"]] == ["restored", "retired"]
    status, body, _ = dash.get("/api/alerts?limit=1")
    assert [a["kind"] for a in body["data"]] == ["restored"]
    status, body, _ = dash.get("/api/alerts?limit=0")
    assert_error(status, body, 400, param="limit")


# -- collections and limits ----------------------------------------------------------------------
@covers("GET", "/api/collections")
def test_list_collections(dash, home):
    status, body, _ = dash.get("/api/collections")
    assert status == 200 and set(body) == {"data", "limits"}
    (trio,) = body["data"]
    assert trio["name"] == "trio" and trio["id"] == "bench/trio"
    assert trio["members"] == ["fast", "mid", "slow"] and trio["tags"] == ["test", "code"]
    assert trio["description"] == "Three simulated reviewers"
    assert (trio["explorers"], trio["calls"]) == (2, 5)
    assert trio["version"] == version_of(stored(home, "collections.json")["collections"]["trio"])
    limits = body["limits"]
    assert set(limits) == {"max_explorers", "max_calls", "seat_timeout", "panel_timeout",
                           "cooldown", "max_cooldown", "decider_budget", "version"}
    assert (limits["max_explorers"], limits["max_calls"]) == (2, 5)


@covers("POST", "/api/collections")
def test_create_collection(dash, home):
    n = len(changes(home))
    status, row, _ = dash.post("/api/collections", {
        "name": "pair", "members": ["fast", "mid"], "description": "Two of them",
        "tags": ["duo"], "shape": "review", "reply": "merged", "merger": "slow"})
    assert status == 200, row
    assert row["id"] == "bench/pair" and row["members"] == ["fast", "mid"]
    assert (row["shape"], row["reply"], row["merger"]) == ("review", "merged", "slow")
    assert row["version"] == version_of(stored(home, "collections.json")["collections"]["pair"])
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "collection pair"
    assert change["old"] is None and change["new"]["members"] == ["fast", "mid"]
    _, models, _ = dash.get("/v1/models")
    assert "bench/pair" in [m["id"] for m in models["data"]]


def test_create_collection_refusals(dash, home):
    n = len(changes(home))
    status, body, _ = dash.post("/api/collections", {"name": "trio", "members": ["fast"]})
    assert_error(status, body, 409, code="exists", says="trio")
    status, body, _ = dash.post("/api/collections", {"members": ["fast"]})
    assert_error(status, body, 400, param="name", says="'name'")
    status, body, _ = dash.post("/api/collections", {"name": "x", "members": ["nobody"]})
    assert_error(status, body, 400, says="nobody")
    status, body, _ = dash.post("/api/collections", {"name": "x", "members": []})
    assert_error(status, body, 400, says="member")
    status, body, _ = dash.post("/api/collections", {"name": "x", "members": ["fast"],
                                                     "reply": "some"})
    assert_error(status, body, 400, says="reply")
    status, body, _ = dash.post("/api/collections", {"name": "x", "members": ["fast"],
                                                     "owner": "me"})
    assert_error(status, body, 400, param="owner")
    assert new_changes(home, n) == []


@covers("PUT", "/api/collections/{name}")
def test_update_collection(dash, home):
    _, body, _ = dash.get("/api/collections")
    version = body["data"][0]["version"]
    n = len(changes(home))
    status, row, _ = dash.request("PUT", "/api/collections/trio", {
        "members": ["fast", "slow"], "description": "Two now", "version": version})
    assert status == 200, row
    assert row["members"] == ["fast", "slow"] and row["description"] == "Two now"
    assert row["version"] != version
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "collection trio"
    assert change["old"]["members"] == ["fast", "mid", "slow"]
    status, body, _ = dash.request("PUT", "/api/collections/trio", {
        "members": ["mid"], "version": version})
    assert_error(status, body, 409, code="stale", says="reload")
    status, body, _ = dash.request("PUT", "/api/collections/trio", {"members": ["mid"]})
    assert_error(status, body, 400, param="version")
    status, body, _ = dash.request("PUT", "/api/collections/trio", {
        "members": ["ghost"], "version": row["version"]})
    assert_error(status, body, 400, says="ghost")
    assert stored(home, "collections.json")["collections"]["trio"]["members"] == ["fast", "slow"]
    assert len(changes(home)) == n + 1


@covers("DELETE", "/api/collections/{name}")
def test_delete_collection(dash, home):
    n = len(changes(home))
    status, body, _ = dash.request("DELETE", "/api/collections/trio")
    assert (status, body) == (200, {"removed": "trio"})
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "collection trio"
    assert change["new"] is None
    status, body, _ = dash.request("DELETE", "/api/collections/trio")
    assert_error(status, body, 404, says="trio")
    # its members are free to go now
    status, _, _ = dash.request("DELETE", "/api/models/fast")
    assert status == 200


@covers("PUT", "/api/limits")
def test_update_limits(dash, home):
    _, body, _ = dash.get("/api/collections")
    version = body["limits"]["version"]
    n = len(changes(home))
    status, limits, _ = dash.request("PUT", "/api/limits", {"max_explorers": 1,
                                                            "seat_timeout": 30,
                                                            "version": version})
    assert status == 200, limits
    assert (limits["max_explorers"], limits["seat_timeout"]) == (1, 30)
    assert limits["version"] != version
    assert stored(home, "gateway.json")["max_explorers"] == 1
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "limits"
    assert change["new"]["max_explorers"] == 1
    _, body, _ = dash.get("/api/collections")
    assert body["data"][0]["explorers"] == 1 and body["limits"]["version"] == limits["version"]
    status, body, _ = dash.request("PUT", "/api/limits", {"max_explorers": 0,
                                                          "version": version})
    assert_error(status, body, 409, code="stale", says="reload")
    status, body, _ = dash.request("PUT", "/api/limits", {"max_explorers": 0})
    assert_error(status, body, 400, param="version")
    status, body, _ = dash.request("PUT", "/api/limits", {"max_calls": 0,
                                                          "version": limits["version"]})
    assert_error(status, body, 400, says="max_calls")
    status, body, _ = dash.request("PUT", "/api/limits", {"warp": 9,
                                                          "version": limits["version"]})
    assert_error(status, body, 400, says="warp")
    assert stored(home, "gateway.json")["max_explorers"] == 1
    assert len(changes(home)) == n + 1


# -- panels, calls, verdicts, evidence -----------------------------------------------------------
@covers("GET", "/api/panels")
def test_panels_pages_and_polls(dash, home):
    status, empty, _ = dash.get("/api/panels")
    assert status == 200
    assert empty == {"data": [], "next": None, "latest": None, "owed": 0, "apart": []}
    benches = [ask(dash, content=f"Review number {i}") for i in range(3)]
    ids = [b["panel"] for b in benches]
    status, page, _ = dash.get("/api/panels?limit=2")
    assert status == 200 and set(page) == {"data", "next", "latest", "owed", "apart"}
    assert [p["panel"] for p in page["data"]] == ids[:0:-1]   # newest first
    assert page["latest"] == ids[-1] and page["next"] is not None
    ok_seats = sum(s["status"] == "ok" for b in benches for s in b["seats"])
    assert page["owed"] == ok_seats
    first = page["data"][0]
    assert set(first) == PANEL_KEYS and "prompt" not in first
    assert first["collection"] == "bench/trio" and first["abandoned"] is False
    assert [s["alias"] for s in first["seats"][:3]] == ["fast", "mid", "slow"]
    for seat in first["seats"]:
        assert set(seat) == SEAT_KEYS and seat["verdict"] is None
    status, rest, _ = dash.get(f"/api/panels?limit=2&before={page['next']}")
    assert status == 200 and [p["panel"] for p in rest["data"]] == [ids[0]]
    assert rest["next"] is None
    # a verdict shows on its seat and lowers what is owed
    call = first["seats"][0]["call"]
    dash.post("/api/verdict", {"call": call, "useful": False})
    _, page, _ = dash.get("/api/panels?limit=1")
    assert page["data"][0]["seats"][0]["verdict"] is False and page["owed"] == ok_seats - 1
    # the cursor poll: nothing after the newest, then the next panel once it finished
    status, poll, _ = dash.get(f"/api/panels?after={ids[-1]}")
    assert status == 200 and poll["data"] == [] and poll["next"] is not None
    newer = ask(dash, content="one more")["panel"]
    status, poll, _ = dash.get(f"/api/panels?after={poll['next']}")
    assert status == 200 and [p["panel"] for p in poll["data"]] == [newer]
    status, poll, _ = dash.get(f"/api/panels?after={ids[0]}")   # oldest first
    assert [p["panel"] for p in poll["data"]] == ids[1:] + [newer]
    status, poll, _ = dash.get("/api/panels?after=")   # an empty cursor: from the first panel
    assert [p["panel"] for p in poll["data"]] == ids + [newer]


def test_panels_refusals(dash):
    for query, param in (("limit=0", "limit"), ("limit=201", "limit"), ("limit=x", "limit"),
                         ("before=yesterday", "before"), ("after=p1", "after")):
        status, body, _ = dash.get(f"/api/panels?{query}")
        assert_error(status, body, 400, param=param, says=f"'{param}'")


@covers("GET", "/api/panels/{panel}")
def test_panel_detail(dash, home):
    bench = ask(dash, content="Review: x = 1/0")
    call = bench["seats"][1]["call"]
    dash.post("/api/verdict", {"call": call, "useful": True, "note": "found it"})
    status, panel, _ = dash.get(f"/api/panels/{bench['panel']}")
    assert status == 200, panel
    record = next(r for r in read_jsonl(home.gateway_runs / "calls.jsonl")
                  if r["panel"] == bench["panel"])
    assert panel["prompt"] == record["prompt"] and panel["prompt"].endswith("Review: x = 1/0")
    assert [s["call"] for s in panel["seats"]] == [s["call"] for s in record["seats"]]
    verdicts = {s["call"]: s["verdict"] for s in panel["seats"]}
    assert verdicts[call]["useful"] is True and verdicts[call]["note"] == "found it"
    assert verdicts[call]["by"] == "dashboard"
    assert all(v is None for c, v in verdicts.items() if c != call)
    assert all(s["answer"] for s in panel["seats"] if s["status"] == "ok")
    status, body, _ = dash.get("/api/panels/p20200101-999")
    assert_error(status, body, 404, says="p20200101-999")


@covers("GET", "/api/calls/{call}")
def test_call_detail(dash, home):
    bench = ask(dash, content="Review: while True: pass")
    seat = bench["seats"][0]
    status, call, _ = dash.get(f"/api/calls/{seat['call']}")
    assert status == 200, call
    assert {"call", "panel", "alias", "seat", "status", "seconds", "error", "answer", "prompt",
            "verdict"} <= set(call)
    assert (call["call"], call["panel"], call["alias"], call["seat"]) == \
        (seat["call"], bench["panel"], "fast", "member")
    assert call["status"] == "ok" and not call["error"] and call["verdict"] is None
    assert call["prompt"].endswith("Review: while True: pass")
    assert call["answer"] == seat["answer"] and call["answer"]
    dash.post("/api/verdict", {"call": seat["call"], "useful": True, "real": ["a loop"]})
    _, call, _ = dash.get(f"/api/calls/{seat['call']}")
    assert set(call["verdict"]) == {"useful", "note", "real", "false", "by", "ts"}
    assert call["verdict"]["real"] == ["a loop"] and call["verdict"]["by"] == "dashboard"
    for unknown in (f"{bench['panel']}.member9", "p20200101-1.member1", "nonsense"):
        status, body, _ = dash.get(f"/api/calls/{unknown}")
        assert_error(status, body, 404, says=unknown)


@covers("GET", "/api/find")
def test_find(dash):
    bench = ask(dash)
    panel, call = bench["panel"], bench["seats"][2]["call"]
    status, body, _ = dash.get(f"/api/find?q={panel}")
    assert (status, body) == (200, {"panel": panel, "call": None})
    status, body, _ = dash.get(f"/api/find?q=%20{call}%20")
    assert (status, body) == (200, {"panel": panel, "call": call})
    status, body, _ = dash.get("/api/find?q=p20200101-4242")
    assert_error(status, body, 404, says="p20200101-4242")
    for query in ("", "?q=", "?q=hello"):
        status, body, _ = dash.get(f"/api/find{query}")
        assert_error(status, body, 400, param="q")


@covers("POST", "/api/verdict")
def test_verdict(dash, home):
    bench = ask(dash)
    call = bench["seats"][0]["call"]
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": True, "note": "good",
                                                 "real": ["off by one"], "false": []})
    assert status == 200, body
    assert body["call"] == call and body["written"] is True and body["replaced"] is False
    assert body["verdict"]["by"] == "dashboard"
    (record,) = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl")
                 if e["kind"] == "verdict"]
    assert (record["call"], record["useful"], record["by"]) == (call, True, "dashboard")
    assert record["note"] == "good" and record["real"] == ["off by one"]
    assert record["panel"] == bench["panel"] and record["alias"] == "fast"
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": False})
    assert status == 200 and body["replaced"] is True
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": "yes"})
    assert_error(status, body, 400, param="useful")
    status, body, _ = dash.post("/api/verdict", {"useful": True})
    assert_error(status, body, 400, param="call")
    status, body, _ = dash.post("/api/verdict", {"call": call, "useful": True, "stars": 5})
    assert_error(status, body, 400, param="stars")
    status, body, _ = dash.post("/api/verdict", {"call": "p20200101-1.member1",
                                                 "useful": True})
    assert_error(status, body, 404, says="p20200101-1.member1")
    verdicts = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl")
                if e["kind"] == "verdict"]
    assert [(v["useful"], v["by"]) for v in verdicts] == [(True, "dashboard"),
                                                           (False, "dashboard")]


@covers("GET", "/api/evidence")
def test_evidence(dash, home, sim):
    sim.script("x-one", fail="server_error")
    bench = ask(dash)
    for seat in bench["seats"][:2]:
        dash.post("/api/verdict", {"call": seat["call"], "useful": seat["alias"] == "fast",
                                   "false": [] if seat["alias"] == "fast" else ["a claim"]})
    status, body, _ = dash.get("/api/evidence")
    assert status == 200 and set(body) >= {"data", "buckets"}
    rows = {(r["alias"], r["shape"]): r for r in body["data"]}   # every shape together
    fast, mid = rows[("fast", "all")], rows[("mid", "all")]
    for row in (fast, mid):
        assert {"alias", "shape", "useful", "not_useful", "interval", "false_claims", "seats",
                "p50", "p95", "failures"} <= set(row)
    assert (fast["useful"], fast["not_useful"], fast["seats"]) == (1, 0, 1)
    assert (mid["useful"], mid["not_useful"], mid["false_claims"]) == (0, 1, 1)
    assert mid["interval"][0] == 0.0 and fast["interval"][1] == 1.0
    assert fast["p50"] is not None and fast["p95"] >= fast["p50"]
    assert rows[("x-one", "all")]["failures"] == {"server_error": 1}
    buckets = body["buckets"]
    assert buckets["unit"] == "day" and isinstance(buckets["start"], (int, float))
    assert sum(buckets["series"]["fast"]) == 1 and len(buckets["series"]["fast"]) == 30
    status, same, _ = dash.get("/api/evidence?shape=all")
    assert status == 200 and same["data"] == body["data"]
    status, general, _ = dash.get("/api/evidence?shape=general")   # the only shape asked
    assert status == 200 and general["data"] == [dict(r, shape="general") for r in body["data"]]
    status, none, _ = dash.get("/api/evidence?shape=review")
    assert status == 200 and none["data"] == []


@covers("GET", "/api/usage")
def test_usage(dash, home, sim):
    sim.script("x-one", fail="server_error")
    ask(dash)
    status, body, _ = dash.get("/api/usage")   # the day, when no window is named
    assert status == 200 and body["window"] == "day"
    assert set(body) == {"window", "windows", "since", "until", "data", "total"}
    rows = {r["alias"]: r for r in body["data"]}
    assert set(rows["fast"]) == {"alias", "seats", "answered", "failed", "error_rate", "p50",
                                 "p95", "prompt_tokens", "completion_tokens", "uncounted",
                                 "spend"}
    assert rows["fast"]["error_rate"] == 0.0 and rows["x-one"]["error_rate"] == 1.0
    assert rows["fast"]["spend"] is None   # the test roster has no prices
    assert body["total"]["seats"] == sum(r["seats"] for r in body["data"])
    for window in ("hour", "week"):
        status, other, _ = dash.get(f"/api/usage?window={window}")
        assert status == 200 and other["data"] == body["data"]


@covers("GET", "/api/suite")
def test_suite_results(dash, home, sim):
    from panelist.suite import results
    from panelist.suite.runner import SuiteRun
    from panelist.suite.tasks import STARTER, load_tasks
    status, body, _ = dash.get("/api/suite")
    assert (status, body["data"], body["tasks"]) == (200, [], 0)
    sim.script("fast", answer="NO FAULT")
    view = Roster(home).view()
    tasks = load_tasks(STARTER, ids=["std-bisect-left", "std-bisect-left-control"])
    SuiteRun(home, tasks, [view.models["fast"]], admission=None).run()
    status, body, _ = dash.get("/api/suite")
    assert status == 200 and body["tasks"] == 2
    (row,) = body["data"]
    assert row["model"] == "fast" and row["samples"] == 2
    assert row["accuracy"] == {"rate": 0.5, "interval": row["accuracy"]["interval"], "hits": 1,
                               "n": 2, "tasks": 2}
    assert row["pairs"]["rate"] == 0.0 and row["recall"]["rate"] == 0.0
    # the same report as one built from the whole file, and the same again while nothing changes
    from panelist.suite import report
    assert body["data"] == report.summarise(results.read(home.suite_samples))["models"]
    status, again, _ = dash.get("/api/suite")
    assert again == body


# -- keys ----------------------------------------------------------------------------------------
@covers("GET", "/api/keys")
def test_list_keys(dash):
    status, body, _ = dash.get("/api/keys")
    assert (status, body) == (200, {"data": []})
    dash.post("/api/keys", {"name": "ci", "collections": ["trio"], "rpm": 60})
    status, body, _ = dash.get("/api/keys")
    (key,) = body["data"]
    assert set(key) == {"name", "hint", "collections", "rpm", "created", "last_used"}
    assert (key["name"], key["collections"], key["rpm"], key["last_used"]) == \
        ("ci", ["trio"], 60, None)


@covers("POST", "/api/keys")
def test_create_key_shows_it_once_and_never_stores_it(dash, home):
    n = len(changes(home))
    status, body, _ = dash.post("/api/keys", {"name": "laptop"})
    assert status == 200, body
    secret = body["key"]
    assert re.fullmatch(r"pk_[A-Za-z0-9_-]{43}", secret)
    assert body["name"] == "laptop" and body["hint"] == secret[-4:]
    assert body["collections"] is None and body["rpm"] is None
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "key laptop"
    _, listed, _ = dash.get("/api/keys")
    assert secret not in json.dumps(listed) and "key" not in listed["data"][0]
    leaks = [str(p) for p in home.root.rglob("*") if p.is_file()
             if secret.encode() in p.read_bytes()]
    assert leaks == [], f"the key was written to {leaks}"
    status, body, _ = dash.post("/api/keys", {"name": "laptop"})
    assert_error(status, body, 409, code="exists", says="laptop")
    status, body, _ = dash.post("/api/keys", {"name": "Bad Name"})
    assert_error(status, body, 400, says="key name")
    status, body, _ = dash.post("/api/keys", {"name": "k2", "collections": ["nope"]})
    assert_error(status, body, 400, says="nope")
    status, body, _ = dash.post("/api/keys", {"name": "k2", "rpm": 0})
    assert_error(status, body, 400, says="rpm")
    status, body, _ = dash.post("/api/keys", {"name": "k2", "scope": "all"})
    assert_error(status, body, 400, param="scope")
    assert len(changes(home)) == n + 1


@covers("DELETE", "/api/keys/{name}")
def test_revoke_key(dash, home):
    dash.post("/api/keys", {"name": "old"})
    n = len(changes(home))
    status, body, _ = dash.request("DELETE", "/api/keys/old")
    assert (status, body) == (200, {"revoked": "old"})
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "key old" and change["new"] is None
    _, listed, _ = dash.get("/api/keys")
    assert listed["data"] == []
    status, body, _ = dash.request("DELETE", "/api/keys/old")
    assert_error(status, body, 404, says="old")
    # a revoked name is never handed out again
    status, body, _ = dash.post("/api/keys", {"name": "old"})
    assert_error(status, body, 409, code="exists", says="old")


def test_a_key_that_made_a_call_shows_when(home):
    # keys required: the dashboard needs its admin token (it refuses to start open)
    env = {"PANELIST_REQUIRE_KEYS": "1", "PANELIST_ADMIN_TOKEN": TOKEN}
    with Gateway(make_dashboard(home, env=env)) as dash:
        _, _, headers = dash.post("/api/login", {"token": TOKEN})
        login = {"Cookie": headers["Set-Cookie"].split(";")[0]}
        status, body, _ = dash.post("/v1/chat/completions", {
            "model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]})
        assert_error(status, body, 401, code="missing_key")
        _, made, _ = dash.post("/api/keys", {"name": "robot"}, headers=login)
        dash.post("/api/keys", {"name": "idle"}, headers=login)
        bench = ask(dash, headers={"Authorization": f"Bearer {made['key']}"})
        assert bench["seats"]
        status, listed, _ = dash.get("/api/keys", headers=login)
        assert status == 200
        used = {k["name"]: k["last_used"] for k in listed["data"]}
        assert used["idle"] is None and isinstance(used["robot"], float)
        calls = read_jsonl(home.gateway_runs / "calls.jsonl")
        assert [c["key"] for c in calls] == ["robot"]
        # the revoked key calls no more
        dash.request("DELETE", "/api/keys/robot", headers=login)
        status, body, _ = dash.post("/v1/chat/completions", {
            "model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {made['key']}"})
        assert_error(status, body, 401, code="unknown_key")


# -- grades -------------------------------------------------------------------------------------
@covers("GET", "/api/grades")
def test_api_grades_lists_them_for_the_overview(dash, home):
    roster = Roster(home)
    roster.add_model("big", "sim", family="big", grade="strong")
    Grades(home).pin("strong", "big")
    status, body, _ = dash.get("/api/grades")
    assert status == 200
    assert [g["grade"] for g in body["grades"]] == ["light", "general", "strong"]
    (strong,) = [g for g in body["grades"] if g["grade"] == "strong"]
    assert strong == {"grade": "strong", "rank": 3, "pinned": "big", "problem": None,
                      "models": ["big"]}
    assert body["ceiling"] == {"alias": "big", "set": False, "problem": None}


# -- races ----------------------------------------------------------------------------------------
class _Ask:
    grade = "general"

    def run(self, prompt, seat):
        return seat.chat([{"role": "user", "content": prompt}])


def _race(home) -> str:
    """One race run to its end on this data folder (fast is the reference, mid the judge)."""
    from panelist.metrics.race.benchmark import Benchmark, GradeBook
    from panelist.metrics.roster.roster import Roster
    bench = Benchmark(_Ask, home=home, admission=None,
                      grades=GradeBook.plain({"general": "fast"}, "mid", Roster(home)))
    bench.set_input("Review: def add(a, b): return a - b").set_candidates(["x-one", "x-two"])
    bench.run()
    return bench.report().race


@covers("GET", "/api/races")
def test_list_races(dash, home):
    status, empty, _ = dash.get("/api/races")
    assert status == 200 and empty["data"] == [] and empty["next"] is None
    first, second = _race(home), _race(home)
    status, listed, _ = dash.get("/api/races?limit=1")
    assert status == 200 and [r["race"] for r in listed["data"]] == [second]
    assert listed["next"] == second and listed["running"] == 0
    (row,) = listed["data"]
    assert set(row) == {"race", "status", "grade", "pinned", "ceiling", "judges", "runs",
                        "candidates", "started", "seconds", "progress", "verdict",
                        "judge_failures", "error"}
    assert row["judges"] == ["mid"]
    assert (row["status"], row["pinned"], row["ceiling"]) == ("done", "fast", "mid")
    status, rest, _ = dash.get(f"/api/races?before={second}")
    assert [r["race"] for r in rest["data"]] == [first]
    status, body, _ = dash.get("/api/races?limit=0")
    assert_error(status, body, 400, param="limit")


@covers("GET", "/api/races/{race}")
def test_get_race(dash, home):
    race = _race(home)
    status, found, _ = dash.get(f"/api/races/{race}")
    assert status == 200 and found["status"] == "done"
    saved = json.loads((home.root / "runs" / "races" / f"{race}.json").read_text())
    assert found["report"] == saved
    assert [(r["model"], r["run"]) for r in found["report"]["rows"]] == [("x-one", 1),
                                                                         ("x-two", 1)]
    status, body, _ = dash.get("/api/races/r20200101-00000000")
    assert_error(status, body, 404, says="GET /bench/races")


@covers("GET", "/api/races/{race}/judge/{name}")
def test_get_a_judge_prompt_a_race_kept(dash, home, sim):
    race = _race(home)
    status, found, _ = dash.get(f"/api/races/{race}")
    prompt = found["report"]["rows"][0]["judgements"][0]["prompts"][0]
    status, kept, _ = dash.get(f"/api/races/{race}/{prompt}")
    assert status == 200 and kept["race"] == race and kept["judge"] == "mid"
    sent = [{k: v for k, v in r["body"].items() if k != "stream"} for r in sim.requests
            if r["model"] == "mid"]
    assert kept["request"] in sent, "the question exactly as the judge received it"
    for bad in ("r20200101-00000000/judge/00001.json", f"{race}/judge/..%2Fcalls.jsonl",
                f"{race}/judge/99999.json"):
        status, body, _ = dash.get(f"/api/races/{bad}")
        assert_error(status, body, 404, says="judge")


@covers("GET", "/api/models/{alias}")
def test_a_model_page_reads_one_model(dash, home):
    """The model page's data (its parts are tested in test_model_page.py)."""
    bench = ask(dash)
    status, page, _ = dash.get("/api/models/fast")
    assert status == 200, page
    assert set(page) == {"alias", "model", "facts", "collections", "shapes", "latency",
                         "panels", "failures", "suite", "races", "alerts", "index"}
    assert set(page["model"]) == MODEL_KEYS and page["collections"] == ["trio"]
    assert bench["panel"] in [p["panel"] for p in page["panels"]] or \
        not page["index"]["complete"]
    status, body, _ = dash.get("/api/models/nobody")
    assert_error(status, body, 404, says="unknown model 'nobody'")


@covers("GET", "/api/models/{alias}/catalog")
def test_a_model_row_shows_what_the_catalog_fills_apart_from_what_is_typed(dash, home, sim):
    sim.script("x-one", window=9000, price=[0.5, 2], vision=True)
    Roster(home).add_model("x-one", "sim", family="x-one")   # nothing typed
    assert main(["catalog", "refresh", "--data", str(home.root)]) == 0
    status, body, _ = dash.get("/api/models")
    row = {r["alias"]: r for r in body["data"]}["x-one"]
    assert (row["context"], row["vision"], row["price_in"]) == (None, False, None)
    assert row["known"] == {"context": 9000, "vision": True, "price_in": 0.5,
                            "price_out": 2.0, "currency": "USD"}
    assert row["window"] == 9000
    # a typed fact is not repeated under known
    fast = {r["alias"]: r for r in body["data"]}["fast"]
    assert "context" not in fast["known"]
    # where each fact came from
    status, body, _ = dash.get("/api/models/x-one/catalog")
    assert status == 200 and body["alias"] == "x-one"
    facts = body["facts"]
    assert facts["context"]["value"] == 9000 and facts["context"]["source"] == "endpoint"
    assert facts["context"]["from"] == "GET /models" and facts["context"]["at"]
    status, body, _ = dash.get("/api/models/fast/catalog")
    assert body["facts"]["context"] == {"value": 100_000, "source": "typed", "at": None,
                                        "from": "roster"}
    status, body, _ = dash.get("/api/models/ghost/catalog")
    assert_error(status, body, 404, says="ghost")


@covers("POST", "/api/models/{alias}/probe")
def test_probe_a_model_from_the_dashboard(dash, home, sim):
    status, body, _ = dash.post("/api/models/fast/probe")
    assert status == 200, body
    assert (body["probe"]["alias"], body["probe"]["status"]) == ("fast", "ok")
    assert body["model"]["alias"] == "fast"
    lines = [r for r in read_jsonl(home.gateway_runs / "evidence.jsonl") if r["kind"] == "probe"]
    assert [(r["alias"], r["status"]) for r in lines] == [("fast", "ok")]
    # a hard failure counts as any probe's: here one retires it
    home.file("gateway.json").write_text(json.dumps({"retire_after": 1}))
    sim.script("mid", fail="auth")
    status, body, _ = dash.post("/api/models/mid/probe")
    assert status == 200, body
    assert (body["probe"]["error_kind"], body["probe"]["action"]) == ("auth", "retired")
    assert body["model"]["retired"] is True and body["model"]["status"] == "retired"
    assert [a["kind"] for a in read_jsonl(home.root / "runs" / "alerts.jsonl")] == ["retired"]
    status, body, _ = dash.post("/api/models/ghost/probe")
    assert_error(status, body, 404, says="ghost")


@covers("POST", "/api/catalog/refresh")
def test_refresh_the_catalog_from_the_dashboard(dash, home, sim):
    sim.script("x-one", window=9000)
    status, body, _ = dash.post("/api/catalog/refresh")
    assert status == 200, body
    assert body["refreshed"] == [{"endpoint": "sim", "models": 6, "with_facts": 1}]
    assert body["failed"] == [] and body["went_paid"] == []
    from panelist.metrics.roster.catalog import Catalog
    stored = Catalog(home).stored_facts("sim", "x-one")["context"]
    assert (stored["value"], stored["source"]) == (9000, "endpoint")
