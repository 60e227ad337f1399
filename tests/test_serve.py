"""The dashboard server itself: static files, the headers on every reply, the login, its
gates, the gateway's routes on its port, and a close that always returns."""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import DASHBOARD_TOKEN as TOKEN, PATIENCE, Gateway
from panelist.gateway import make_gateway
from panelist.metrics.cli.main import Runtime, main
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.server.routing import ADMIN, KEYS, OPEN, Route
from panelist.metrics.server.keys import Keys
from panelist.metrics.home import open_home
from panelist.metrics.server.dashboard import SECURITY_HEADERS
from panelist.metrics.upstream.sim import SimUpstream
from panelist.serve import make_dashboard

ROOT = Path(__file__).resolve().parent.parent
STATIC = ("/", "/index.html", "/login", "/js/app.js", "/js/api.js", "/css/app.css", "/favicon.svg")


def fetch(server, method, path, body=None, headers=None):
    """One raw HTTP exchange (the path is sent exactly as given): status, headers, body bytes."""
    server = getattr(server, "server", server)  # a conftest Gateway, or the server itself
    conn = http.client.HTTPConnection(server.host, server.port, timeout=PATIENCE)
    try:
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        conn.request(method, path, data, hdrs)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def raw_exchange(server, data: bytes) -> bytes:
    """Send bytes, read until the server closes the connection."""
    server = getattr(server, "server", server)
    with socket.create_connection((server.host, server.port), timeout=PATIENCE) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def assert_secured(headers, what):
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, f"{what}: {name} is {headers.get(name)!r}"


def assert_secured_raw(reply: bytes, what):
    head = reply.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for name, value in SECURITY_HEADERS.items():
        assert f"{name}: {value}".lower() in head, f"{what}: no {name} in\n{head}"


def error_of(data: bytes) -> dict:
    body = json.loads(data)
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


def login(server) -> str:
    status, headers, _ = fetch(server, "POST", "/api/login", {"token": TOKEN})
    assert status == 200
    return headers["Set-Cookie"].split(";")[0]


# -- static files --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", STATIC)
def test_static_files_have_an_etag_and_revalidate(dash, path):
    status, headers, data = fetch(dash, "GET", path)
    assert status == 200 and data
    etag = headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2
    assert headers["Cache-Control"] == "no-cache"
    assert int(headers["Content-Length"]) == len(data)
    status, again, data = fetch(dash, "GET", path, headers={"If-None-Match": etag})
    assert (status, data) == (304, b"") and again["ETag"] == etag
    assert_secured(again, f"304 of {path}")
    status, _, data = fetch(dash, "GET", path, headers={"If-None-Match": '"other"'})
    assert status == 200 and data


def test_static_content_types(dash):
    kinds = {path: fetch(dash, "GET", path)[1]["Content-Type"] for path in STATIC}
    assert kinds["/"] == kinds["/login"] == "text/html; charset=utf-8"
    assert kinds["/js/app.js"] == "text/javascript; charset=utf-8"
    assert kinds["/css/app.css"] == "text/css; charset=utf-8"
    assert kinds["/favicon.svg"] == "image/svg+xml"
    _, _, index = fetch(dash, "GET", "/")
    _, _, login_page = fetch(dash, "GET", "/login")
    assert b"<html" in index and b"login-form" in login_page


def test_the_login_form_cannot_be_sent_before_its_script_is_ready(dash):
    # a click or Enter before login.js attached its handler would be the browser's own submit:
    # the button starts disabled (login.js enables it), and such a submit would be a POST, never
    # a URL holding the token
    _, _, page = fetch(dash, "GET", "/login")
    html = page.decode()
    [button] = re.findall(r"<button[^>]*id=\"login-submit\"[^>]*>", html)
    assert " disabled" in button
    [form] = re.findall(r"<form[^>]*id=\"login-form\"[^>]*>", html)
    assert 'method="post"' in form


def test_every_module_the_page_preloads_is_served_and_imported_by_the_shell(dash):
    """index.html fetches the shell's modules at once (modulepreload) instead of one import
    level at a time: each one it names must exist and be one the shell imports statically."""
    _, _, index = fetch(dash, "GET", "/")
    preloads = re.findall(r'<link rel="modulepreload" href="([^"]+)">', index.decode())
    assert preloads
    imported, todo = set(), ["/js/app.js"]
    while todo:
        path = todo.pop()
        status, _, text = fetch(dash, "GET", path)
        assert status == 200, path
        for spec in re.findall(r'^import [^;]*? from "([^"]+)";', text.decode(), re.M | re.S):
            target = os.path.normpath(os.path.join(os.path.dirname(path), spec))
            if target not in imported:
                imported.add(target)
                todo.append(target)
    assert set(preloads) <= imported, set(preloads) - imported
    for path in preloads:
        assert fetch(dash, "GET", path)[0] == 200, path


@pytest.mark.parametrize(
    "path", ["/nothing", "/settings", "/js/nothing.js", "/css/", "/index.htm", "/ui/index.html"]
)
def test_an_unknown_path_is_a_json_404_not_the_app(dash, path):
    status, headers, data = fetch(dash, "GET", path)
    assert status == 404 and headers["Content-Type"] == "application/json"
    assert error_of(data)["type"] == "not_found_error"
    assert b"<html" not in data
    assert_secured(headers, f"404 of {path}")


@pytest.mark.parametrize(
    "path",
    [
        "/js/../../pyproject.toml",
        "/js/%2e%2e/%2e%2e/pyproject.toml",
        "/js/..%2f..%2fpyproject.toml",
        "/css/%2E%2E/%2E%2E/serve.py",
        "/vendor/../../README.md",
        "/js//etc/passwd",
        "/js/%2fetc%2fpasswd",
        "/js/.%2e/.%2e/pyproject.toml",
    ],
)
def test_path_traversal_is_a_404(dash, path):
    status, headers, data = fetch(dash, "GET", path)
    assert status == 404, data[:200]
    assert headers["Content-Type"] == "application/json"
    assert b"[project]" not in data and b"root:" not in data and b"import" not in data


# -- headers on every reply ----------------------------------------------------------------------
def test_every_reply_carries_the_security_headers(dash, home):
    replies = {
        "html": fetch(dash, "GET", "/"),
        "js": fetch(dash, "GET", "/js/app.js"),
        "api json": fetch(dash, "GET", "/api/info"),
        "404": fetch(dash, "GET", "/nowhere"),
        "api 404": fetch(dash, "GET", "/api/models/ghost/discover"),
        "405": fetch(dash, "DELETE", "/api/info"),
        "415": fetch(dash, "POST", "/api/models", b"x", {"Content-Type": "text/plain"}),
        "400": fetch(dash, "POST", "/api/models", b"{"),
        "403": fetch(dash, "GET", "/api/info", headers={"Origin": "https://evil.example"}),
        "gateway json": fetch(dash, "GET", "/v1/models"),
        "gateway 404": fetch(dash, "GET", "/v1/nothing"),
        "health": fetch(dash, "GET", "/health"),
        "chat": fetch(
            dash,
            "POST",
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]},
        ),
        "stream": fetch(
            dash,
            "POST",
            "/v1/chat/completions",
            {
                "model": "bench/trio",
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        ),
        "login 401": fetch(dash, "POST", "/api/login", {"token": "wrong"}),
    }
    assert replies["api json"][0] == 200 and replies["chat"][0] == 200
    assert replies["stream"][1]["Content-Type"] == "text/event-stream; charset=utf-8"
    assert replies["stream"][2].rstrip().endswith(b"data: [DONE]")
    for what, (_, headers, _) in replies.items():
        assert_secured(headers, what)
    # http.server's own refusals (a garbled request line) too
    reply = raw_exchange(dash, b"NONSENSE\r\n\r\n")
    assert reply.startswith(b"HTTP/1.0 400") or reply.startswith(b"HTTP/1.1 400"), reply
    assert_secured_raw(reply, "a garbled request line")


def test_a_cors_preflight_carries_the_security_headers(home):
    env = {"PANELIST_ALLOWED_ORIGINS": "https://app.example"}
    with Gateway(make_dashboard(home, env=env)) as gw:
        status, headers, data = fetch(
            gw.server,
            "OPTIONS",
            "/v1/chat/completions",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        )
    assert (status, data) == (204, b"")
    assert headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert_secured(headers, "a preflight")


def test_a_late_head_is_refused_with_the_security_headers(home):
    with Gateway(make_dashboard(home, env={}, head_timeout=0.2)) as gw:
        reply = raw_exchange(gw.server, b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert_secured_raw(reply, "a 408 for a late head")


# -- the login -----------------------------------------------------------------------------------
def test_wrong_tokens_are_refused_then_throttled(locked):
    # (a token that is not a string is a malformed body: a 400 that costs no guess, test_bodies)
    for token in ("wrong", "also-wrong-but-longer", "", "x" * 64, TOKEN[:-1]):
        status, headers, data = fetch(locked, "POST", "/api/login", {"token": token})
        assert status == 401 and "Set-Cookie" not in headers
        err = error_of(data)
        assert err["code"] == "wrong_token" and TOKEN not in err["message"]
    # a sixth wrong try in the minute is refused before it is checked
    status, headers, data = fetch(locked, "POST", "/api/login", {"token": "one-more-guess"})
    assert status == 429 and "Set-Cookie" not in headers
    assert int(headers["Retry-After"]) >= 1
    assert error_of(data)["code"] == "login_throttled"
    assert_secured(headers, "429")
    # while the right token still gets in from the same address: guessers never lock it out
    status, headers, _ = fetch(locked, "POST", "/api/login", {"token": TOKEN})
    assert status == 200 and "panelist_session=" in headers["Set-Cookie"]


def test_login_cookie_opens_the_api_and_logout_closes_it(locked):
    status, headers, data = fetch(locked, "GET", "/api/info")
    assert status == 401 and error_of(data)["code"] == "login_required"
    status, headers, data = fetch(locked, "POST", "/api/login", {"token": TOKEN})
    assert status == 200 and json.loads(data) == {"ok": True}
    cookie = headers["Set-Cookie"]
    name_value, *flags = [part.strip() for part in cookie.split(";")]
    name, _, sid = name_value.partition("=")
    assert name == "panelist_session" and len(sid) >= 32 and TOKEN not in cookie
    assert {"HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"} <= set(flags), cookie
    assert "Secure" not in flags  # plain http on loopback: a Secure cookie would never be sent
    status, _, data = fetch(locked, "GET", "/api/info", headers={"Cookie": name_value})
    assert status == 200 and json.loads(data)["auth"] == {"token_required": True}
    # the cookie among others, as a browser sends it
    status, _, _ = fetch(
        locked, "GET", "/api/models", headers={"Cookie": f"theme=dark; {name_value}; x=1"}
    )
    assert status == 200
    status, headers, data = fetch(locked, "POST", "/api/logout", headers={"Cookie": name_value})
    assert status == 200 and json.loads(data) == {"ok": True}
    cleared = [part.strip() for part in headers["Set-Cookie"].split(";")]
    assert cleared[0] == "panelist_session=" and "Max-Age=0" in cleared
    status, _, data = fetch(locked, "GET", "/api/info", headers={"Cookie": name_value})
    assert status == 401 and error_of(data)["code"] == "login_required"
    status, _, data = fetch(
        locked, "GET", "/api/info", headers={"Cookie": "panelist_session=made-up"}
    )
    assert status == 401


def test_the_session_cookie_is_secure_behind_an_https_public_url(home):
    env = {"PANELIST_ADMIN_TOKEN": TOKEN, "PANELIST_PUBLIC_URL": "https://dash.example"}
    with Gateway(make_dashboard(home, env=env)) as gw:
        status, headers, _ = fetch(gw.server, "POST", "/api/login", {"token": TOKEN})
    flags = [part.strip() for part in headers["Set-Cookie"].split(";")]
    assert status == 200 and "Secure" in flags, flags


# -- keys required: the dashboard needs its login --------------------------------------------------
REQUIRE = {"PANELIST_REQUIRE_KEYS": "1"}


def assert_says_why_and_what_to_set(message: str):
    assert "PANELIST_REQUIRE_KEYS" in message and "PANELIST_ADMIN_TOKEN" in message, message
    assert "open" in message and "16" in message, message


def test_with_keys_required_the_dashboard_refuses_to_start_without_an_admin_token(home):
    before = set(threading.enumerate())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for demo in (False, True):
        with pytest.raises(ConfigInvalid) as refused:
            make_dashboard(home, port=port, env=REQUIRE, demo=demo)
        assert_says_why_and_what_to_set(refused.value.message)
    assert set(threading.enumerate()) - before == set()  # no server, simulator or worker began
    with socket.socket() as s:  # nothing was bound
        s.bind(("127.0.0.1", port))
    # the gateway alone serves no dashboard: it starts, and asks every caller for a key
    with Gateway(make_gateway(home, env=REQUIRE)) as gw:
        status, _, data = fetch(gw, "GET", "/v1/models")
        assert status == 401 and error_of(data)["code"] == "missing_key"


def test_with_keys_required_and_an_admin_token_the_dashboard_asks_for_the_login(home):
    with Gateway(make_dashboard(home, env=dict(REQUIRE, PANELIST_ADMIN_TOKEN=TOKEN))) as dash:
        for path in ("/api/info", "/api/keys", "/api/panels"):
            status, _, data = fetch(dash, "GET", path)
            assert status == 401 and error_of(data)["code"] == "login_required", path
        status, _, data = fetch(dash, "POST", "/api/keys", {"name": "minted"})
        assert status == 401 and error_of(data)["code"] == "login_required"
        assert Keys(home).all() == []
        cookie = login(dash)
        status, _, data = fetch(dash, "GET", "/api/info", headers={"Cookie": cookie})
        assert status == 200 and json.loads(data)["auth"] == {"token_required": True}
        status, _, data = fetch(dash, "GET", "/v1/models")
        assert status == 401 and error_of(data)["code"] == "missing_key"


@pytest.mark.slow
def test_panelist_serve_with_keys_required_and_no_admin_token_exits_saying_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}
    env.update(REQUIRE)
    for argv in (["serve.py"], [str(Path("metrics") / "offload.py"), "serve"]):
        done = subprocess.run(
            [sys.executable, *argv, "--data", str(tmp_path / "d"), "--port", "0", "--demo"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=PATIENCE,
        )
        assert done.returncode == 1 and done.stdout == "", (argv, done.stdout, done.stderr)
        assert done.stderr.startswith("panelist: error: ") and done.stderr.count("\n") == 1, (
            done.stderr
        )
        assert_says_why_and_what_to_set(done.stderr)


def test_panelist_serve_demo_refused_in_process_leaves_no_simulator(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PANELIST_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("PANELIST_REQUIRE_KEYS", "1")
    before = set(threading.enumerate())
    code = main(
        ["serve", "--demo", "--port", "0", "--data", str(tmp_path / "d")],
        Runtime(make_gateway, make_dashboard, SimUpstream),
    )
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and err.count("\n") == 1, (out, err)
    assert_says_why_and_what_to_set(err)
    assert set(threading.enumerate()) - before == set()  # the demo's simulator was stopped


def test_a_gateway_key_never_opens_the_dashboard(locked, home):
    secret, _ = Keys(home).create("robot")
    bearer = {"Authorization": f"Bearer {secret}"}
    status, _, data = fetch(locked, "GET", "/v1/models", headers=bearer)
    assert status == 200 and json.loads(data)["data"]
    for path in ("/api/info", "/api/keys", "/api/models"):
        status, _, data = fetch(locked, "GET", path, headers=bearer)
        assert status == 401 and error_of(data)["code"] == "login_required", path
    status, _, data = fetch(locked, "POST", "/api/login", {"token": secret})
    assert status == 401 and error_of(data)["code"] == "wrong_token"
    # nor does the admin token or the session call the gateway as a key
    cookie = login(locked)
    status, _, data = fetch(locked, "GET", "/v1/models", headers={"Cookie": cookie})
    assert status == 401 and error_of(data)["code"] == "missing_key"
    status, _, data = fetch(
        locked, "GET", "/v1/models", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 401


@pytest.mark.parametrize("path", (*STATIC, "/health"))
def test_the_login_page_and_static_files_are_open_with_a_token_set(locked, path):
    status, headers, data = fetch(locked, "GET", path)
    assert status == 200 and data
    assert_secured(headers, path)


def test_the_login_page_sends_a_logged_in_browser_to_the_dashboard(locked):
    status, _, data = fetch(locked, "GET", "/login")
    assert status == 200 and b"login-form" in data
    cookie = login(locked)
    status, headers, data = fetch(locked, "GET", "/login", headers={"Cookie": cookie})
    assert status == 303 and headers["Location"] == "/" and b"login-form" not in data
    assert headers.get("Cache-Control") == "no-store"
    # a session that has ended gets the form again
    fetch(locked, "POST", "/api/logout", headers={"Cookie": cookie})
    status, _, data = fetch(locked, "GET", "/login", headers={"Cookie": cookie})
    assert status == 200 and b"login-form" in data


def test_the_session_route_says_whether_to_log_in_and_nothing_more(locked, dash):
    status, headers, data = fetch(locked, "GET", "/api/session")
    assert status == 200 and json.loads(data) == {"token_required": True, "logged_in": False}
    assert headers.get("Cache-Control") == "no-store"
    cookie = login(locked)
    status, _, data = fetch(locked, "GET", "/api/session", headers={"Cookie": cookie})
    assert json.loads(data) == {"token_required": True, "logged_in": True}
    status, _, data = fetch(dash, "GET", "/api/session")  # no token: open to local callers
    assert status == 200 and json.loads(data) == {"token_required": False, "logged_in": True}


def test_with_a_token_set_an_unknown_path_says_nothing(locked):
    for path in ("/nowhere", "/api/nowhere"):
        status, _, data = fetch(locked, "GET", path)
        assert status == 401 and error_of(data)["code"] == "login_required", path


# -- the gateway on the dashboard's port ---------------------------------------------------------
def test_v1_models_answers_as_on_the_gateway(dash, home):
    with Gateway(make_gateway(home, env={})) as gw:
        gateway_reply = fetch(gw.server, "GET", "/v1/models")
    dashboard_reply = fetch(dash, "GET", "/v1/models")
    assert gateway_reply[0] == dashboard_reply[0] == 200
    assert json.loads(gateway_reply[2]) == json.loads(dashboard_reply[2])
    assert gateway_reply[1]["Content-Type"] == dashboard_reply[1]["Content-Type"]


def test_a_panel_asked_on_the_dashboard_port_is_served_back(dash):
    status, _, data = fetch(
        dash,
        "POST",
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x"}]},
    )
    assert status == 200
    bench = json.loads(data)["bench"]
    assert f"{dash.url}/bench/verdict" in bench["verdict"]
    status, _, data = fetch(dash, "GET", f"/bench/panels/{bench['panel']}")
    assert status == 200 and json.loads(data)["panel"] == bench["panel"]


# -- building and closing ------------------------------------------------------------------------
@pytest.mark.parametrize("build", [make_gateway, make_dashboard])
def test_close_returns_on_a_server_never_served(folder, build):
    server = build(folder, env={})
    closer = threading.Thread(target=server.close, daemon=True)
    closer.start()
    closer.join(PATIENCE)
    assert not closer.is_alive(), f"{build.__name__}(...).close() hung before serve_forever"
    with socket.socket() as s:  # the port was given back
        s.bind((server.host, server.port))


@pytest.mark.slow
def test_close_of_an_unserved_demo_dashboard_stops_its_simulator(tmp_path):
    server = make_dashboard(open_home(tmp_path / "data"), env={}, demo=True)
    closer = threading.Thread(target=server.close, daemon=True)
    closer.start()
    closer.join(PATIENCE)
    assert not closer.is_alive()
    base = json.loads((tmp_path / "data" / "config" / "roster.json").read_text())
    port = int(base["endpoints"]["demo"]["base_url"].split(":")[2].split("/")[0])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE).close()


def test_a_route_needs_a_known_gate():
    for gate in (OPEN, KEYS, ADMIN):
        assert Route("/x", {}, gate=gate).gate == gate
    for gate in ("public", "", None, "Admin"):
        with pytest.raises(ValueError, match="gate"):
            Route("/x", {}, gate=gate)
    with pytest.raises(TypeError):
        Route("/x", {})  # no default: every route says who may pass


@pytest.mark.slow
def test_demo_start_serves_the_demo_collection_through_v1(tmp_path):
    home = open_home(tmp_path / "data")
    with Gateway(make_dashboard(home, env={}, demo=True)) as gw:
        status, _, data = fetch(gw.server, "GET", "/v1/models")
        assert status == 200 and "bench/demo" in [m["id"] for m in json.loads(data)["data"]]
        status, _, data = fetch(
            gw.server,
            "POST",
            "/v1/chat/completions",
            {"model": "bench/demo", "messages": [{"role": "user", "content": "Say hello"}]},
        )
        assert status == 200, data
        reply = json.loads(data)
        members = [s for s in reply["bench"]["seats"] if s["seat"] == "member"]
        assert [s["alias"] for s in members] == ["sim-swift", "sim-steady", "sim-careful"]
        assert all(s["status"] == "ok" and s["answer"] for s in members)
        status, _, data = fetch(gw.server, "GET", "/api/info")
        assert json.loads(data)["first_run"] is False
