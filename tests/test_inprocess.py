"""Routes called in process (``inprocess.call``): the whole handler runs on the test's thread,
with no listener and no serving thread, over a data folder and the simulated upstream."""

import pytest

from conftest import read_jsonl
from inprocess import call
from panelist.gateway import make_gateway
from panelist.serve import make_dashboard

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x = 1"}]}


@pytest.fixture()
def built(home):
    """A gateway built over ``home`` and never served."""
    server = make_gateway(home, env={})
    try:
        yield server
    finally:
        server.close()


def test_a_panel_is_answered_and_logged_without_a_listener(built, home):
    status, headers, reply = call(built, "POST", "/v1/chat/completions", ASK)
    assert status == 200
    panel = reply["bench"]["panel"]
    assert headers["X-Panelist-Panel"] == panel
    assert [s["alias"] for s in reply["bench"]["seats"]][:3] == ["fast", "mid", "slow"]
    assert all(s["status"] == "ok" for s in reply["bench"]["seats"])
    built.panels.ledger.close()  # the panel line is on disk before the reply left
    lines = [r for r in read_jsonl(home.gateway_runs / "calls.jsonl") if r.get("panel") == panel]
    assert lines, "the panel was logged"


def test_refusals_come_from_the_same_gate_and_catch_all(built):
    status, _, reply = call(built, "POST", "/v1/chat/completions", dict(ASK, model="bench/none"))
    assert status == 404 and "bench/trio" in reply["error"]["message"]
    status, _, reply = call(built, "GET", "/v2/nothing")
    assert status == 404 and reply["error"]["type"] == "not_found_error"
    status, headers, _ = call(built, "DELETE", "/v1/models")
    assert status == 405 and headers["Allow"] == "GET"


def test_the_dashboards_api_answers_in_process(folder):
    server = make_dashboard(folder, env={})
    try:
        status, headers, reply = call(server, "GET", "/api/collections")
        assert status == 200
        assert "trio" in {c["name"] for c in reply["data"]}
        assert "default-src 'self'" in headers["Content-Security-Policy"]
    finally:
        server.close()
