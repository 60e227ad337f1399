"""The dashboard's JSON API, route by route, over a real dashboard server and real sockets.

Every ``(method, pattern)`` of the dashboard's ``/api/`` (``metrics.server.dashboard.api_routes``:
``api``'s and each route module's) has a success test (marked with
``@covers``; ``test_every_route_has_a_success_test`` fails for a route without one) and meets
the refusals that apply to it: 401 without the login, 403 from a foreign origin, 405 for a
method it does not take, 415 for a write that is not JSON, and the 400 / 404 / 409 of its own
input. Writes are checked where they land: ``config/changes.jsonl`` (``"by": "dashboard"``)
and, for verdicts, the evidence log.
"""

import json
import socket

import pytest

from conftest import DASHBOARD_TOKEN as TOKEN, Gateway, read_jsonl, wait_until
from panelist.metrics.server.guard import WRITES
from panelist.metrics.home import open_home
from panelist.metrics.upstream.sim import SimUpstream
from panelist.serve import make_dashboard
from apikit import (
    API_ROUTES,
    ROUTE_TABLE,
    COVERED,
    MODEL_KEYS,
    assert_error,
    ask,
    changes,
    concrete,
    covers,
    new_changes,
    stored,
    version_of,
)


# -- every route: covered, gated, screened, typed ------------------------------------------------
def test_every_route_has_a_success_test():
    import test_api_console  # noqa: F401  (their success tests mark their routes as they load)
    import test_api_judge  # noqa: F401
    import test_api_records  # noqa: F401
    import test_api_signin  # noqa: F401
    import test_judgecheck  # noqa: F401
    import test_webhooks  # noqa: F401
    import test_budgets  # noqa: F401
    import test_series  # noqa: F401
    import test_endpoint_alerts  # noqa: F401

    missing = sorted(ROUTE_TABLE - COVERED)
    assert not missing, f"/api/ routes without a success test: {missing}"


@pytest.mark.parametrize("method,pattern", sorted(ROUTE_TABLE))
def test_every_route_wants_the_login_when_a_token_is_set(locked, home, method, pattern):
    before = changes(home)
    body = {} if method in WRITES else None
    status, reply, _ = locked.request(method, concrete(pattern), body)
    assert_error(status, reply, 401, code="login_required", says="/api/login")
    assert changes(home) == before


@pytest.mark.parametrize("method,pattern", sorted(ROUTE_TABLE))
def test_every_route_refuses_a_foreign_origin(api, folder, method, pattern):
    before = changes(folder)
    body = {} if method in WRITES else None
    status, reply, _ = api.request(
        method, concrete(pattern), body, headers={"Origin": "https://evil.example"}
    )
    assert_error(status, reply, 403, says="evil.example")
    assert changes(folder) == before


@pytest.mark.parametrize("pattern,actions", API_ROUTES, ids=[p for p, _ in API_ROUTES])
def test_every_route_refuses_a_method_it_does_not_take(api, pattern, actions):
    wrong = next(m for m in ("GET", "POST", "PUT", "DELETE", "PATCH") if m not in actions)
    status, reply, headers = api.request(wrong, concrete(pattern), {} if wrong in WRITES else None)
    allowed = ", ".join(sorted(actions))
    assert_error(status, reply, 405, says=allowed)
    assert headers["Allow"] == allowed


@pytest.mark.parametrize("method,pattern", sorted(r for r in ROUTE_TABLE if r[0] in WRITES))
def test_every_write_wants_json(api, folder, method, pattern):
    before = changes(folder)
    status, reply, _ = api.request(
        method,
        concrete(pattern),
        raw=b"name=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_error(status, reply, 415, says="application/json")
    assert changes(folder) == before


def test_an_unknown_api_route_is_a_404(dash, locked):
    status, reply, _ = dash.get("/api/nothing-here")
    assert_error(status, reply, 404, says="/api/nothing-here")
    # behind the login, an unknown route says nothing of what exists
    status, reply, _ = locked.get("/api/nothing-here")
    assert_error(status, reply, 401, code="login_required")


def test_a_body_that_is_not_json_or_not_an_object_is_a_400(api, folder):
    before = changes(folder)
    status, reply, _ = api.post("/api/models", raw=b"{nope")
    assert_error(status, reply, 400, says="not valid JSON")
    status, reply, _ = api.post("/api/models", ["alias", "x"])
    assert_error(status, reply, 400, says="JSON object")
    assert changes(folder) == before


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
    assert set(info) == {"version", "python", "data_dir", "counts", "first_run", "auth", "gateway"}
    assert info["counts"] == {
        "endpoints": 1,
        "models": 6,
        "collections": 1,
        "panels": 0,
        "verdicts": 0,
        "owed": 0,
    }
    assert info["first_run"] is False and info["auth"] == {"token_required": False}
    assert info["gateway"] == {"base_url": dash.url + "/v1"}
    assert info["data_dir"] == str(home.root)
    bench = ask(dash)
    dash.post("/api/verdict", {"call": bench["seats"][0]["call"], "useful": True})
    status, info, _ = dash.get("/api/info")
    assert info["counts"]["panels"] == 1 and info["counts"]["verdicts"] == 1
    assert info["counts"]["owed"] == sum(s["status"] == "ok" for s in bench["seats"]) - 1


@pytest.mark.slow
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
        status, again, _ = dash.post("/api/demo", {})  # idempotent
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
        assert row["known"] == {}  # nothing in the catalog yet
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
def test_create_model(api, folder):
    n = len(changes(folder))
    status, row, _ = api.post(
        "/api/models",
        {
            "alias": "newbie",
            "endpoint": "sim",
            "served": "fast",
            "family": "new",
            "context": 32_000,
            "vision": True,
            "price_in": 0.5,
            "price_out": 1.5,
        },
    )
    assert status == 200, row
    assert set(row) == MODEL_KEYS
    assert (row["alias"], row["served"], row["context"], row["vision"]) == (
        "newbie",
        "fast",
        32_000,
        True,
    )
    assert row["status"] == "untested"
    assert row["version"] == version_of(stored(folder, "roster.json")["models"]["newbie"])
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "model newbie"
    assert change["old"] is None and change["new"]["served"] == "fast"
    _, body, _ = api.get("/api/models")
    assert "newbie" in [r["alias"] for r in body["data"]]


def test_create_model_refusals(api, folder):
    n = len(changes(folder))
    status, body, _ = api.post("/api/models", {"alias": "fast", "endpoint": "sim"})
    assert_error(status, body, 409, code="exists", says="fast")
    status, body, _ = api.post("/api/models", {"endpoint": "sim"})
    assert_error(status, body, 400, param="alias", says="'alias'")
    status, body, _ = api.post("/api/models", {"alias": "a"})
    assert_error(status, body, 400, param="endpoint", says="'endpoint'")
    status, body, _ = api.post("/api/models", {"alias": "a", "endpoint": "sim", "colour": 1})
    assert_error(status, body, 400, param="colour", says="colour")
    status, body, _ = api.post("/api/models", {"alias": "a", "endpoint": "sim", "context": "big"})
    assert_error(status, body, 400, says="context")
    status, body, _ = api.post("/api/models", {"alias": "a", "endpoint": "nowhere"})
    assert_error(status, body, 400, says="nowhere")
    assert changes(folder)[n:] == []


@covers("PUT", "/api/models/{alias}")
def test_update_model(api, folder):
    _, body, _ = api.get("/api/models")
    mid = next(r for r in body["data"] if r["alias"] == "mid")
    n = len(changes(folder))
    status, row, _ = api.request(
        "PUT",
        "/api/models/mid",
        {
            "endpoint": "sim",
            "family": "mid",
            "context": 50_000,
            "grade": "strong",
            "version": mid["version"],
        },
    )
    assert status == 200, row
    assert (row["context"], row["grade"], row["window"]) == (50_000, "strong", 50_000)
    assert row["version"] != mid["version"]
    assert row["version"] == version_of(stored(folder, "roster.json")["models"]["mid"])
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "model mid"
    assert change["old"]["context"] == 100_000 and change["new"]["context"] == 50_000
    # the version read before that edit is stale now
    status, body, _ = api.request(
        "PUT", "/api/models/mid", {"endpoint": "sim", "context": 1_000, "version": mid["version"]}
    )
    assert_error(status, body, 409, code="stale", says="reload")
    assert stored(folder, "roster.json")["models"]["mid"]["context"] == 50_000
    status, body, _ = api.request("PUT", "/api/models/mid", {"endpoint": "sim"})
    assert_error(status, body, 400, param="version", says="'version'")
    # a model removed meanwhile cannot be edited back into being
    status, body, _ = api.request(
        "PUT", "/api/models/ghost", {"endpoint": "sim", "version": mid["version"]}
    )
    assert_error(status, body, 409, code="stale", says="ghost")
    assert "ghost" not in stored(folder, "roster.json")["models"]
    assert len(changes(folder)) == n + 1


@covers("POST", "/api/models/{alias}/retire")
def test_retire_model(api, folder):
    n = len(changes(folder))
    status, row, _ = api.post("/api/models/x-two/retire")
    assert status == 200 and row["alias"] == "x-two"
    assert row["retired"] is True and row["status"] == "retired"
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["new"]["retired"] is True
    (alert,) = read_jsonl(folder.root / "runs" / "alerts.jsonl")
    assert (alert["kind"], alert["subject"], alert["by"]) == ("retired", "x-two", "dashboard")
    api.post("/api/models/x-two/retire")  # retired already: no second alert
    assert len(read_jsonl(folder.root / "runs" / "alerts.jsonl")) == 1
    # an edit of its facts keeps it retired
    status, row, _ = api.request(
        "PUT",
        "/api/models/x-two",
        {"endpoint": "sim", "family": "x-two", "context": 90_000, "version": row["version"]},
    )
    assert status == 200 and row["retired"] is True and row["context"] == 90_000
    status, body, _ = api.post("/api/models/ghost/retire")
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
    cooldowns = [
        e
        for e in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if e["kind"] == "cooldown" and e.get("alias") == "x-one"
    ]
    assert "dashboard" in json.dumps(cooldowns[-1]), cooldowns[-1]
    assert new_changes(home, n) == []  # it was not retired: nothing in the config changed
    status, row, _ = dash.post("/api/models/x-two/restore")
    assert status == 200 and row["retired"] is False and row["status"] == "untested"
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "model x-two"
    assert change["old"]["retired"] is True and change["new"]["retired"] is False
    kinds = [(a["kind"], a["subject"]) for a in read_jsonl(home.root / "runs" / "alerts.jsonl")]
    assert kinds == [("retired", "x-two"), ("restored", "x-two")]  # a cooldown's end is none
    status, body, _ = dash.post("/api/models/ghost/restore")
    assert_error(status, body, 404, says="ghost")


@covers("DELETE", "/api/models/{alias}")
def test_delete_model(api, folder):
    n = len(changes(folder))
    status, body, _ = api.request("DELETE", "/api/models/fast")
    assert_error(status, body, 409, code="in_use", says="trio")
    status, body, _ = api.request("DELETE", "/api/models/x-three")
    assert (status, body) == (200, {"removed": "x-three"})
    assert "x-three" not in stored(folder, "roster.json")["models"]
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "model x-three"
    assert change["new"] is None and change["old"]["endpoint"] == "sim"
    status, body, _ = api.request("DELETE", "/api/models/x-three")
    assert_error(status, body, 404, says="x-three")


# -- endpoints -----------------------------------------------------------------------------------
@covers("GET", "/api/endpoints")
def test_list_endpoints(dash, home, sim):
    status, body, _ = dash.get("/api/endpoints")
    assert status == 200
    (row,) = body["data"]
    assert set(row) == {
        "name",
        "base_url",
        "key_env",
        "key_set",
        "key_refused",
        "version",
        "models",
    }
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
    status, body, _ = dash.post(
        "/api/endpoints/test", {"base_url": f"http://127.0.0.1:{closed_port()}/v1"}
    )
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
    assert body["status"] == 401, body  # what the upstream said, not the 502 a caller would get
    assert body["error"].startswith("auth:") and "(HTTP 401: " in body["error"], body
    sim.script("mid", fail="rate_limit")
    status, body, _ = dash.post("/api/endpoints/test", {"base_url": sim.url, "model": "mid"})
    assert body["ok"] is False and body["status"] == 429, body
    with SimUpstream({"m": {}}, listing_key="sk-elsewhere") as keyed:  # a listing refused
        status, body, _ = dash.post("/api/endpoints/test", {"base_url": keyed.url})
    assert status == 200 and body["ok"] is False and body["status"] == 401, body
    status, body, _ = dash.post(
        "/api/endpoints/test", {"base_url": f"http://127.0.0.1:{closed_port()}/v1"}
    )
    assert body["ok"] is False and body["status"] is None, body  # no reply: no status


@covers("POST", "/api/endpoints")
def test_create_endpoint(dash, home, sim):
    n = len(changes(home))
    status, body, _ = dash.post("/api/endpoints", {"name": "other", "base_url": sim.url})
    assert_error(status, body, 400, param="tested", says="tested")
    status, body, _ = dash.post(
        "/api/endpoints", {"name": "other", "base_url": sim.url, "tested": "yes"}
    )
    assert_error(status, body, 400, param="tested")
    assert new_changes(home, n) == []
    status, body, _ = dash.post(
        "/api/endpoints",
        {"name": "other", "base_url": sim.url, "key_env": "OTHER_KEY", "tested": True},
    )
    assert_error(status, body, 400, param="key_env", says=("PANELIST_KEY_OTHER", "key_envs.json"))
    assert new_changes(home, n) == []
    status, row, _ = dash.post(
        "/api/endpoints",
        {"name": "other", "base_url": sim.url, "key_env": "PANELIST_KEY_ELSEWHERE", "tested": True},
    )
    assert status == 200, row
    assert row["name"] == "other" and row["key_env"] == "PANELIST_KEY_ELSEWHERE"
    assert row["models"] == []
    assert row["version"] == version_of(stored(home, "roster.json")["endpoints"]["other"])
    (change,) = new_changes(home, n)
    assert change["by"] == "dashboard" and change["what"] == "endpoint other"
    assert change["old"] is None
    status, body, _ = dash.post(
        "/api/endpoints", {"name": "other", "base_url": sim.url, "tested": True}
    )
    assert_error(status, body, 409, code="exists", says="other")
    status, body, _ = dash.post(
        "/api/endpoints", {"name": "Bad Name!", "base_url": sim.url, "tested": True}
    )
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
    assert found == {
        "fast": True,
        "mid": True,
        "slow": True,
        "x-one": True,
        "x-two": True,
        "x-three": True,
        "not-yet-added": False,
    }
    assert [r["served"] for r in body["data"]] == sorted(found)
    status, body, _ = dash.get("/api/endpoints/ghost/discover")
    assert_error(status, body, 404, says="ghost")
    dash.post(
        "/api/endpoints",
        {"name": "gone", "tested": True, "base_url": f"http://127.0.0.1:{closed_port()}/v1"},
    )
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
    assert [
        c["new"]["endpoint"] for c in new_changes(home, before) if isinstance(c.get("new"), dict)
    ] == ["sim"]
    status, body, _ = dash.get("/api/discover")
    assert body["models"] == []


def test_discover_add_refusals(dash, home, sim):
    status, body, _ = dash.post("/api/discover/add", {"endpoint": "sim", "served": "fast"})
    assert_error(status, body, 404, says="fast")
    status, body, _ = dash.post("/api/discover/add", {"endpoint": "sim"})
    assert_error(status, body, 400, param="served")
    status, body, _ = dash.post(
        "/api/discover/add", {"endpoint": "sim", "served": "x", "alias": "y"}
    )
    assert_error(status, body, 400, param="alias")
    assert "x" not in stored(home, "roster.json")["models"]


@covers("GET", "/api/onboarding")
@covers("POST", "/api/onboarding")
def test_onboarding_enqueues_and_the_servers_worker_takes_it_to_ready(dash, home, sim):
    # the whole way, refusals and kill -9 resumes are in test_onboarding.py
    status, body, _ = dash.post("/api/onboarding", {"aliases": ["fast"]})
    assert status == 202 and [e["alias"] for e in body["enqueued"]] == ["fast"], body
    # said before it starts: a probe and six quick-run prompts, with every retry at most 27
    assert body["calls"] == {"planned": 7, "at_most": 27}

    def ready():
        return dash.get("/api/onboarding")[1]["data"][0]["status"] == "ready"

    assert wait_until(ready)
    assert [
        r["step"]
        for r in read_jsonl(home.root / "runs" / "onboarding.jsonl")
        if r.get("status") == "done"
    ] == ["register", "probe", "suite", "ready"]


def test_onboarding_past_the_servers_call_cap_is_refused_before_anything_is_queued(api):
    # 200 models could make 200 x (3 + 6 x 4) = 5,400 calls, over the default cap of 5,000
    aliases = [f"m{i}" for i in range(200)]
    status, body, _ = api.post("/api/onboarding", {"aliases": aliases})
    assert status == 400, body
    error = body["error"]
    assert (error["code"], error["param"]) == ("too_many_calls", "aliases")
    assert "5,400" in error["message"] and "5,000" in error["message"]
    assert "onboard fewer models at once" in error["message"]
    assert api.get("/api/onboarding")[1]["data"] == []


@covers("GET", "/api/alerts")
def test_alerts_newest_first(api, folder):
    from panelist.metrics.alerts import Alerts

    status, body, _ = api.get("/api/alerts")
    assert (status, body) == (200, {"data": []})
    book = Alerts(folder)
    book.raise_alert("retired", "fast", "fast retired after 3 hard failures")
    book.raise_alert("restored", "fast", "fast answers again")
    book.close()
    status, body, _ = api.get("/api/alerts")
    assert status == 200, body
    assert [a["kind"] for a in body["data"]] == ["restored", "retired"]
    status, body, _ = api.get("/api/alerts?limit=1")
    assert [a["kind"] for a in body["data"]] == ["restored"]
    status, body, _ = api.get("/api/alerts?limit=0")
    assert_error(status, body, 400, param="limit")


# -- collections and limits ----------------------------------------------------------------------
@covers("GET", "/api/collections")
def test_list_collections(api, folder):
    status, body, _ = api.get("/api/collections")
    assert status == 200 and set(body) == {"data", "limits"}
    (trio,) = body["data"]
    assert trio["name"] == "trio" and trio["id"] == "bench/trio"
    assert trio["members"] == ["fast", "mid", "slow"] and trio["tags"] == ["test", "code"]
    assert trio["description"] == "Three simulated reviewers"
    assert (trio["explorers"], trio["calls"]) == (2, 5)
    assert trio["version"] == version_of(stored(folder, "collections.json")["collections"]["trio"])
    limits = body["limits"]
    assert set(limits) == {
        "max_explorers",
        "max_calls",
        "seat_timeout",
        "panel_timeout",
        "cooldown",
        "max_cooldown",
        "decider_budget",
        "stall_timeout",
        "version",
    }
    assert (limits["max_explorers"], limits["max_calls"]) == (2, 5)


@covers("POST", "/api/collections")
def test_create_collection(api, folder):
    n = len(changes(folder))
    status, row, _ = api.post(
        "/api/collections",
        {
            "name": "pair",
            "members": ["fast", "mid"],
            "description": "Two of them",
            "tags": ["duo"],
            "shape": "review",
            "reply": "merged",
            "merger": "slow",
        },
    )
    assert status == 200, row
    assert row["id"] == "bench/pair" and row["members"] == ["fast", "mid"]
    assert (row["shape"], row["reply"], row["merger"]) == ("review", "merged", "slow")
    assert row["version"] == version_of(stored(folder, "collections.json")["collections"]["pair"])
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "collection pair"
    assert change["old"] is None and change["new"]["members"] == ["fast", "mid"]
    _, models, _ = api.get("/v1/models")
    assert "bench/pair" in [m["id"] for m in models["data"]]


def test_create_collection_refusals(api, folder):
    n = len(changes(folder))
    status, body, _ = api.post("/api/collections", {"name": "trio", "members": ["fast"]})
    assert_error(status, body, 409, code="exists", says="trio")
    status, body, _ = api.post("/api/collections", {"members": ["fast"]})
    assert_error(status, body, 400, param="name", says="'name'")
    status, body, _ = api.post("/api/collections", {"name": "x", "members": ["nobody"]})
    assert_error(status, body, 400, says="nobody")
    status, body, _ = api.post("/api/collections", {"name": "x", "members": []})
    assert_error(status, body, 400, says="member")
    status, body, _ = api.post(
        "/api/collections", {"name": "x", "members": ["fast"], "reply": "some"}
    )
    assert_error(status, body, 400, says="reply")
    status, body, _ = api.post(
        "/api/collections", {"name": "x", "members": ["fast"], "owner": "me"}
    )
    assert_error(status, body, 400, param="owner")
    assert new_changes(folder, n) == []


@covers("PUT", "/api/collections/{name}")
def test_update_collection(api, folder):
    _, body, _ = api.get("/api/collections")
    version = body["data"][0]["version"]
    n = len(changes(folder))
    status, row, _ = api.request(
        "PUT",
        "/api/collections/trio",
        {"members": ["fast", "slow"], "description": "Two now", "version": version},
    )
    assert status == 200, row
    assert row["members"] == ["fast", "slow"] and row["description"] == "Two now"
    assert row["version"] != version
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "collection trio"
    assert change["old"]["members"] == ["fast", "mid", "slow"]
    status, body, _ = api.request(
        "PUT", "/api/collections/trio", {"members": ["mid"], "version": version}
    )
    assert_error(status, body, 409, code="stale", says="reload")
    status, body, _ = api.request("PUT", "/api/collections/trio", {"members": ["mid"]})
    assert_error(status, body, 400, param="version")
    status, body, _ = api.request(
        "PUT", "/api/collections/trio", {"members": ["ghost"], "version": row["version"]}
    )
    assert_error(status, body, 400, says="ghost")
    assert stored(folder, "collections.json")["collections"]["trio"]["members"] == ["fast", "slow"]
    assert len(changes(folder)) == n + 1


@covers("DELETE", "/api/collections/{name}")
def test_delete_collection(api, folder):
    n = len(changes(folder))
    status, body, _ = api.request("DELETE", "/api/collections/trio")
    assert (status, body) == (200, {"removed": "trio"})
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "collection trio"
    assert change["new"] is None
    status, body, _ = api.request("DELETE", "/api/collections/trio")
    assert_error(status, body, 404, says="trio")
    # its members are free to go now
    status, _, _ = api.request("DELETE", "/api/models/fast")
    assert status == 200


@covers("PUT", "/api/limits")
def test_update_limits(api, folder):
    _, body, _ = api.get("/api/collections")
    version = body["limits"]["version"]
    n = len(changes(folder))
    status, limits, _ = api.request(
        "PUT", "/api/limits", {"max_explorers": 1, "seat_timeout": 30, "version": version}
    )
    assert status == 200, limits
    assert (limits["max_explorers"], limits["seat_timeout"]) == (1, 30)
    assert limits["version"] != version
    assert stored(folder, "gateway.json")["max_explorers"] == 1
    (change,) = new_changes(folder, n)
    assert change["by"] == "dashboard" and change["what"] == "limits"
    assert change["new"]["max_explorers"] == 1
    _, body, _ = api.get("/api/collections")
    assert body["data"][0]["explorers"] == 1 and body["limits"]["version"] == limits["version"]
    status, body, _ = api.request("PUT", "/api/limits", {"max_explorers": 0, "version": version})
    assert_error(status, body, 409, code="stale", says="reload")
    status, body, _ = api.request("PUT", "/api/limits", {"max_explorers": 0})
    assert_error(status, body, 400, param="version")
    status, body, _ = api.request(
        "PUT", "/api/limits", {"max_calls": 0, "version": limits["version"]}
    )
    assert_error(status, body, 400, says="max_calls")
    status, body, _ = api.request("PUT", "/api/limits", {"warp": 9, "version": limits["version"]})
    assert_error(status, body, 400, says="warp")
    assert stored(folder, "gateway.json")["max_explorers"] == 1
    assert len(changes(folder)) == n + 1
