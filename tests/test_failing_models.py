"""Failing models: a model whose latest seats keep failing is marked ``failing`` in
``GET /api/models`` and raises one ``failing`` alert, which its recovery answers with one
``recovered``; a failed probe shows as failed. Over a real dashboard server, the simulator
failing a model (``fail`` behaviour)."""

import json

from conftest import set_limits, wait_until


def ask_trio(dash, n: int) -> None:
    for i in range(n):
        status, body, _ = dash.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": f"Review {i}"}]},
        )
        assert status == 200, body


def model(dash, alias: str) -> dict:
    status, body, _ = dash.get("/api/models")
    assert status == 200, body
    return next(m for m in body["data"] if m["alias"] == alias)


def alerts(dash, alias: str) -> list[dict]:
    status, body, _ = dash.get("/api/alerts?limit=200")
    assert status == 200
    return [
        a
        for a in body["data"][::-1]
        if a["subject"] == alias and a["kind"] in ("failing", "recovered")
    ]


def test_repeated_seat_failures_mark_a_model_failing_alert_once_and_recovery_clears_it(dash, sim):
    sim.script("slow", fail="server_error")
    ask_trio(dash, 2)
    assert model(dash, "slow")["failing"] is None  # 2 of 2: not yet 3
    ask_trio(dash, 1)  # the third failure of at most five calls: 3 of 5, the default
    slow = model(dash, "slow")
    assert slow["status"] == "failing", slow
    assert {k: slow["failing"][k] for k in ("failed", "of", "kind", "probe")} == {
        "failed": 3,
        "of": 3,
        "kind": "server_error",
        "probe": False,
    }
    assert "3 of its last 3 calls failed" in slow["failing"]["why"]
    assert model(dash, "fast")["status"] == "answering" and model(dash, "fast")["failing"] is None
    assert wait_until(lambda: [a["kind"] for a in alerts(dash, "slow")] == ["failing"])
    said = alerts(dash, "slow")[0]
    assert said["failed"] == 3 and said["error_kind"] == "server_error"
    assert "slow is failing" in said["message"]
    # it names the page's buttons, not a command to type
    assert "Probe or Retire on its model page" in said["message"]
    assert "panelist" not in said["message"]

    ask_trio(dash, 1)  # still failing: nothing new to say, however often the watch looks
    watch = dash.server.parts.failures
    assert watch.check() == [] and [a["kind"] for a in alerts(dash, "slow")] == ["failing"]

    sim.script("slow", latency=0.0)
    ask_trio(dash, 2)  # F F F F ok ok: three of the last five still failed
    assert model(dash, "slow")["status"] == "failing"
    ask_trio(dash, 1)  # F F ok ok ok
    assert model(dash, "slow")["status"] == "answering"
    assert wait_until(lambda: [a["kind"] for a in alerts(dash, "slow")] == ["failing", "recovered"])
    assert "slow answers again" in alerts(dash, "slow")[1]["message"]


def test_the_rule_is_read_from_gateway_json_and_a_bad_one_is_refused_by_name(dash, sim, home):
    sim.script("slow", fail="server_error")
    ask_trio(dash, 1)
    assert model(dash, "slow")["status"] == "answering"
    set_limits(home, failing_after=1, failing_of=10)
    assert model(dash, "slow")["failing"]["of"] == 1
    set_limits(home, failing_after=6, failing_of=5)
    status, body, _ = dash.get("/api/models")
    assert status == 400 and "failing_after" in body["error"]["message"], body


def test_a_failed_probe_shows_as_failed_until_the_model_answers(dash, sim):
    sim.script("fast", fail="server_error")
    status, body, _ = dash.post("/api/models/fast/probe", {})
    assert status == 200, body
    assert body["probe"]["status"] == "error" and body["probe"]["error_kind"] == "server_error"
    fast = body["model"]
    assert fast["status"] == "failing" and fast["failing"]["probe"] is True
    assert fast["probe"]["status"] == "error" and fast["probe"]["error_kind"] == "server_error"
    assert "newest probe failed" in fast["failing"]["why"] and fast["probe"]["ts"]
    assert wait_until(lambda: [a["kind"] for a in alerts(dash, "fast")] == ["failing"])

    sim.script("fast", latency=0.0)
    status, body, _ = dash.post("/api/models/fast/probe", {})
    assert status == 200 and body["probe"]["status"] == "ok"
    fast = body["model"]
    assert fast["status"] != "failing" and fast["failing"] is None
    assert fast["probe"]["status"] == "ok" and fast["probe"]["error"] == ""
    assert wait_until(lambda: [a["kind"] for a in alerts(dash, "fast")] == ["failing", "recovered"])


def test_seats_cut_short_are_no_failures_of_the_model(api, folder):
    from panelist.metrics.ledger.ledger import Ledger

    with Ledger(folder.gateway_runs) as ledger:
        for i in range(5):
            pid = ledger.new_panel()
            ledger.record_seat(
                {
                    "call": f"{pid}.member1",
                    "panel": pid,
                    "alias": "mid",
                    "shape": "general",
                    "status": "cancelled",
                    "error": "cancelled: the caller left",
                    "seconds": 0.1,
                }
            )
            ledger.record_seat(
                {
                    "call": f"{pid}.member2",
                    "panel": pid,
                    "alias": "mid",
                    "shape": "general",
                    "status": "error",
                    "error": "at_limit: no slot within 1 s",
                    "seconds": 1.0,
                }
            )
    mid = model(api, "mid")
    assert mid["status"] != "failing" and mid["failing"] is None, json.dumps(mid)


def test_a_model_that_answered_its_probe_is_answering_not_untested(dash):
    fresh = model(dash, "fast")
    assert fresh["seats"] == 0 and fresh["status"] == "untested", fresh
    status, body, _ = dash.post("/api/models/fast/probe", {})
    assert status == 200 and body["probe"]["status"] == "ok", body
    assert body["model"]["status"] == "answering", body["model"]
    assert model(dash, "fast")["status"] == "answering"
