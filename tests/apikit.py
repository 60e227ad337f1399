"""What the dashboard API's tests share (``test_api.py``, ``test_api_records.py``): the route
table and the ``@covers`` mark of each route's success test, and the reads and checks they use.
"""

import hashlib
import json
import re

from conftest import read_jsonl
from panelist.metrics.server.dashboard import api_routes

# every /api/ route the dashboard serves: metrics.server.api's and metrics.server.console's
API_ROUTES = sorted(api_routes().items())
ROUTE_TABLE = {(method, pattern) for pattern, actions in API_ROUTES for method in actions}
COVERED: set[tuple[str, str]] = set()
MODEL_KEYS = {
    "alias",
    "endpoint",
    "served",
    "family",
    "grade",
    "context",
    "max_output",
    "vision",
    "tools",
    "price_in",
    "price_out",
    "currency",
    "retired",
    "version",
    "status",
    "cooling_until",
    "window",
    "seats",
    "useful",
    "not_useful",
    "rate",
    "interval",
    "last_answer",
    "known",
    "failing",
    "probe",
}
PANEL_KEYS = {
    "panel",
    "collection",
    "key",
    "started",
    "seconds",
    "shape",
    "reply",
    "seats",
    "merger",
    "abandoned",
}
SEAT_KEYS = {"call", "seat", "alias", "status", "seconds", "verdict"}


def covers(method: str, pattern: str):
    """Mark a test as the success test of one route of the dashboard's ``/api/``."""
    assert (method, pattern) in ROUTE_TABLE, f"{method} {pattern} is not an /api/ route"

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
    for fragment in [says] if isinstance(says, str) else says:
        assert fragment in err["message"], body


def ask(
    client, collection="bench/trio", content="Review: def add(a, b): return a - b", headers=None
):
    status, body, _ = client.post(
        "/v1/chat/completions",
        {"model": collection, "messages": [{"role": "user", "content": content}]},
        headers=headers,
    )
    assert status == 200, body
    return body["bench"]
