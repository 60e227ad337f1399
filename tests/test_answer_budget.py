"""The answers a panel holds draw from the server's memory budget for bytes in flight
(PANELIST_MAX_INFLIGHT_MB): a seat whose answer finds no room fails saying so while the others
answer and the panel is logged; the room comes back once the panel is answered; a request that
finds no room meanwhile gets 503 with Retry-After."""

import json
import threading
import urllib.request

from conftest import PATIENCE, logged, wait_until
from test_slow_clients import start  # noqa: F401

BUDGET = 1_000_000  # bytes; answers over 64 KB are charged, bodies over 64 KB five times their
# size (GRANT_FACTOR)


def ask(content="review this"):
    return {"model": "bench/trio", "messages": [{"role": "user", "content": content}]}


def seat(body, alias):
    [found] = [s for s in body["bench"]["seats"] if s["alias"] == alias]
    return found


def test_an_answer_over_the_budget_fails_its_seat_and_the_panel_is_still_logged(start, sim, home):
    gw = start(max_in_flight=BUDGET)
    sim.script("slow", answer="z" * 1_500_000)
    status, body, _ = gw.post("/v1/chat/completions", ask())
    assert status == 200
    failed = seat(body, "slow")
    assert failed["status"] == "error" and failed["answer"] in ("", None)
    assert failed["error"].startswith("memory:")
    assert "memory budget" in failed["error"] and "PANELIST_MAX_INFLIGHT_MB" in failed["error"]
    assert seat(body, "fast")["status"] == "ok" and seat(body, "mid")["status"] == "ok"
    assert wait_until(lambda: any(p.get("panel") == body["bench"]["panel"] for p in logged(home)))
    [line] = [p for p in logged(home) if p["panel"] == body["bench"]["panel"]]
    statuses = {
        s["alias"]: (s["status"], s["error_kind"]) for s in line["seats"] if s["seat"] == "member"
    }
    assert statuses == {"fast": ("ok", ""), "mid": ("ok", ""), "slow": ("error", "memory")}
    # a failed answer gives its room back at once: nothing is held once the panel is answered
    assert wait_until(lambda: gw.server.in_flight.held == 0)


def test_large_answers_are_held_until_the_reply_and_then_the_room_comes_back(start, sim, home):
    gw = start(max_in_flight=BUDGET)
    # two panels in a row whose answers take most of the budget: the second fits only if the
    # first gave its room back
    sim.script("fast", answer="a" * 300_000)
    sim.script("mid", answer="b" * 300_000)
    for _ in range(2):
        status, body, _ = gw.post("/v1/chat/completions", ask())
        assert status == 200
        assert [seat(body, a)["status"] for a in ("fast", "mid", "slow")] == ["ok"] * 3
        assert len(seat(body, "fast")["answer"]) == 300_000
    assert wait_until(lambda: gw.server.in_flight.held == 0)
    assert len(logged(home)) == 2


def test_a_big_request_while_answers_fill_the_budget_gets_503_and_then_gets_in(start, sim, home):
    gw = start(max_in_flight=BUDGET)
    sim.script("slow", hold_after=1)
    status, _, _ = gw.post("/v1/chat/completions", ask())  # slow's one call that is not held
    assert status == 200
    sim.script("fast", answer="a" * 420_000)
    sim.script("mid", answer="b" * 420_000)
    sim.script("slow", hold_after=1)
    results = []
    first = threading.Thread(target=lambda: results.append(gw.post("/v1/chat/completions", ask())))
    first.start()
    try:
        assert sim.wait_held("slow", 1, PATIENCE)
        # fast's and mid's answers are read and held while slow is still thinking
        assert wait_until(lambda: gw.server.in_flight.held >= 840_000)
        big = ask("y" * 150_000)  # granted five times its size: more than the room left
        status, body, headers = gw.post("/v1/chat/completions", big)
        assert status == 503 and headers["Retry-After"] == "1"
        assert "PANELIST_MAX_INFLIGHT_MB" in body["error"]["message"]
    finally:
        sim.release("slow")
        first.join(PATIENCE)
    assert not first.is_alive()
    [(status, body, _)] = results
    assert status == 200
    assert [seat(body, a)["status"] for a in ("fast", "mid", "slow")] == ["ok"] * 3
    assert wait_until(lambda: gw.server.in_flight.held == 0)
    sim.script("fast")
    sim.script("mid")
    status, body, _ = gw.post("/v1/chat/completions", ask("y" * 150_000))
    assert status == 200
    assert any(p["panel"] == body["bench"]["panel"] for p in logged(home))


def test_a_streamed_answer_over_the_budget_fails_as_it_arrives(start, sim, home):
    gw = start(max_in_flight=BUDGET)
    sim.script("fast", answer="s" * 1_500_000)  # the seat a stream follows when it is first
    sim.script("mid", answer="m" * 1_500_000)
    sim.script("slow", answer="l" * 1_500_000)
    req = urllib.request.Request(
        gw.url + "/v1/chat/completions",
        method="POST",
        data=json.dumps({**ask(), "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=PATIENCE) as resp:
        panel = resp.headers["X-Panelist-Panel"]
        resp.read()  # to its end, whatever it says
    assert wait_until(lambda: any(p.get("panel") == panel for p in logged(home)))
    [line] = [p for p in logged(home) if p["panel"] == panel]
    kinds = {s["alias"]: s["error_kind"] for s in line["seats"] if s["seat"] == "member"}
    # an answer of 1.5 MB never fits in 1 MB, streamed (read piece by piece) or not
    assert kinds == {"fast": "memory", "mid": "memory", "slow": "memory"}
    assert wait_until(lambda: gw.server.in_flight.held == 0)
