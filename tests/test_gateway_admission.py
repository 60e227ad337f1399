"""The gateway under admission: a member waits for its endpoint's slot within its seat deadline
(and fails with kind at_limit when none comes), an explorer is drawn only from an endpoint with
room now, and a 429 with Retry-After pauses a limited endpoint for every process."""

import json
import threading

import pytest

from conftest import PATIENCE, move_to, read_jsonl, set_limits, wait_until
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster

ASK = {"model": "bench/pair", "messages": [{"role": "user", "content": "Review: x"}]}


@pytest.fixture()
def pair(home, gated):
    """Collection ``pair``: members fast and mid, both on the gated endpoint, which takes one
    call at once. The explorers answer from the simulator."""
    move_to(home, gated, "fast", "mid")
    Roster(home).set_limits("endpoint", "gated", {"max_concurrent": 1})
    view = Roster(home).view()
    Collections(home).save(view, "pair", ["fast", "mid"], description="Two on one endpoint")
    return home


@pytest.fixture()
def outside(home):
    """Admission as another process on the same data folder would use it."""
    admission = Admission(home)
    yield admission
    admission.close()


def in_thread(fn, *args):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("result", fn(*args)))
    t.start()
    return t, box


def seats_by_alias(body):
    return {s["alias"]: s for s in body["bench"]["seats"]}


def test_a_member_waits_for_a_slot_and_answers_when_one_frees(gateway, pair, gated, outside):
    inside = gateway.server.panels.admission
    with outside.slot("gated", "fast", wait=0):  # the endpoint's one slot is taken elsewhere
        t, box = in_thread(gateway.post, "/v1/chat/completions", ASK)
        assert wait_until(lambda: inside.waiting("gated") == 2), "the members never queued"
        assert gated.arrived == []
    # the slot is free: one member goes, the other keeps waiting while the first is out
    assert wait_until(lambda: len(gated.arrived) == 1)
    first = gated.arrived[0]
    assert inside.waiting("gated") == 1 and gated.arrived == [first]
    gated.open(first)
    second = ({"fast", "mid"} - {first}).pop()
    assert gated.wait_arrived(second)
    assert gated.arrived == [first, second]
    gated.open(second)
    t.join(PATIENCE)
    status, body, _ = box["result"]
    assert status == 200
    seats = seats_by_alias(body)
    assert seats["fast"]["status"] == "ok" and seats["mid"]["status"] == "ok"
    (record,) = read_jsonl(pair.gateway_runs / "calls.jsonl")
    assert {s["alias"]: s["status"] for s in record["seats"]}["mid"] == "ok"


def test_a_member_with_no_slot_in_its_deadline_fails_at_limit(gateway, pair, gated, outside):
    path = pair.file("gateway.json")
    path.write_text(json.dumps(dict(json.loads(path.read_text()), seat_timeout=1)))
    with outside.slot("gated", "fast", wait=0):
        status, body, _ = gateway.post("/v1/chat/completions", ASK)
    assert status == 200 and gated.arrived == []
    seats = seats_by_alias(body)
    for alias in ("fast", "mid"):
        assert seats[alias]["status"] == "error"
        assert seats[alias]["error"].startswith("at_limit: endpoint 'gated' is at its limit")
    explorers = [s for s in body["bench"]["seats"] if s["seat"] == "explorer"]
    assert explorers and all(s["status"] == "ok" for s in explorers)
    logged = {
        e["alias"]: e
        for e in read_jsonl(pair.gateway_runs / "evidence.jsonl")
        if e.get("kind") == "seat"
    }
    assert logged["mid"]["error"].startswith("at_limit:")


def test_an_explorer_is_drawn_only_from_an_endpoint_with_room(gateway, home, sim, outside):
    roster = Roster(home)
    roster.add_endpoint("tight", sim.url)
    roster.add_model("x-one", "tight", family="x-one", context=100_000)
    roster.set_limits("endpoint", "tight", {"max_concurrent": 1})
    ask = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x"}]}
    with outside.slot("tight", "x-one", wait=0):
        status, body, _ = gateway.post("/v1/chat/completions", ask)
    assert status == 200
    assert "x-one" not in seats_by_alias(body)
    (skip,) = [s for s in body["bench"]["skipped"] if s["alias"] == "x-one"]
    assert skip["seat"] == "explorer" and skip["why"].startswith("endpoint at its limit")
    (record,) = read_jsonl(home.gateway_runs / "calls.jsonl")
    assert any(
        s["alias"] == "x-one" and s["why"].startswith("endpoint at its limit")
        for s in record["skipped"]
    )
    # with room again, the model never seated for the shape is the first explorer drawn
    status, body, _ = gateway.post("/v1/chat/completions", ask)
    assert seats_by_alias(body)["x-one"]["status"] == "ok"


def test_a_nominee_on_an_endpoint_at_its_limit_is_skipped(gateway, home, sim, outside):
    roster = Roster(home)
    roster.add_endpoint("tight", sim.url)
    roster.add_model("x-two", "tight", family="x-two", context=100_000)
    roster.set_limits("endpoint", "tight", {"rpm": 1})
    with outside.slot("tight", "x-two", wait=0):
        pass  # this minute's one call is spent
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {
            "model": "bench/trio",
            "with": ["x-two"],
            "messages": [{"role": "user", "content": "Review: x"}],
        },
    )
    assert status == 200 and "x-two" not in seats_by_alias(body)
    (skip,) = [s for s in body["bench"]["skipped"] if s["alias"] == "x-two"]
    assert skip["seat"] == "nominee" and skip["why"].startswith("endpoint at its limit")


def test_a_retry_after_pauses_a_limited_endpoint_for_everyone(
    gateway, home, sim, outside, monkeypatch
):
    monkeypatch.setenv("PANELIST_KEY_SIM", "sk-admission-secret-4242")
    Roster(home).set_limits("endpoint", "sim", {"max_concurrent": 10})
    # a panel's deadline shorter than the pause: a seat the pause finds not yet admitted (a
    # loaded machine) is refused at once instead of sleeping out the 120 s
    set_limits(home, panel_timeout=20)
    sim.script("mid", fail="rate_limit", retry_after=120)
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x"}]},
    )
    listed = body["bench"]["seats"] if status == 200 else body["error"]["seats"]
    seats = {s["alias"]: s for s in listed}
    assert seats["mid"]["error"].startswith("rate_limit")
    # the others were admitted before the pause and answered, or the pause held them back
    for alias in ("fast", "slow"):
        assert seats[alias]["status"] == "ok" or "paused" in seats[alias]["error"], seats[alias]
    assert status == (200 if any(seats[a]["status"] == "ok" for a in ("fast", "slow")) else 502)
    assert not outside.has_room("sim", "fast")
    paused = outside.status("endpoint", "sim")["paused"]
    assert paused is not None and 100 < paused["seconds_left"] <= 120 and paused["why"]
    for f in (home.root / "runs" / "admission").rglob("*"):
        if f.is_file():
            assert b"sk-admission-secret-4242" not in f.read_bytes()


def test_a_retry_after_leaves_an_unlimited_endpoint_to_the_model_cooldown(
    gateway, home, sim, outside
):
    sim.script("mid", fail="rate_limit", retry_after=120)
    gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "x"}]},
    )
    assert outside.has_room("sim", "fast")
    assert not (home.root / "runs" / "admission").exists()


def test_every_seat_at_its_endpoints_limit_is_a_503_that_says_when(gateway, pair, gated, outside):
    Roster(pair).set_limits("endpoint", "gated", {"max_concurrent": 1, "rpm": 1})
    set_limits(pair, max_explorers=0, seat_timeout=1)
    with outside.slot("gated", "fast", wait=0):  # the minute's one call, made elsewhere
        pass
    status, body, headers = gateway.post("/v1/chat/completions", ASK)
    assert status == 503, body
    assert body["error"]["code"] == "all_seats_at_limit"
    assert "at its endpoint's limit" in body["error"]["message"]
    assert 1 <= int(headers["Retry-After"]) <= 62  # when the minute's call leaves the window
    assert gated.arrived == []
