"""``GET /api/usage``: each model's error rate, answer times and spend over a recent window, over
a real dashboard server. Seats come from real panels (the simulator failing one model) or, for
answer times that would take real waiting, from seat records written through the ledger's own
write path with the seconds they took."""

import json
import time

from conftest import Gateway, read_jsonl
from panelist.metrics.ledger.histogram import RESOLUTION
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.snapshot import SNAPSHOT_VERSION
from panelist.metrics.roster.roster import Roster
from panelist.serve import make_dashboard


def write_seats(
    home, alias, seconds, *, seated=None, status="ok", tokens=None, key="local", endpoint=None
):
    """One panel per seat of ``alias``, seated at ``seated`` (default now), as a gateway logs
    them: its "seated" line, then the seat's line with the seconds it took."""
    seated = time.time() if seated is None else seated
    with Ledger(home.gateway_runs) as ledger:
        pids = ledger.new_panels(len(seconds), seated)
        ledger.record_seats(
            [
                {
                    "call": f"{pid}.member1",
                    "panel": pid,
                    "alias": alias,
                    "role": "member",
                    "shape": "general",
                    "seated": seated,
                    "status": status,
                    "seconds": s,
                    "tokens": tokens or {},
                    "error": "" if status == "ok" else "timeout: slow",
                    "key": key,
                    "collection": "bench/trio",
                    **({"endpoint": endpoint} if endpoint is not None else {}),
                }
                for pid, s in zip(pids, seconds)
            ],
            seatings=[
                {
                    "panel": pid,
                    "shape": "general",
                    "aliases": [alias],
                    "seated": seated,
                    "collection": "bench/trio",
                }
                for pid in pids
            ],
        )


def rows(dash, window="hour") -> dict:
    status, body, _ = dash.get(f"/api/usage?window={window}")
    assert status == 200, body
    return {r["alias"]: r for r in body["data"]}


def test_answer_times_a_tenth_apart_read_apart(api, folder):
    # 2.45 s and 2.75 s fall in one bucket of four a doubling (both read 2.66 s there)
    write_seats(folder, "fast", [2.45] * 20)
    write_seats(folder, "mid", [2.75] * 20)
    status, body, _ = api.get("/api/evidence")
    assert status == 200
    evidence = {r["alias"]: r for r in body["data"]}
    for figures in (evidence, rows(api)):
        fast, mid = figures["fast"], figures["mid"]
        assert fast["p50"] < mid["p50"], (fast, mid)
        assert abs(fast["p50"] - 2.45) <= RESOLUTION * 2.45 + 0.001
        assert abs(mid["p95"] - 2.75) <= RESOLUTION * 2.75 + 0.001


def test_a_snapshot_of_the_coarse_histograms_is_replayed_into_fine_ones(home):
    write_seats(home, "fast", [2.45] * 10)
    write_seats(home, "mid", [2.75] * 10)
    path = home.gateway_runs / "index.json"
    old = json.loads(path.read_text())
    assert old["v"] == SNAPSHOT_VERSION == 8 and old["stats"]["aliases"]
    old["v"] = 3  # as the last version wrote it: its buckets were twice as wide
    path.write_text(json.dumps(old))
    with Gateway(make_dashboard(home, env={})) as dash:
        assert not dash.server.parts.panels.ledger.from_snapshot  # replayed, not converted
        figures = rows(dash, "day")
        assert figures["fast"]["p50"] < figures["mid"]["p50"]
    assert json.loads(path.read_text())["v"] == SNAPSHOT_VERSION


def test_error_rate_answer_times_and_spend_per_model(dash, home, sim):
    roster = Roster(home)
    roster.add_model("fast", "sim", family="fast", context=100_000, price_in=1.0, price_out=2.0)
    roster.add_model(
        "mid", "sim", family="mid", context=100_000, price_in=3.0, price_out=4.0, currency="EUR"
    )
    sim.script("slow", fail="server_error")
    for i in range(3):
        status, body, _ = dash.post(
            "/v1/chat/completions",
            {"model": "bench/trio", "messages": [{"role": "user", "content": f"Review {i}"}]},
        )
        assert status == 200, body
    figures = rows(dash)
    fast, mid, slow = figures["fast"], figures["mid"], figures["slow"]
    assert (fast["seats"], fast["answered"], fast["failed"], fast["error_rate"]) == (3, 3, 0, 0.0)
    assert (slow["seats"], slow["answered"], slow["failed"], slow["error_rate"]) == (3, 0, 3, 1.0)
    assert fast["p50"] is not None and fast["p95"] >= fast["p50"]
    assert slow["p50"] is None and slow["p95"] is None
    seats = [r for r in read_jsonl(home.gateway_runs / "evidence.jsonl") if r["kind"] == "seat"]

    def tokens(alias, part):
        return sum(r["tokens"][part] for r in seats if r["alias"] == alias)

    assert fast["prompt_tokens"] == tokens("fast", "prompt") > 0
    assert fast["spend"] == {
        "currency": "USD",
        "amount": round(
            (tokens("fast", "prompt") * 1.0 + tokens("fast", "completion") * 2.0) / 1e6, 8
        ),
    }
    assert mid["spend"]["currency"] == "EUR" and mid["spend"]["amount"] > 0
    assert slow["spend"] is None  # no price on the roster: unknown, never zero
    status, body, _ = dash.get("/api/usage?window=hour")
    total = body["total"]
    assert set(total["spend"]) == {"USD", "EUR"}  # never summed across currencies
    assert total["spend"]["USD"] == fast["spend"]["amount"]
    assert "slow" in total["unpriced"] and "fast" not in total["unpriced"]
    assert total["failed"] == 3 and body["windows"] == ["hour", "day", "week"]
    assert body["since"] <= time.time() - 55 * 60 and body["until"] >= body["since"]


def test_a_window_holds_only_its_own_seats(api, folder):
    now = time.time()
    write_seats(folder, "fast", [1.0], seated=now - 2 * 3600)  # two hours ago
    write_seats(folder, "fast", [1.0], seated=now - 3 * 86400)  # three days ago
    write_seats(folder, "mid", [1.0, 1.0], seated=now - 60, status="error")
    assert "fast" not in rows(api, "hour") and rows(api, "hour")["mid"]["failed"] == 2
    assert rows(api, "day")["fast"]["seats"] == 1
    assert rows(api, "week")["fast"]["seats"] == 2
    assert rows(api, "week")["mid"]["error_rate"] == 1.0


def test_an_unknown_window_is_refused_with_the_ones_there_are(api):
    status, body, _ = api.get("/api/usage?window=month")
    assert status == 400 and body["error"]["param"] == "window"
    assert "hour, day, week" in body["error"]["message"]
