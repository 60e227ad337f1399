"""Panel assembly above the client, in process: no server, no upstream process. The upstream is
``FakeTransport``, so the errors seats meet are exactly the real client's."""

import pytest

from conftest import read_jsonl
from panelist.metrics.home import open_home
from panelist.metrics.panel.panel import Panels
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.client import Upstream
from transport_fake import FakeTransport, completion

ASK = [{"role": "user", "content": "Review: x = 1"}]


@pytest.fixture()
def folder(tmp_path):
    """A data folder whose three models sit on an endpoint nothing listens on."""
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("fake", "http://fake.test/v1")
    for alias in ("a", "b", "c"):
        roster.add_model(alias, "fake", family=alias, context=100_000)
    Collections(home).save(roster.view(), "trio", ["a", "b", "c"], description="three")
    return home


def panel(home, answer, mode="all"):
    """One panel through ``Panels`` over ``answer``; its reply and the call log's lines."""
    transport = FakeTransport(answer)
    panels = Panels(home, upstream=Upstream(transport=transport))
    try:
        model = "bench/trio" + ("" if mode == "all" else f":{mode}")
        req = panels.parse({"model": model, "messages": ASK})
        run = panels.start(req, panels.seat(req), key="local")
        reply = panels.complete(run, alive=lambda: True)
    finally:
        panels.close()
    return reply, read_jsonl(home.gateway_runs / "calls.jsonl"), transport


def test_a_refusing_seat_is_a_named_error_and_the_others_answer(folder):
    def answer(req):
        if req.model == "b":
            return 401, {"error": {"message": "bad key", "type": "invalid_api_key"}}
        return 200, completion(f"answer of {req.model}", req.model)

    reply, lines, transport = panel(folder, answer)
    seats = {s["alias"]: s for s in reply["bench"]["seats"]}
    assert seats["a"]["status"] == seats["c"]["status"] == "ok"
    assert seats["b"]["status"] == "error" and seats["b"]["error"].startswith("auth: ")
    assert "(HTTP 401: " in seats["b"]["error"]
    assert "answer of a" in reply["choices"][0]["message"]["content"]
    assert sorted(r.model for r in transport.requests) == ["a", "b", "c"]
    (logged,) = [r for r in lines if r.get("panel") == reply["bench"]["panel"]]
    assert {s["alias"]: s["status"] for s in logged["seats"]}["b"] == "error"


def test_pick_passes_over_a_rate_limited_member(folder):
    def answer(req):
        if req.model == "a":
            return 429, {"error": {"message": "slow down"}}, {"Retry-After": "30"}
        return 200, completion(f"answer of {req.model}", req.model)

    reply, _, _ = panel(folder, answer, mode="pick")
    assert reply["choices"][0]["message"]["content"] in ("answer of b", "answer of c")
    seats = {s["alias"]: s for s in reply["bench"]["seats"]}
    assert seats["a"]["status"] == "error" and seats["a"]["error"].startswith("rate_limit: ")
