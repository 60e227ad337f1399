"""The seats core: a set of model calls at once, structured results, deadlines, cancellation,
admission and the call log."""

import contextlib
import threading
import time

import pytest

from conftest import move_to, read_jsonl, wait_until
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.errors import AtLimit, Cancelled
from panelist.metrics.seats.record import CallLog
from panelist.metrics.seats import CallFailed, JobResult, SeatCall, SeatJob, Seats

ASK = [{"role": "user", "content": "Say something short."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
        },
    }
]


class CountingAdmission:
    """A tiny admission for tests: at most ``limit`` calls at once per endpoint, a pause that
    holds every later slot back, and a record of what it saw. It refuses as the real one does:
    ``AtLimit`` when no slot comes within the wait, ``Cancelled`` when the wait is cancelled."""

    def __init__(self, limit: int = 1, refuse: bool = False):
        self.limit, self.refuse = limit, refuse
        self.now = self.most = self.slots = 0
        self.pauses: list[tuple] = []
        self.paused_until = 0.0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def slot(self, endpoint, model, *, wait, cancel=None):
        if self.refuse:
            raise AtLimit(f"endpoint {endpoint} is at its limit (test); try again later", 1.0)
        with self._cond:
            end = time.monotonic() + wait
            while self.now >= self.limit or time.monotonic() < self.paused_until:
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"cancelled while waiting for a slot on endpoint {endpoint}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AtLimit(f"endpoint {endpoint} is at its limit (test)", 1.0)
                self._cond.wait(min(left, 0.05))
            self.now += 1
            self.slots += 1
            self.most = max(self.most, self.now)
        try:
            yield
        finally:
            with self._cond:
                self.now -= 1
                self._cond.notify_all()

    def pause(self, endpoint, seconds, why):
        with self._cond:
            self.pauses.append((endpoint, seconds, why))
            self.paused_until = time.monotonic() + seconds


def call(roster, label, alias, role="member", **kw):
    return SeatCall(
        label=label,
        role=role,
        model=roster.view().models[alias],
        messages=kw.pop("messages", ASK),
        **kw,
    )


def test_every_outcome_is_a_structured_result_logged_with_its_role(sim, roster, core, tmp_path):
    sim.script("mid", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    sim.script("slow", fail="empty")
    sim.script("x-one", fail="auth")
    log = CallLog(tmp_path / "calls.jsonl")
    results = core.run(
        [
            call(roster, "a", "fast", meta={"race": "r1", "run": 1}),
            call(roster, "b", "mid", role="candidate", params={"tools": TOOLS}),
            call(roster, "c", "slow", role="judge"),
            call(roster, "d", "x-one"),
        ],
        timeout=30,
        log=log,
    )
    log.close()
    assert [r.label for r in results] == ["a", "b", "c", "d"], "results come in call order"
    ok, tools, empty, failed = results
    assert ok.status == "ok" and ok.text.startswith("[simulated fast]") and ok.attempts == 1
    assert ok.tokens["prompt"] > 0 and ok.finish_reason == "stop"
    assert tools.status == "tool_calls" and tools.finish_reason == "tool_calls"
    assert tools.tool_calls[0]["function"]["name"] == "lookup_order"
    assert empty.status == "empty" and empty.error_kind == "empty"
    assert failed.status == "error" and failed.error_kind == "auth" and "401" in failed.error
    with pytest.raises(CallFailed, match="auth"):
        failed.check()

    lines = read_jsonl(tmp_path / "calls.jsonl")
    assert sorted(line["call"] for line in lines) == ["a", "b", "c", "d"]
    by = {line["call"]: line for line in lines}
    assert by["a"]["role"] == "member" and by["a"]["race"] == "r1" and by["a"]["run"] == 1
    assert by["b"]["role"] == "candidate" and by["b"]["status"] == "tool_calls"
    assert by["b"]["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert by["c"]["role"] == "judge" and by["c"]["status"] == "empty"
    assert by["d"]["error_kind"] == "auth"
    for line in lines:
        assert line["v"] == 1 and line["kind"] == "call" and line["ts"].endswith("Z")
        assert "messages" not in line, "the log never keeps what was asked"


def landing_order(gated, run, order) -> list[str]:
    """Let the held upstreams answer one at a time in ``order``, taking the set's next result
    after each: the aliases in the order their results were handed over."""
    progress, landed = run.progress(tick=0.05), []
    for alias in order:
        gated.open(alias)
        landed.append(next(r for r in progress if r is not None).alias)
    return landed


def test_results_are_yielded_as_they_finish(gated, home, roster, core):
    move_to(home, gated, "fast", "mid", "slow")
    run = core.start(
        [
            call(roster, "first", "fast"),
            call(roster, "second", "mid"),
            call(roster, "third", "slow"),
        ],
        timeout=60,
    )
    assert gated.wait_arrived("fast", "mid", "slow"), "every call is made at once"
    assert landing_order(gated, run, ("slow", "fast", "mid")) == ["slow", "fast", "mid"]
    assert [r.alias for r in run.wait()] == ["fast", "mid", "slow"]


def test_a_call_past_its_own_deadline_times_out_and_the_rest_answer(sim, roster, core):
    sim.script("slow", fail="hang")
    results = core.run(
        [call(roster, "a", "fast"), call(roster, "b", "slow", timeout=0.3)], timeout=30
    )
    assert results[0].status == "ok"
    assert results[1].status == "error" and results[1].error_kind == "timeout"


def test_the_set_deadline_bounds_every_call(sim, roster, core):
    sim.script("slow", fail="hang")
    results = core.run([call(roster, "b", "slow", timeout=60)], timeout=0.3)
    assert results[0].status == "error" and results[0].error_kind == "timeout"


def test_cancel_stops_calls_in_flight_and_cuts_their_connections(sim, roster, core):
    sim.script("slow", fail="hang")
    sim.script("mid", fail="hang")
    flag = CancelFlag()
    run = core.start([call(roster, "a", "slow"), call(roster, "b", "mid")], timeout=60, cancel=flag)
    assert wait_until(lambda: sim.count("slow") and sim.count("mid"))
    run.abandon()
    results = run.wait()
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert all(r.error_kind == "cancelled" for r in results)
    assert sim.wait_disconnects(2, 30), "the upstream saw both connections close"


def test_a_cancelled_set_sends_nothing(sim, roster, core):
    flag = CancelFlag()
    flag.set()
    results = core.run([call(roster, "a", "fast")], timeout=30, cancel=flag)
    assert results[0].status == "cancelled" and sim.count("fast") == 0


def test_admission_holds_concurrency_to_its_limit(sim, roster):
    sim.script("fast", latency=0.05)
    admission = CountingAdmission(limit=2)
    seats = Seats(roster, admission=admission)
    try:
        results = seats.run([call(roster, f"c{i}", "fast") for i in range(8)], timeout=60)
    finally:
        seats.close()
    assert [r.status for r in results] == ["ok"] * 8
    assert admission.slots == 8 and admission.most <= 2
    assert sim.count("fast") == 8


def test_a_call_refused_by_admission_is_an_at_limit_result_never_sent(sim, roster, tmp_path):
    seats = Seats(roster, admission=CountingAdmission(refuse=True))
    log = CallLog(tmp_path / "calls.jsonl")
    try:
        (result,) = seats.run([call(roster, "a", "fast")], timeout=30, log=log)
    finally:
        seats.close()
        log.close()
    assert result.status == "error" and result.error_kind == "at_limit"
    assert "at its limit" in result.error
    assert sim.count("fast") == 0
    assert read_jsonl(tmp_path / "calls.jsonl")[0]["error_kind"] == "at_limit"


def test_a_stated_retry_after_pauses_the_endpoint_and_a_retry_follows(sim, roster):
    # fail_every=2: the 2nd call to the model is refused with a Retry-After, the 3rd answers
    sim.script("fast", fail="rate_limit", fail_every=2, retry_after=1)
    admission = CountingAdmission(limit=4)
    learned = []
    seats = Seats(roster, admission=admission)
    try:
        (first,) = seats.run([call(roster, "warm", "fast")], timeout=30)
        (again,) = seats.run(
            [call(roster, "a", "fast", retries=1)],
            timeout=30,
            learn=lambda model, exc: learned.append((model.alias, exc.kind)),
        )
        (once,) = seats.run([call(roster, "b", "fast", retries=0)], timeout=30)
    finally:
        seats.close()
    assert first.status == "ok"
    assert again.status == "ok" and again.attempts == 2
    assert admission.pauses[0][:2] == ("sim", 1.0), "the endpoint paused for everyone"
    assert learned == [("fast", "rate_limit")]
    # the 4th call is refused again; without retries it stays refused
    assert once.status == "error" and once.error_kind == "rate_limit" and once.attempts == 1
    assert len(admission.pauses) == 2
    assert sim.count("fast") == 4


def test_no_retry_without_retries(sim, roster, core):
    sim.script("fast", fail="server_error")
    (result,) = core.run([call(roster, "a", "fast")], timeout=30)
    assert result.status == "error" and result.error_kind == "server_error"
    assert result.attempts == 1 and sim.count("fast") == 1


def test_an_endpoint_gone_from_the_roster_is_an_error_result(sim, roster, core):
    model = roster.view().models["fast"]
    roster.remove_model("fast")
    roster.remove_model("mid")
    for alias in ("slow", "x-one", "x-two", "x-three"):
        roster.remove_model(alias)
    roster.remove_endpoint("sim")
    (result,) = core.run([SeatCall("a", "member", model, ASK)], timeout=30)
    assert result.status == "error" and "gone from the roster" in result.error


def test_labels_must_be_unique_within_a_set(roster, core):
    with pytest.raises(ValueError, match="own label"):
        core.start([call(roster, "a", "fast"), call(roster, "a", "mid")], timeout=30)


def test_the_key_never_reaches_the_log(sim, roster, core, tmp_path, monkeypatch):
    secret = "sk-test-secret-0123456789"
    monkeypatch.setenv(roster.view().endpoints["sim"].key_env, secret)
    sim.script("fast", fail="auth", echo_auth=True)
    log = CallLog(tmp_path / "calls.jsonl")
    (result,) = core.run([call(roster, "a", "fast")], timeout=30, log=log)
    log.close()
    assert result.error_kind == "auth"
    assert secret not in result.error
    assert secret not in (tmp_path / "calls.jsonl").read_text()


def test_an_error_is_scrubbed_before_it_is_logged(sim, roster, core, tmp_path):
    sim.script("fast", fail="server_error", message="could not fetch https://img.example/a.png")
    log = CallLog(tmp_path / "calls.jsonl")
    (result,) = core.run(
        [call(roster, "a", "fast")],
        timeout=30,
        log=log,
        scrub=lambda text: text.replace("https://img.example/a.png", "[image]"),
    )
    log.close()
    assert "[image]" in result.error and "img.example" not in result.error
    assert "img.example" not in (tmp_path / "calls.jsonl").read_text()


def test_one_call_in_the_callers_thread(sim, roster):
    upstream = Upstream()
    seats = Seats(roster, upstream)
    try:
        (result,) = seats.run([call(roster, "a", "fast")], timeout=30)
    finally:
        seats.close()
        upstream.close()
    assert result.status == "ok" and seats._pool is None, "no thread pool for a single call"


def test_parallel_holds_each_endpoint_to_its_lane_in_the_order_given(gated, home, roster, core):
    move_to(home, gated, "fast", "mid")  # fast and mid on "gated"; slow stays on the simulator
    run = core.start(
        [
            call(roster, "first", "fast"),
            call(roster, "second", "mid"),
            call(roster, "other", "slow"),
        ],
        timeout=60,
        parallel=1,
    )
    assert gated.wait_arrived("fast")
    other = next(r for r in run if r is not None)
    assert other.alias == "slow" and other.status == "ok", "another endpoint is never held back"
    assert gated.arrived == ["fast"], "the second call of a lane waits for the first"
    gated.open("fast", "mid")
    assert [r.status for r in run.wait()] == ["ok", "ok", "ok"]
    assert gated.arrived == ["fast", "mid"]


def test_a_cancel_drops_the_calls_held_back_unsent_and_unlogged(
    gated, home, roster, core, tmp_path
):
    move_to(home, gated, "fast", "mid")
    log = CallLog(tmp_path / "calls.jsonl")
    run = core.start(
        [call(roster, "first", "fast"), call(roster, "second", "mid")],
        timeout=60,
        parallel=1,
        log=log,
    )
    assert gated.wait_arrived("fast")
    run.abandon()
    first, second = run.wait()
    log.close()
    assert first.status == "cancelled", "the call in flight is cut"
    assert second.status == "cancelled" and "not begun" in second.error
    assert gated.arrived == ["fast"], "the held call was never sent"
    assert [line["call"] for line in read_jsonl(tmp_path / "calls.jsonl")] == ["first"]


def test_jobs_run_as_units_of_a_set_and_their_failures_are_their_own(sim, roster, core):
    def asks():
        (result,) = core.run([call(roster, "inner", "fast")], timeout=30)
        return result.check().text

    def breaks():
        raise LookupError("no such order")

    done = core.run(
        [SeatJob("asks", asks), SeatJob("breaks", breaks), call(roster, "plain", "mid")],
        timeout=30,
        parallel=4,
    )
    assert [r.label if isinstance(r, JobResult) else r.call for r in done] == [
        "asks",
        "breaks",
        "plain",
    ]
    asked, broke, plain = done
    assert asked.status == "ok" and asked.value.startswith("[simulated fast]")
    assert broke.status == "error" and isinstance(broke.exception, LookupError)
    assert broke.error == "LookupError: no such order"
    assert plain.status == "ok"


def test_a_stuck_job_is_given_up_after_the_cancel(roster, core):
    release = threading.Event()
    began = threading.Event()

    def stuck():
        began.set()
        release.wait()

    run = core.start([SeatJob("stuck", stuck)], timeout=600, grace=0.05)
    try:
        assert began.wait(30)
        run.abandon()
        (result,) = run.wait()
        assert result.status == "cancelled" and result.begun and result.value is None
    finally:
        release.set()


def test_units_added_to_a_running_set_are_waited_for(sim, roster, core):
    run = core.start([], timeout=30)
    assert run.wait() == [] and run.settled
    run.add(call(roster, "later", "fast"))
    run.add(SeatJob("job", lambda: 42))
    assert not run.settled
    landed = {r.label: r for r in run}
    assert landed["later"].status == "ok" and landed["job"].value == 42
    with pytest.raises(ValueError, match="own label"):
        run.add(call(roster, "later", "mid"))


def test_without_a_set_deadline_a_call_ends_by_its_own_wait_and_timeout(sim, roster, core):
    sim.script("slow", fail="hang")
    (result,) = core.run([call(roster, "a", "slow", wait=1, timeout=0.3)], parallel=1)
    assert result.status == "error" and result.error_kind == "timeout"
