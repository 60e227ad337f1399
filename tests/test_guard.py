"""Who may call: bind, host, origin, CORS and body checks, and every route × every refusal."""

import http.client
import json

import pytest

from conftest import PATIENCE, Gateway
from panelist.gateway import make_gateway
from panelist.metrics.offload import main
from panelist.metrics.roster.collection import Collections
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.server.guard import Settings
from panelist.metrics.server.keys import Keys
from panelist.metrics.roster.roster import Roster

TOKEN = "t0ken-for-tests-0123456789"
APP = "https://app.example"


@pytest.fixture()
def start(home):
    """Build and run gateways on ``home`` with the given environment; closes them after."""
    running = []

    def go(env=None, **kw):
        gw = Gateway(make_gateway(home, env=env or {}, **kw))
        running.append(gw)
        return gw

    try:
        yield go
    finally:
        for gw in running:
            gw.close()


def ask(gw, model="bench/trio", headers=None):
    return gw.post(
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "hi"}]},
        headers=headers,
    )


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


# -- settings and bind ----------------------------------------------------------------------------
def test_settings_come_from_the_environment():
    s = Settings.from_env(
        {
            "PANELIST_ADMIN_TOKEN": TOKEN,
            "PANELIST_PUBLIC_URL": "https://Panel.Example/gw",
            "PANELIST_ALLOWED_HOSTS": "a.lan, b.lan:81",
            "PANELIST_ALLOWED_ORIGINS": "https://app.example:443/,http://x:3000",
        }
    )
    assert s.keys_required and not s.require_keys
    assert s.allowed_origins == ("https://app.example", "http://x:3000", "https://panel.example")
    assert TOKEN not in repr(s)
    exact, names = s.hosts(8123, "0.0.0.0")
    assert {
        "127.0.0.1:8123",
        "localhost:8123",
        "[::1]:8123",
        "panel.example",
        "panel.example:443",
        "b.lan:81",
    } <= exact and names == {"a.lan"}
    assert "0.0.0.0:8123" not in exact
    assert Settings.from_env({"PANELIST_REQUIRE_KEYS": "1"}).keys_required
    assert not Settings.from_env({}).keys_required


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"PANELIST_ADMIN_TOKEN": "short"}, "shorter than 16"),
        ({"PANELIST_REQUIRE_KEYS": "maybe"}, "PANELIST_REQUIRE_KEYS"),
        ({"PANELIST_ALLOWED_ORIGINS": "*"}, "'*' is never allowed"),
        ({"PANELIST_ALLOWED_ORIGINS": "app.example"}, "not an origin"),
        ({"PANELIST_ALLOWED_HOSTS": "*"}, "'*' is never allowed"),
        ({"PANELIST_PUBLIC_URL": "panel.example"}, "PANELIST_PUBLIC_URL"),
    ],
)
def test_bad_settings_stop_the_server_at_start(folder, env, fragment):
    with pytest.raises(ConfigInvalid, match=fragment):
        make_gateway(folder, env=env)


def test_only_loopback_without_an_admin_token(folder):
    with pytest.raises(ConfigInvalid, match="PANELIST_ADMIN_TOKEN") as refused:
        make_gateway(folder, "0.0.0.0", env={})
    assert "refusing to listen on '0.0.0.0'" in str(refused.value)
    with pytest.raises(ConfigInvalid, match="shorter than 16"):  # too short even on loopback
        make_gateway(folder, env={"PANELIST_ADMIN_TOKEN": "x" * 15})
    server = make_gateway(folder, "0.0.0.0", env={"PANELIST_ADMIN_TOKEN": TOKEN})
    try:
        assert server.guard.settings.keys_required
    finally:  # built, never served: nothing to shut down
        server.server_close()
        server.panels.close()
        server.guard.close()


def test_the_gateway_command_says_why_it_will_not_start(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PANELIST_ADMIN_TOKEN", raising=False)
    assert main(["gateway", "--host", "0.0.0.0", "--port", "0", "--data", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "refusing to listen on '0.0.0.0'" in err and "PANELIST_ADMIN_TOKEN" in err


# -- host -----------------------------------------------------------------------------------------
def test_host_check_answers_only_names_it_serves(start):
    gw = start(
        {"PANELIST_ALLOWED_HOSTS": "gw.internal", "PANELIST_PUBLIC_URL": "https://panel.example"}
    )
    port = gw.server.port
    for host in (
        f"localhost:{port}",
        f"127.0.0.1:{port}",
        f"[::1]:{port}",
        "gw.internal:9999",
        "panel.example",
        "PANEL.example:443",
    ):
        assert gw.get("/v1/models", headers={"Host": host})[0] == 200, host
    for host in (
        "evil.example",
        f"evil.example:{port}",
        "127.0.0.1",
        f"localhost:{port + 1}",
        "panel.example:8443",
        "",
    ):
        status, body, _ = gw.get("/v1/models", headers={"Host": host})
        assert status == 403 and "PANELIST_ALLOWED_HOSTS" in body["error"]["message"], host
        assert body["error"]["type"] == "permission_error"
    # a liveness probe may use any address: /health reveals nothing
    assert gw.get("/health", headers={"Host": "10.1.2.3:8123"})[0] == 200


# -- origin and fetch metadata --------------------------------------------------------------------
def test_foreign_origins_and_cross_site_requests_are_refused(start):
    gw = start({"PANELIST_ALLOWED_ORIGINS": APP})
    own = f"http://127.0.0.1:{gw.server.port}"
    assert ask(gw, headers={"Origin": own})[0] == 200
    for origin in ("https://evil.example", "null", f"http://localhost:{gw.server.port + 1}"):
        status, body, headers = ask(gw, headers={"Origin": origin})
        assert status == 403 and "PANELIST_ALLOWED_ORIGINS" in body["error"]["message"]
        assert headers["Access-Control-Allow-Origin"] is None
    status, body, _ = ask(gw, headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 403 and "cross-site" in body["error"]["message"]
    assert ask(gw, headers={"Sec-Fetch-Site": "cross-site", "Origin": APP})[0] == 200
    assert ask(gw, headers={"Sec-Fetch-Site": "same-origin", "Origin": own})[0] == 200
    # a followed link may arrive cross-site; a cross-site fetch of the same page may not
    nav = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    assert gw.get("/v1/models", headers=nav)[0] == 200
    assert gw.get("/v1/models", headers=dict(nav, **{"Sec-Fetch-Mode": "cors"}))[0] == 403


# -- CORS -----------------------------------------------------------------------------------------
def preflight(gw, path, origin=APP, asked="authorization, content-type, x-stainless-os"):
    conn = http.client.HTTPConnection("127.0.0.1", gw.server.port, timeout=PATIENCE)
    try:
        conn.request(
            "OPTIONS",
            path,
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        )
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.headers
    finally:
        conn.close()


def test_cors_preflight_and_replies_for_allowed_origins_only(start):
    gw = start({"PANELIST_ALLOWED_ORIGINS": APP, "PANELIST_REQUIRE_KEYS": "1"})
    status, body, h = preflight(gw, "/v1/chat/completions")
    assert status == 204 and body == b""
    assert h["Access-Control-Allow-Origin"] == APP
    assert h["Access-Control-Allow-Headers"] == "authorization, content-type, x-stainless-os"
    assert "POST" in h["Access-Control-Allow-Methods"] and "Origin" in h["Vary"]
    assert h["Access-Control-Allow-Credentials"] is None
    # the real request: a refusal still carries the echo, so the page can read why
    status, reply, h = ask(gw, headers={"Origin": APP})
    assert status == 401 and h["Access-Control-Allow-Origin"] == APP and h["Vary"] == "Origin"
    assert h["Access-Control-Allow-Credentials"] is None
    secret, _ = Keys(gw.server.panels.home).create("web")
    status, reply, h = ask(gw, headers=dict(bearer(secret), Origin=APP))
    assert status == 200 and h["Access-Control-Allow-Origin"] == APP
    # never for another origin, never '*', never off the gateway's routes
    assert preflight(gw, "/v1/models", origin="https://evil.example")[0] == 403
    status, _, h = preflight(gw, "/health")
    assert status == 405 and h["Access-Control-Allow-Origin"] is None
    status, _, h = gw.get("/health", headers={"Origin": APP})
    assert status == 200 and h["Access-Control-Allow-Origin"] is None
    status, _, _ = preflight(gw, "/v1/models", asked="x-fine, bad header")
    assert status == 400
    status, _, _ = preflight(gw, "/v1/models", asked="x-(bad)")
    assert status == 400


def test_no_cors_headers_without_allowed_origins(gateway):
    status, _, h = ask(gateway)
    assert status == 200 and h["Access-Control-Allow-Origin"] is None and h["Vary"] is None
    status, _, h = preflight(gateway, "/v1/chat/completions")
    assert status == 403 and h["Access-Control-Allow-Origin"] is None


# -- bodies ---------------------------------------------------------------------------------------
def test_writes_must_be_json_within_the_cap(gateway):
    body = json.dumps({"model": "bench/trio", "messages": [{"role": "user", "content": "x"}]})
    for ctype in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "application/jsonx",
    ):
        status, reply, _ = gateway.post(
            "/v1/chat/completions", raw=body.encode(), headers={"Content-Type": ctype}
        )
        assert status == 415 and "application/json" in reply["error"]["message"], ctype
    status, _, _ = gateway.post(
        "/v1/chat/completions",
        raw=body.encode(),
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert status == 200
    conn = http.client.HTTPConnection("127.0.0.1", gateway.server.port, timeout=PATIENCE)
    try:
        conn.putrequest("POST", "/bench/verdict")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(21 * 2**20))
        conn.endheaders()  # the body never comes: the size alone is refused
        resp = conn.getresponse()
        assert resp.status == 413 and "20 MB" in json.loads(resp.read())["error"]["message"]
        assert resp.headers["Connection"] == "close"
    finally:
        conn.close()


# -- every route × every refusal ------------------------------------------------------------------
@pytest.fixture()
def keyed(start, home):
    """A gateway requiring keys, a 'wide' key (every collection) with one panel, and a 'narrow'
    key limited to another collection."""
    Collections(home).save(Roster(home).view(), "solo", ["x-one"], description="One model")
    keys = Keys(home)
    wide, _ = keys.create("wide")
    narrow, _ = keys.create("narrow", collections=["solo"])
    gw = start({"PANELIST_REQUIRE_KEYS": "1", "PANELIST_ALLOWED_ORIGINS": APP})
    status, reply, _ = ask(gw, headers=bearer(wide))
    assert status == 200
    return gw, wide, narrow, reply["bench"]


ROUTES = ["models", "chat", "verdict", "panel", "pending", "health"]


def call_route(gw, route, bench, headers):
    headers = dict(headers)
    if route == "models":
        return gw.get("/v1/models", headers=headers)
    if route == "chat":
        return ask(gw, headers=headers)
    if route == "verdict":
        return gw.post(
            "/bench/verdict", {"call": bench["seats"][0]["call"], "useful": True}, headers=headers
        )
    if route == "panel":
        return gw.get(f"/bench/panels/{bench['panel']}", headers=headers)
    if route == "pending":
        return gw.get("/bench/pending", headers=headers)
    return gw.get("/health", headers=headers)


EXPECTED = {  # route: (no key, bad key, scoped key, foreign origin, foreign host)
    "models": (401, 401, 200, 403, 403),
    "chat": (401, 401, 403, 403, 403),
    "verdict": (401, 401, 403, 403, 403),
    "panel": (401, 401, 403, 403, 403),
    "pending": (401, 401, 200, 403, 403),
    "health": (200, 200, 200, 200, 200),
}


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_refuses_what_it_must(keyed, route):
    gw, wide, narrow, bench = keyed
    cases = [
        {},
        bearer("pk_" + "A" * 43),
        bearer(narrow),
        dict(bearer(wide), Origin="https://x.example"),
        dict(bearer(wide), Host="attacker.example"),
    ]
    seen = tuple(call_route(gw, route, bench, h)[0] for h in cases)
    assert seen == EXPECTED[route]
    assert call_route(gw, route, bench, bearer(wide))[0] == 200  # the owner gets in
    if route == "models":  # the scoped key sees only its own collection
        _, body, _ = call_route(gw, route, bench, bearer(narrow))
        assert {m["id"].partition(":")[0] for m in body["data"]} == {"bench/solo"}
    if route == "pending":  # and none of another key's calls
        _, body, _ = call_route(gw, route, bench, bearer(narrow))
        assert body["data"] == []
        _, body, _ = call_route(gw, route, bench, bearer(wide))
        assert body["data"] and {d["call"].split(".")[0] for d in body["data"]} == {bench["panel"]}
