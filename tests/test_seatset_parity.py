"""The seats core's two kinds of set, one behaviour: a set run on the core's threads and a
polled set (sent by the starting thread, read by the iterating one) get the same calls and must
give the same results, log lines and refusals. In process: the upstream is ``FakeTransport``,
so every outcome is the real client's."""

import threading

import pytest

from conftest import read_jsonl
from panelist.metrics.roster.roster import Roster
from panelist.metrics.seats.record import CallLog
from panelist.metrics.seats import Seats
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.transport import CancelFlag
from test_seats import call
from transport_fake import FakeTransport, completion

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup_order", "arguments": '{"number": "7"}'},
}


def scripted(req):
    """fast answers, mid calls a tool, slow answers nothing, x-one's key is refused,
    x-two is rate limited, x-three cuts the connection."""
    model = req.model
    if model == "mid":
        reply = completion("", model)
        reply["choices"][0]["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [TOOL_CALL],
        }
        reply["choices"][0]["finish_reason"] = "tool_calls"
        return 200, reply
    if model == "slow":
        return 200, completion("", model)
    if model == "x-one":
        return 401, {"error": {"message": "bad key", "type": "invalid_api_key"}}
    if model == "x-two":
        return 429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "0"}
    if model == "x-three":
        raise ConnectionResetError
    return 200, completion(f"the answer of {model}", model)


@pytest.fixture(params=[False, True], ids=["threads", "polled"])
def polled(request):
    return request.param


@pytest.fixture()
def seats(folder):
    transport = FakeTransport(scripted)
    core = Seats(Roster(folder), Upstream(transport=transport))
    core.transport = transport
    yield core
    core.close()
    transport.close()


def test_every_outcome_is_the_same_on_either_kind_of_set(folder, seats, polled, tmp_path):
    roster = Roster(folder)
    log = CallLog(tmp_path / "calls.jsonl")
    ended = []
    aliases = ["fast", "mid", "slow", "x-one", "x-two", "x-three"]
    results = seats.start(
        [call(roster, a, a) for a in aliases],
        timeout=30,
        log=log,
        on_end=lambda r: ended.append((r.call, threading.current_thread())),
        max_pause=0,
        poll=polled,
    ).wait()
    log.close()
    by = {r.call: r for r in results}
    assert {a: by[a].status for a in aliases} == {
        "fast": "ok",
        "mid": "tool_calls",
        "slow": "empty",
        "x-one": "error",
        "x-two": "error",
        "x-three": "error",
    }
    assert by["fast"].text == "the answer of fast"
    assert by["mid"].tool_calls[0]["function"]["name"] == "lookup_order"
    assert by["x-one"].error_kind == "auth" and "401" in by["x-one"].error
    assert by["x-two"].error_kind == "rate_limit"
    assert "127.0.0.1" not in by["x-one"].error, "an error names the endpoint, not its URL"
    assert sorted(c for c, _ in ended) == sorted(aliases)
    # the one difference, which shows each kind really ran: where the results were taken in
    on_this = {t is threading.current_thread() for _, t in ended}
    assert on_this == {polled}
    assert sorted(line["call"] for line in read_jsonl(tmp_path / "calls.jsonl")) == sorted(aliases)
    assert {r.model for r in seats.transport.requests} >= {"fast", "mid", "slow"}


def test_a_cancelled_set_makes_no_call_on_either_kind(folder, seats, polled):
    roster = Roster(folder)
    cancel = CancelFlag()
    cancel.set()
    results = seats.start(
        [call(roster, "a", "fast"), call(roster, "b", "mid")],
        timeout=30,
        cancel=cancel,
        poll=polled,
    ).wait()
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert seats.transport.requests == []


def test_a_call_past_its_deadline_ends_as_a_timeout_on_either_kind(folder, polled):
    release = threading.Event()

    def held(req):  # "slow" answers only once the test is over
        if req.model == "slow":
            release.wait(30)
        return 200, completion(f"the answer of {req.model}", req.model)

    transport = FakeTransport(held)
    core = Seats(Roster(folder), Upstream(transport=transport))
    roster = Roster(folder)
    try:
        results = core.start(
            [call(roster, "a", "fast"), call(roster, "b", "slow", timeout=0.3)],
            timeout=30,
            poll=polled,
        ).wait()
    finally:
        release.set()
        core.close()
        transport.close()
    a, b = results
    assert a.status == "ok" and a.text == "the answer of fast"
    assert b.status == "error" and b.error_kind == "timeout"


def test_repeated_labels_are_refused_on_either_kind(folder, seats, polled):
    roster = Roster(folder)
    with pytest.raises(ValueError, match="its own label"):
        seats.start([call(roster, "a", "fast"), call(roster, "a", "mid")], timeout=30, poll=polled)
