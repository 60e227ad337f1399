"""The panel as a caller of the seats core: what the gateway keeps of its own when the core makes
its calls (the endpoint pause capped like the cooldown, each seat's evidence line in the
ledger's fields, the in-flight hold released before a seat is handed over)."""

import json

from conftest import read_jsonl
from panelist.metrics.seats import record as seatrecord
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.panel.panel import Panels
from panelist.metrics.roster.roster import Roster

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x"}]}
# the seat record (metrics/seats/record.py) and the panel's own fields
SEAT_FIELDS = set(seatrecord.FIELDS) | {"panel", "shape", "seated", "key", "collection"}


def test_a_long_retry_after_pauses_a_limited_endpoint_no_longer_than_max_cooldown(
    gateway, home, sim
):
    path = home.file("gateway.json")
    # a cap far longer than the test takes, however loaded the machine, and far below 7200 s
    path.write_text(json.dumps(dict(json.loads(path.read_text()), max_cooldown=600)))
    Roster(home).set_limits("endpoint", "sim", {"max_concurrent": 10})
    sim.script("mid", fail="rate_limit", retry_after=7200)
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert status == 200
    outside = Admission(home)
    try:
        paused = outside.status("endpoint", "sim")["paused"]
    finally:
        outside.close()
    assert paused is not None and 0 < paused["seconds_left"] <= 600, paused
    (cool,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "cooldown"
    ]
    assert cool["alias"] == "mid" and cool["seconds"] == 600


def test_each_seat_writes_one_evidence_line_in_the_ledgers_fields(gateway, home, sim):
    sim.script("slow", fail="server_error")
    sim.script("mid", fail="empty")
    status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert status == 200
    seats = {s["call"]: s for s in body["bench"]["seats"]}
    lines = [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "seat"]
    assert sorted(e["call"] for e in lines) == sorted(seats), "one line per seat"
    for line in lines:
        assert set(line) == SEAT_FIELDS, line
        shown = seats[line["call"]]
        assert (line["status"], line["error"], line["role"], line["alias"]) == (
            shown["status"],
            shown["error"],
            shown["seat"],
            shown["alias"],
        )
    by_alias = {s["alias"]: s for s in body["bench"]["seats"]}
    # a failure's error names its kind first; an empty answer's message says so itself
    assert by_alias["slow"]["error"].startswith("server_error: ")
    assert by_alias["mid"]["status"] == "empty" and "no text" in by_alias["mid"]["error"]
    assert not by_alias["mid"]["error"].startswith("empty:")
    (record,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    # each seat of the panel's line: the seat record without the line's own v, kind and ts
    nested = set(seatrecord.FIELDS) - {"v", "kind", "ts"} | {"seat"}
    assert all(set(s) == nested for s in record["seats"]), record["seats"]
    # a reply's seat shows no field its record lacks, but why it sat (not kept in the logs)
    assert all(set(s) - {"why"} | {"served"} <= nested for s in body["bench"]["seats"])
    assert all(s["why"] for s in body["bench"]["seats"])


def test_a_seat_handed_over_is_no_longer_in_flight(home, sim):
    panels = Panels(home)
    try:
        req = panels.parse(ASK)
        run = panels.start(req, panels.seat(req), key="local")
        seen = []
        for result in run.progress(tick=0.05):
            if result is not None:
                # the hold is released before the core hands the seat over
                seen.append((result.alias, panels.in_flight.counts().get(result.alias, 0)))
        reply = run.finish(run.results)
    finally:
        panels.close()
    assert sorted(a for a, _ in seen) == sorted(s["alias"] for s in reply["bench"]["seats"])
    assert all(busy == 0 for _, busy in seen), seen
