"""Judging from the dashboard: the queue of owed verdicts (``GET /api/owed``, oldest first) and
the admin's Ask (``POST /api/ask``), which runs a panel behind the dashboard's login without a
gateway key while ``/v1`` keeps asking its callers for one."""

from conftest import DASHBOARD_TOKEN as TOKEN, Gateway, read_jsonl
from panelist.serve import make_dashboard
from apikit import assert_error, ask, covers
from sse import RawStream

CHAT = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review x = 1"}]}


def login(dash) -> dict:
    status, _, headers = dash.post("/api/login", {"token": TOKEN})
    assert status == 200
    return {"Cookie": headers["Set-Cookie"].split(";")[0]}


@covers("GET", "/api/owed")
def test_owed_lists_seats_awaiting_a_verdict_oldest_first(dash, home):
    status, empty, _ = dash.get("/api/owed")
    assert status == 200 and empty == {"data": [], "owed": 0, "order": "oldest"}
    first, second = ask(dash, content="Review one"), ask(dash, content="Review two")
    answered = [s["call"] for b in (first, second) for s in b["seats"] if s["status"] == "ok"]
    status, body, _ = dash.get("/api/owed")
    assert status == 200
    listed = [r["call"] for r in body["data"]]
    # the oldest panel's seats first (within a panel, as they finished)
    assert [c.split(".")[0] for c in listed] == [c.split(".")[0] for c in answered]
    assert sorted(listed) == sorted(answered)
    assert body["owed"] == len(answered)
    row = body["data"][0]
    assert row["panel"] == first["panel"] and row["collection"] == "bench/trio"
    assert {"call", "panel", "alias", "seat", "ts"} <= set(row)
    # a verdict takes a call off the queue; the next oldest leads it
    dash.post("/api/verdict", {"call": listed[0], "useful": True})
    status, body, _ = dash.get("/api/owed?limit=1")
    assert status == 200 and [r["call"] for r in body["data"]] == listed[1:2]
    assert body["owed"] == len(answered) - 1
    status, body, _ = dash.get("/api/owed?limit=0")
    assert_error(status, body, 400, param="limit")


def test_owed_leads_with_the_oldest_owed_after_many_judged_and_drops_abandoned(api, folder):
    from ledgerkit import ok, panel

    ledger = api.server.parts.panels.ledger
    calls = []
    for _ in range(40):
        calls += panel(ledger, [ok("member1", "sim-a"), ok("member2", "sim-b")])[1]
    for call in calls[:72]:  # the oldest 90% judged, as a person would
        status, _, _ = api.post("/api/verdict", {"call": call, "useful": True})
        assert status == 200
    status, body, _ = api.get("/api/owed?limit=3")
    assert status == 200 and [r["call"] for r in body["data"]] == calls[72:75]
    assert body["owed"] == 8
    # a panel whose caller left owes nothing: its seat leaves the queue when it is marked so
    pid, left = panel(ledger, [ok("member1", "sim-a")], finish=False)
    status, body, _ = api.get("/api/owed?limit=200")
    assert [r["call"] for r in body["data"]] == calls[72:] + left
    ledger.record_panel(
        {
            "panel": pid,
            "collection": "bench/c",
            "shape": "general",
            "key": "k1",
            "started": 0.0,
            "seconds": 1.0,
            "reply": "all",
            "seats": [],
            "skipped": [],
            "abandoned": True,
        }
    )
    status, body, _ = api.get("/api/owed?limit=200")
    assert [r["call"] for r in body["data"]] == calls[72:] and body["owed"] == 8
    api.post("/api/verdict", {"call": calls[72], "useful": False})
    status, body, _ = api.get("/api/owed?limit=1")
    assert [r["call"] for r in body["data"]] == [calls[73]] and body["owed"] == 7


def test_ask_runs_a_panel_as_the_dashboard_and_logs_it_so(dash, home):
    status, body, headers = dash.post("/api/ask", CHAT)
    assert status == 200, body
    panel = body["bench"]["panel"]
    assert headers["X-Panelist-Panel"] == panel
    assert body["choices"][0]["message"]["content"]
    (line,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert line["panel"] == panel and line["key"] == "dashboard"


def test_ask_streams_as_v1_does(dash, home):
    with RawStream(dash.server, "/api/ask", dict(CHAT, stream=True)) as events:
        assert events.status == 200
        assert events.headers["content-type"].startswith("text/event-stream")
        chunks = []
        while True:
            try:
                kind, data = events.next()
            except EOFError:
                break
            if kind != "comment":
                chunks.append(data)
    assert chunks[-1] == "[DONE]"
    bench = next(c["bench"] for c in chunks if isinstance(c, dict) and c.get("bench"))
    assert [s["alias"] for s in bench["seats"]][:3] == ["fast", "mid", "slow"]


def test_ask_refuses_a_bad_body_before_any_seat_is_asked(api, folder):
    status, body, _ = api.post("/api/ask", {"messages": CHAT["messages"]})
    assert_error(status, body, 400, param="model", says="'model' is required")
    status, body, _ = api.post("/api/ask", dict(CHAT, messages="hi"))
    assert_error(status, body, 400, param="messages", says="a list")
    status, body, _ = api.post("/api/ask", dict(CHAT, temperature=2))
    assert_error(status, body, 400, param="temperature")
    status, body, _ = api.post("/api/ask", dict(CHAT, model="bench/nope"))
    assert status == 404 and "bench/trio" in body["error"]["message"]
    calls = folder.gateway_runs / "calls.jsonl"
    assert not calls.exists() or read_jsonl(calls) == []


def test_with_keys_required_the_admin_asks_without_a_key_and_v1_still_wants_one(home):
    env = {"PANELIST_REQUIRE_KEYS": "1", "PANELIST_ADMIN_TOKEN": TOKEN}
    with Gateway(make_dashboard(home, env=env)) as dash:
        status, body, _ = dash.post("/api/ask", CHAT)
        assert_error(status, body, 401, code="login_required")
        status, body, _ = dash.post("/v1/chat/completions", CHAT, headers=login(dash))
        assert_error(status, body, 401, code="missing_key")  # a session is no gateway key
        status, body, _ = dash.post("/api/ask", CHAT, headers=login(dash))
        assert status == 200, body
        calls = read_jsonl(home.gateway_runs / "calls.jsonl")
        assert [c["key"] for c in calls] == ["dashboard"]
        # a foreign page cannot ride the admin's session
        status, body, _ = dash.post(
            "/api/ask", CHAT, headers={**login(dash), "Origin": "https://evil.example"}
        )
        assert status == 403
        assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 1
