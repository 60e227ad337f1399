"""A polled set of the seats core (``Seats.start(poll=True)``): the calling thread sends every call and the iterating thread
reads the answers as they come (the gateway's panels), with the same outcomes, deadlines,
cancellation, admission and retries as a set run on the core's threads."""

import threading

import pytest

from conftest import move_to, read_jsonl, wait_until
from panelist.metrics.seats.record import CallLog
from panelist.metrics.seats import Seats
from panelist.metrics.upstream.transport import CancelFlag
from test_seats import TOOLS, CountingAdmission, call, landing_order


def ends_on(threads):
    """An ``on_end`` recording the thread each result ended on."""
    return lambda result: threads.append((result.call, threading.current_thread()))


def test_a_polled_set_answers_every_outcome_on_the_iterating_thread(sim, roster, core, tmp_path):
    sim.script("mid", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    sim.script("slow", fail="empty")
    sim.script("x-one", fail="auth")
    log = CallLog(tmp_path / "calls.jsonl")
    threads = []
    results = core.start(
        [
            call(roster, "a", "fast"),
            call(roster, "b", "mid", params={"tools": TOOLS}),
            call(roster, "c", "slow"),
            call(roster, "d", "x-one"),
        ],
        timeout=30,
        log=log,
        on_end=ends_on(threads),
        poll=True,
    ).wait()
    log.close()
    assert [r.status for r in results] == ["ok", "tool_calls", "empty", "error"]
    assert results[0].text.startswith("[simulated fast]") and results[0].attempts == 1
    assert results[1].tool_calls[0]["function"]["name"] == "lookup_order"
    assert results[3].error_kind == "auth" and "401" in results[3].error
    assert "127.0.0.1" not in results[3].error, "the error names the endpoint, not its URL"
    assert sorted(c for c, _ in threads) == ["a", "b", "c", "d"]
    assert {t for _, t in threads} == {threading.current_thread()}, (
        "no thread of the core took part"
    )
    assert sorted(line["call"] for line in read_jsonl(tmp_path / "calls.jsonl")) == [
        "a",
        "b",
        "c",
        "d",
    ]


def test_a_polled_set_hands_over_answers_as_they_come(gated, home, roster, core):
    move_to(home, gated, "fast", "mid", "slow")
    run = core.start(
        [
            call(roster, "first", "fast"),
            call(roster, "second", "mid"),
            call(roster, "third", "slow"),
        ],
        timeout=60,
        poll=True,
    )
    assert gated.wait_arrived("fast", "mid", "slow"), "every call was sent at the start"
    assert landing_order(gated, run, ("slow", "fast", "mid")) == ["slow", "fast", "mid"]
    assert [r.status for r in run.wait()] == ["ok", "ok", "ok"]


def test_a_polled_set_keeps_each_deadline_and_yields_ticks_meanwhile(sim, roster, core):
    sim.script("slow", fail="hang")
    run = core.start(
        [call(roster, "a", "fast"), call(roster, "b", "slow", timeout=0.5)], timeout=30, poll=True
    )
    seen = list(run.progress(tick=0.05))
    assert None in seen, "the caller is given ticks to look at its client"
    a, b = run.results
    assert a.status == "ok"
    assert b.status == "error" and b.error_kind == "timeout"


def test_a_polled_set_is_cut_by_its_cancel(sim, roster, core):
    sim.script("slow", fail="hang")
    sim.script("mid", fail="hang")
    flag = CancelFlag()
    run = core.start(
        [call(roster, "a", "slow"), call(roster, "b", "mid")], timeout=60, cancel=flag, poll=True
    )
    assert wait_until(lambda: sim.count("slow") and sim.count("mid"))
    run.abandon()
    assert [r.status for r in run.wait()] == ["cancelled", "cancelled"]
    assert sim.wait_disconnects(2, 30), "the upstream saw both connections close"


def test_calls_without_a_slot_at_once_wait_on_the_cores_threads(sim, roster):
    sim.script("fast", latency=0.05)
    admission = CountingAdmission(limit=1)
    seats = Seats(roster, admission=admission)
    threads = []
    try:
        results = seats.start(
            [call(roster, f"c{i}", "fast") for i in range(4)],
            timeout=60,
            on_end=ends_on(threads),
            poll=True,
        ).wait()
    finally:
        seats.close()
    assert [r.status for r in results] == ["ok"] * 4
    assert admission.most == 1 and admission.slots == 4
    assert len({t for _, t in threads}) > 1, "the calls that had to wait ran elsewhere"


def test_a_call_tried_again_goes_on_on_a_thread_of_the_core(sim, roster, core):
    # fail_every=2: the 2nd call to the model fails, the 3rd answers
    sim.script("fast", fail="server_error", fail_every=2)
    sim.script("mid", fail="server_error")
    assert core.run([call(roster, "warm", "fast")], timeout=30)[0].status == "ok"
    results = core.start(
        [call(roster, "a", "fast", retries=1), call(roster, "b", "mid")], timeout=30, poll=True
    ).wait()
    again, once = results
    assert again.status == "ok" and again.attempts == 2 and sim.count("fast") == 3
    assert once.status == "error" and once.error_kind == "server_error" and once.attempts == 1


def test_let_go_leaves_the_rest_to_the_core_and_every_call_is_logged(
    gated, home, roster, core, tmp_path
):
    move_to(home, gated, "fast", "mid")
    log = CallLog(tmp_path / "calls.jsonl")
    ended = threading.Event()
    run = core.start(
        [call(roster, "first", "fast"), call(roster, "second", "mid")],
        timeout=60,
        log=log,
        poll=True,
        on_end=lambda r: ended.set() if r.call == "second" else None,
    )
    gated.open("fast")
    first = next(r for r in run.progress(tick=0.05) if r is not None)
    assert first.call == "first" and first.status == "ok"
    run.let_go()  # the caller leaves before the second answer
    gated.open("mid")
    assert ended.wait(30), "the answer still to come was read without the caller"
    log.close()
    assert run.results[1].status == "ok"
    assert sorted(line["call"] for line in read_jsonl(tmp_path / "calls.jsonl")) == [
        "first",
        "second",
    ]


def test_a_streamed_call_keeps_a_polled_set_on_the_cores_threads(sim, roster, core):
    pieces = []
    streamed = call(roster, "s", "fast", on_delta=pieces.append)
    threads = []
    results = core.start(
        [streamed, call(roster, "p", "mid")], timeout=30, poll=True, on_end=ends_on(threads)
    ).wait()
    assert [r.status for r in results] == ["ok", "ok"]
    assert "".join(pieces) == results[0].text
    assert threading.current_thread() not in {t for _, t in threads}


def test_a_large_prompt_keeps_a_polled_set_on_the_cores_threads(sim, roster, core):
    big = [{"role": "user", "content": "x" * (100 * 1024)}]
    threads = []
    results = core.start(
        [call(roster, "a", "fast", messages=big), call(roster, "b", "mid", messages=big)],
        timeout=30,
        poll=True,
        on_end=ends_on(threads),
    ).wait()
    assert [r.status for r in results] == ["ok", "ok"]
    assert threading.current_thread() not in {t for _, t in threads}, (
        "the uploads went out in parallel, each on its own thread"
    )


class BatchLog:
    """A log that takes several results in one write, as the gateway's does."""

    def __init__(self):
        self.writes: list[list[str]] = []

    def write(self, result):
        self.writes.append([result.call])

    def write_all(self, results):
        self.writes.append([r.call for r in results])


def test_answers_that_land_together_are_logged_once_each_before_they_end(sim, roster, core):
    log = BatchLog()
    logged_at_end = {}

    def on_end(r):  # whether the call's line was written by the time it ended
        logged_at_end[r.call] = any(r.call in w for w in log.writes)

    results = core.start(
        [call(roster, c, "fast") for c in "abcdef"], timeout=30, log=log, on_end=on_end, poll=True
    ).wait()
    assert [r.status for r in results] == ["ok"] * 6
    assert sorted(c for w in log.writes for c in w) == list("abcdef"), "each once"
    assert logged_at_end == dict.fromkeys("abcdef", True), "logged before it was handed over"


class Chatting:
    """An upstream of another kind than ``Upstream``: it answers whole calls and nothing else."""

    def __init__(self):
        self.calls = 0

    def chat(self, base_url, key, body, **kw):
        self.calls += 1
        raise AssertionError("a refused set must send nothing")


def test_a_polled_set_refuses_an_upstream_that_cannot_send_apart(roster):
    upstream = Chatting()
    seats = Seats(roster, upstream)
    try:
        with pytest.raises(TypeError, match="start the set without poll=True"):
            seats.start([call(roster, "a", "fast")], timeout=30, poll=True)
    finally:
        seats.close()
    assert upstream.calls == 0, "the other path was not taken instead"
