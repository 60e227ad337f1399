"""Seating under concurrency and across processes: a seating is taken (logged and held in flight)
when the panel is seated, not when its seats finish; a hanging model is asked once; the
rotation keeps every candidate coming back whatever the verdicts; nothing stays in flight."""

import json
import math
import socket
import threading
import time

import pytest

from conftest import read_jsonl, wait_until
from panelist.metrics.roster.collection import Collections
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.panel.panel import Panels
from panelist.metrics.roster.roster import Roster

BODY = {"messages": [{"role": "user", "content": "Review: def add(a, b): return a - b"}]}


def explorers(bench: dict) -> list[str]:
    return [s["alias"] for s in bench["seats"] if s["seat"] == "explorer"]


def seated_lines(home) -> list[dict]:
    return [e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e["kind"] == "seated"]


@pytest.fixture()
def panels(home):
    p = Panels(home)
    yield p
    p.close()


def test_concurrent_panels_get_distinct_explorers(gateway, home, sim):
    roster = Roster(home)
    pool = [f"y{i:02d}" for i in range(12)]
    for alias in pool:
        sim.script(alias, latency=0.5)  # every explorer is still answering when the others sit
        roster.add_model(alias, "sim", family=alias, context=100_000)
    for alias in ("mid", "slow", "x-one", "x-two", "x-three"):
        sim.script(alias, latency=0.5)
    Collections(home).save(roster.view(), "solo", ["fast"])
    start, replies = threading.Barrier(8), []

    def ask():
        start.wait()
        replies.append(gateway.post("/v1/chat/completions", dict(BODY, model="bench/solo")))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [status for status, _, _ in replies] == [200] * 8
    seats = [explorers(body["bench"]) for _, body, _ in replies]
    assert all(len(s) == 2 for s in seats)
    # 17 candidates, 16 explorer seats: nobody sits twice
    assert len({a for s in seats for a in s}) == 16
    # one "seated" line per panel, naming every seat it took, written before any seat answered
    evidence = read_jsonl(home.gateway_runs / "evidence.jsonl")
    by_panel = {e["panel"]: (i, e) for i, e in enumerate(evidence) if e["kind"] == "seated"}
    for _, body, _ in replies:
        bench = body["bench"]
        i, line = by_panel[bench["panel"]]
        assert line["aliases"] == [s["alias"] for s in bench["seats"]]
        assert line["shape"] == "general" and isinstance(line["seated"], float)
        first_answer = min(
            j
            for j, e in enumerate(evidence)
            if e["kind"] == "seat" and e["panel"] == bench["panel"]
        )
        assert i < first_answer
    assert gateway.server.panels.in_flight.counts() == {}


def test_a_hanging_model_sits_once_while_it_hangs(panels, home, sim):
    sim.script("x-one", fail="hang")
    req = panels.parse(dict(BODY, model="bench/trio"))
    run = panels.start(req, panels.seat(req), key="local")
    assert [s.model.alias for s in run.seating.seats if s.seat == "explorer"] == [
        "x-one",
        "x-three",
    ]  # never seated, alias order
    # the caller reads the answers as they come: every seat but the hanging one ends
    progress = run.progress(tick=0.05)
    ended = [next(r for r in progress if r is not None).alias for _ in range(4)]
    assert sorted(ended) == sorted(
        s.model.alias for s in run.seating.seats if s.model.alias != "x-one"
    )
    assert sim.count("x-one") == 1
    assert panels.in_flight.counts() == {"x-one": 1}
    # another process sees the seating at once, though no seat of it has been logged yet
    with Ledger(home.gateway_runs) as other:
        state = other.states(["x-one", "x-two"], "general")
        assert state["x-one"].last_seated == run.started and state["x-one"].waited == 0
        assert state["x-two"].last_seated is None
    later = [panels.ask(dict(BODY, model="bench/trio")) for _ in range(6)]
    for reply in later:
        assert "x-one" not in explorers(reply["bench"])
        (skip,) = [s for s in reply["bench"]["skipped"] if s["alias"] == "x-one"]
        assert "still answering" in skip["why"]
    assert sim.count("x-one") == 1
    assert panels.in_flight.counts() == {"x-one": 1}
    run.give_up([])  # the caller of the first panel leaves: its hanging seat is cancelled
    assert panels.in_flight.counts() == {}
    record = panels.ledger.panel(run.panel)
    assert (
        record["abandoned"]
        and {s["alias"]: s["status"] for s in record["seats"]}["x-one"] == "cancelled"
    )
    # no longer in flight, it has waited longest and sits again
    sim.script("x-one")
    assert "x-one" in explorers(panels.ask(dict(BODY, model="bench/trio"))["bench"])
    assert [set(line["aliases"][3:]) for line in seated_lines(home)][:3] == [
        {"x-one", "x-three"},
        {"x-two", "x-three"},
        {"x-two", "x-three"},
    ]


def test_a_seating_logged_by_another_process_is_respected(gateway, home):
    with Ledger(home.gateway_runs) as other:
        other.record_seated(other.new_panel(), "general", ["x-one", "x-three"], time.time())
    status, body, _ = gateway.post("/v1/chat/completions", dict(BODY, model="bench/trio"))
    assert status == 200 and explorers(body["bench"])[0] == "x-two"


def test_nothing_stays_in_flight_however_panels_end(gateway, home, sim):
    flight = gateway.server.panels.in_flight
    status, _, _ = gateway.post("/v1/chat/completions", dict(BODY, model="bench/trio"))
    assert status == 200 and flight.counts() == {}
    sim.script("fast", fail="server_error")
    sim.script("x-two", fail="empty")
    status, body, _ = gateway.post("/v1/chat/completions", dict(BODY, model="bench/trio"))
    assert {s["status"] for s in body["bench"]["seats"]} == {"ok", "error", "empty"}
    assert flight.counts() == {}
    # refused before anything is asked: nothing held, nothing logged as seated
    lines = len(seated_lines(home))
    everyone = list(Roster(home).view().models)
    for alias in everyone:  # a prompt no model's window holds
        Roster(home).add_model(alias, "sim", family=alias, context=100)
    status, _, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "x" * 1000}]},
    )
    assert status == 400 and flight.counts() == {} and len(seated_lines(home)) == lines
    for alias in everyone:
        Roster(home).add_model(alias, "sim", family=alias, context=100_000)
    # a caller that leaves mid-panel
    sim.script("slow", latency=30)
    body = json.dumps(dict(BODY, model="bench/trio", stream=True)).encode()
    s = socket.create_connection(("127.0.0.1", gateway.server.port), timeout=5)
    s.sendall(
        (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{gateway.server.port}"
            f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    assert wait_until(lambda: flight.counts().get("slow") == 1)
    s.close()
    assert wait_until(lambda: flight.counts() == {})


def test_rotation_survives_adversarial_verdicts(panels, home, sim):
    # one member; five candidates of five families; two explorer seats. x-three is judged
    # useful every time it sits, every other explorer not useful.
    Collections(home).save(Roster(home).view(), "solo", ["fast"])
    history = []
    for _ in range(30):
        bench = panels.ask(dict(BODY, model="bench/solo"))["bench"]
        history.append(explorers(bench))
        for seat in bench["seats"]:
            if seat["seat"] == "explorer":
                panels.ledger.record_verdict(seat["call"], useful=seat["alias"] == "x-three")
    candidates = ["mid", "slow", "x-one", "x-three", "x-two"]
    sat = {a: sum(a in h for h in history) for a in candidates}
    assert sat["x-three"] > max(sat[a] for a in candidates if a != "x-three")  # verdicts count
    assert sat["x-three"] <= 2 * (30 * 2 // 5)  # but at most twice its fair share
    bound = 2 * math.ceil(5 / 2)
    for alias in candidates:
        seated = [i for i, h in enumerate(history, 1) if alias in h]
        gaps = [b - a for a, b in zip([0] + seated, seated + [len(history) + 1])]
        assert max(gaps) <= bound, (alias, history)
    assert len(seated_lines(home)) == 30
    assert panels.in_flight.counts() == {}
