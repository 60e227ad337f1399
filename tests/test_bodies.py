"""The body every dashboard write declares (``metrics.server.bodies``), met with the wrong JSON
types over a real dashboard server and real sockets; and the static files' paths met with bad
percent-encodings, control characters, traversal and overlong names.

The write routes are read from the built server's own route table (every ``/api/`` route that
takes POST, PUT, PATCH or DELETE, ``/api/login`` and ``/api/logout`` among them), so a route
added later is fuzzed without a line here. For each field a route declares, each probe its
declaration says is wrong (a JSON type it does not take, null where it is required, a number
outside its bounds) must be a 400 whose error names the field and says what to send, and must
leave the data folder exactly as it was; no probe at all may be a 500.
"""

import json
import math
import re
import socket

import pytest

from conftest import DASHBOARD_TOKEN as TOKEN, PATIENCE
from panelist.metrics.server import api, bodies, clientapis
from panelist.metrics.server.dashboard import UI, Dashboard, api_routes
from panelist.metrics.server.guard import WRITES, Settings

# (label, JSON text): every JSON type, a number too large for any bound (1e400 parses as
# infinity), a whole number past any bound, and a negative one
PROBES = [
    ("null", "null"),
    ("true", "true"),
    ("false", "false"),
    ("a number", "7"),
    ("a fraction", "1.5"),
    ("a string", '"x"'),
    ("an empty string", '""'),
    ("a list", '["x"]'),
    ("a list of numbers", "[1]"),
    ("an object", '{"x": 1}'),
    ("a huge number", "1e400"),
    ("a huge whole number", "1" + "0" * 30),
    ("a negative number", "-1"),
]
NOT_OBJECTS = ["[]", '["x"]', '"x"', "1", "null", "true"]


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def wrong(field: bodies.Field, value) -> bool:
    """Whether the field's declaration refuses ``value`` by its JSON type or its bounds alone."""
    kind = json_type(value)
    if kind == "null":
        return field.required
    if kind not in field.json:
        return True
    if kind == "array" and isinstance(field, bodies.Strings):
        return not all(isinstance(v, str) for v in value)
    if kind == "number":
        low, high = getattr(field, "low", None), getattr(field, "high", None)
        if isinstance(field, bodies.Whole) and not isinstance(value, int):
            return True
        return (
            not math.isfinite(value)
            or (low is not None and value < low)
            or (high is not None and value > high)
        )
    return False


def write_routes(routes) -> list[tuple[str, str, object]]:
    """``(method, pattern, action)`` of every dashboard write under ``/api/`` in a route table
    (Ollama's routes live there too, on the gateway's gate and in Ollama's error shape: their
    bodies are checked in test_wire_ollama_gemini.py)."""
    return sorted(
        (
            (m, r.pattern, a)
            for r in routes
            if r.pattern.startswith("/api/") and r not in clientapis.ROUTES
            for m, a in r.actions.items()
            if m in WRITES
        ),
        key=lambda t: t[:2],
    )


def concrete(pattern: str) -> str:
    return re.sub(r"\{\w+\}", "fast", pattern)


def folder(home) -> dict:
    """Every file of the data folder and its bytes (lock files hold nothing)."""
    return {
        str(p.relative_to(home.root)): p.read_bytes()
        for p in sorted(home.root.rglob("*"))
        if p.is_file() and p.suffix != ".lock"
    }


def send(server, method: str, path: str, raw: bytes) -> tuple[int, dict]:
    status, body, _ = server.request(method, path, raw=raw)
    return status, body


def assert_refused(status, body, *, param=None, says=()):
    assert status == 400, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], body
    if param is not None:
        assert err["param"] == param, body
    for fragment in [says] if isinstance(says, str) else says:
        assert fragment in err["message"], body


# the writes as the dashboard builds its routes, read once when the tests are collected
ROUTES = write_routes(Dashboard(Settings()).routes())


def test_the_fuzzed_routes_are_the_servers_own_writes(dash):
    served = write_routes([*dash.server.routes.exact.values(), *dash.server.routes.patterns])
    assert [(m, p) for m, p, _ in served] == [(m, p) for m, p, _ in ROUTES]
    found = {(m, p) for m, p, _ in ROUTES}
    assert ("POST", "/api/login") in found and ("POST", "/api/logout") in found
    assert {(m, p) for p, actions in api_routes().items() for m in actions if m in WRITES} <= found


@pytest.mark.parametrize("method,pattern,action", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_write_declares_one_body(method, pattern, action):
    body = bodies.declared(action)
    assert isinstance(body, bodies.Body), f"{method} {pattern} declares no body"
    for name, field in body.fields.items():
        assert field.json, f"{method} {pattern}: {name} takes no JSON type"


def test_a_write_that_declares_no_body_is_refused_when_the_server_is_built(monkeypatch):
    undeclared = ("/api/undeclared", {"POST": api.list_alerts})
    monkeypatch.setattr(api, "ROUTES", [*api.ROUTES, undeclared])
    with pytest.raises(ValueError, match="/api/undeclared"):
        Dashboard(Settings()).routes()


@pytest.mark.parametrize("method,pattern,action", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_field_of_every_write_refuses_each_wrong_json_type(
    dash, home, method, pattern, action
):
    declared = bodies.declared(action)
    path = concrete(pattern)
    for raw in NOT_OBJECTS:
        before = folder(home)
        status, reply = send(dash, method, path, raw.encode())
        assert_refused(status, reply, says="JSON object")
        assert folder(home) == before, f"{method} {path} {raw} changed the data folder"
    before = folder(home)
    status, reply = send(dash, method, path, b'{"zz_unknown": 1}')
    assert_refused(status, reply, param="zz_unknown", says="zz_unknown")
    assert folder(home) == before
    for name, field in declared.fields.items():
        for label, text in PROBES:
            raw = ('{"%s": %s}' % (name, text)).encode()
            before = folder(home)
            status, reply = send(dash, method, path, raw)
            assert status != 500, (method, path, raw, reply)
            if status >= 400:
                assert reply["error"]["message"], reply
            if wrong(field, json.loads(text)):
                assert_refused(status, reply, param=name, says=f"'{name}'")
                message = reply["error"]["message"]
                assert "must be" in message or "is required" in message, reply
                assert folder(home) == before, f"{method} {path} {raw} changed the data folder"


def test_a_refusal_says_what_to_send_without_echoing_what_came(dash, home):
    status, reply = send(dash, "POST", "/api/keys", b'{"name": "k2", "rpm": -1}')
    assert_refused(status, reply, param="rpm", says=["'rpm' must be a whole number", "1 to"])
    status, reply = send(dash, "POST", "/api/keys", b'{"name": "k2", "rpm": 1e400}')
    assert_refused(status, reply, param="rpm", says="'rpm' must be a whole number")
    status, reply = send(dash, "POST", "/api/models", b'{"endpoint": "sim"}')
    assert_refused(status, reply, param="alias", says="'alias' is required")
    status, reply = send(
        dash, "POST", "/api/collections", b'{"name": "x", "members": ["fast"], "shape": ["review"]}'
    )
    assert_refused(status, reply, param="shape", says=["'shape' must be", "got a list"])
    long_name = "n" * 5000
    status, reply = send(
        dash,
        "POST",
        "/api/endpoints",
        json.dumps({"name": long_name, "base_url": "http://x", "tested": True}).encode(),
    )
    assert_refused(status, reply, param="name", says="'name' must be")
    assert long_name not in reply["error"]["message"]
    # a token sent as the wrong type is named, its value never repeated
    status, reply = send(dash, "POST", "/api/login", b'{"token": 123456789}')
    assert_refused(status, reply, param="token", says="'token'")
    assert "123456789" not in json.dumps(reply)


def test_null_for_an_optional_field_is_the_same_as_leaving_it_out(dash, home):
    _, listed, _ = dash.get("/api/collections")
    limits = listed["limits"]
    # the dashboard's limits form sends null for a box left blank: that limit stays as stored
    status, after, _ = dash.request(
        "PUT", "/api/limits", {"version": limits["version"], "max_calls": None, "max_explorers": 1}
    )
    assert status == 200, after
    assert (after["max_calls"], after["max_explorers"]) == (limits["max_calls"], 1)
    status, key, _ = dash.post("/api/keys", {"name": "k-null", "rpm": None, "collections": None})
    assert status == 200 and key["rpm"] is None and key["collections"] is None, key


def test_a_malformed_login_is_a_400_and_costs_no_guess(locked):
    for raw in (
        b'{"token": 5}',
        b'{"token": null}',
        b'{"token": ["t"]}',
        b"{}",
        b"[]",
        b'{"token": "t", "user": "me"}',
        b'{"token": {"t": 1}}',
    ):
        status, reply = send(locked, "POST", "/api/login", raw)
        assert status == 400, (raw, reply)
    status, reply, headers = locked.post("/api/login", {"token": TOKEN})
    assert status == 200 and reply == {"ok": True}, reply


# -- static paths ----------------------------------------------------------------------------------
BAD_SEGMENTS = [
    "%00",
    "a%00b.js",
    ".%00.",
    "%2e%2e%00",
    "%2e%2e",
    "%2e%2e/%2e%2e/README.md",
    "..%2f..%2fREADME.md",
    "%2e%2e%2f%2e%2e%2fmetrics%2fserver%2fapi.py",
    "%5c..%5c..%5cREADME.md",
    "%zz",
    "%",
    "%e",
    "%ff%fe",
    "%c0%ae%c0%ae/README.md",
    "%ed%a0%80",
    "%01%7f",
    "%0d%0aX-Injected:%201",
    "%2f",
    "~",
    "%20",
    "a" * 5000,
    "a/" * 3000,
    "%2e" * 2000,
]
TARGETS = [
    prefix + seg for seg in BAD_SEGMENTS for prefix in ("/css/", "/js/", "/vendor/", "/", "/api/")
] + [
    "/favicon.svg%00",
    "/index.html%00",
    "/login%00",
    "/%00",
    "/%2e%2e/README.md",
    "/js/%2e%2e/%2e%2e/README.md",
    "/vendor/../../README.md",
]
# every GET route of the API with a path parameter, that parameter sent bad
TARGETS += [
    re.sub(r"\{\w+\}", seg, pattern, count=1)
    for pattern, actions in api_routes().items()
    if "{" in pattern and "GET" in actions
    for seg in ("%00", "%2e%2e", "%zz", "%0a")
]


def get_raw(port: int, target: str) -> tuple[int, bytes]:
    """One GET with the target exactly as written (no client normalises it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as s:
        s.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode(
                "latin-1"
            )
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_static_paths_with_bad_encodings_or_traversal_are_a_400_or_404_never_500(dash):
    outside = (UI.parent / "README.md").read_bytes()[:200]  # nothing outside ui/ is served
    for target in TARGETS:
        status, body = get_raw(dash.server.port, target)
        assert status in (400, 404), (target[:80], status, body[:200])
        assert json.loads(body)["error"]["message"], (target[:80], body[:200])
        if target.startswith(("/css/", "/js/", "/vendor/")):  # a long name is not echoed whole
            assert len(body) < 2000, (target[:80], len(body))
        assert outside not in body, target[:80]
    status, body = get_raw(dash.server.port, "/css/app.css")
    assert status == 200 and body == (UI / "css" / "app.css").read_bytes()
    assert get_raw(dash.server.port, "/api/info")[0] == 200
