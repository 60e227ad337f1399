"""The seats core's engine (``Seats``): a set of model calls runs at once; each ends as a result.

Every caller that asks models describes its work as ``SeatCall``s (a label, a role, the roster
``Model``, messages, params) and hands them to ``Seats.start`` (results as they land) or
``Seats.run`` (every result, in call order): the gateway's panel (its seats, its merger), the
decider, the race (its reference, candidates and judge), the suite, health's probes and the
dashboard's endpoint Test. Work that makes calls of its own between other code (a race's run:
the job's code and its tool loop; a judgement asked again when unusable) is a ``SeatJob`` of a
set, and its calls are sets of their own. The core never writes a log of its own choosing: the
caller hands it the log to write (``log``: an object with ``write(result)`` or a callable), and
builds its lines with ``metrics.seats.record``. What is the caller's stays the caller's: the panel
keeps seating, the reply and its records, and plugs in ``learn`` (cooldowns), ``scrub`` (image
traces) and ``on_end`` (in-flight holds, the last seat of a picked panel).

Invariants:

* A call never raises: whatever happens (refused by admission, rate limited, timed out,
  cancelled, a bug) becomes the ``SeatResult``'s status (ok | tool_calls | empty | error |
  cancelled) with an error kind and message, and the error itself (``raised``) for a caller that
  raises it again. Callers that want an exception ask for one (``SeatResult.check``). A job's
  exception is its ``JobResult``'s, never the set's.
* Every call ends by its deadline: the earliest of the set's deadline, once admitted the call's
  own ``timeout``, and its own limit from its start: ``timeout`` when it says
  ``wait_in_timeout`` (a gateway seat: waiting counts against it), else ``wait + timeout`` when
  it gives a ``wait`` (the suite, probes), else (no ``wait``) the set's deadline, or twice its
  ``timeout`` in a set without one. Waiting for admission never counts against the model's own
  time otherwise.
* A set's results exist from its start (``SeatSet.results``, in the order the units were given)
  and each is filled in place as its unit ends; ``on_end`` runs after a call is logged and
  before its result is handed over. A unit stuck past the set's deadline, or past its cancel,
  plus ``grace``, is handed over as a timeout (or cancelled); its own thread still logs a call
  if it ever ends.
* Setting the set's cancel flag stops every unit: calls waiting for admission stop waiting,
  those in flight have their connection cut, those held back by ``parallel`` are never begun:
  never sent and never logged (they are handed over as cancelled).
* A polled set (``poll=True``: the gateway's panels) costs no thread: its calls are sent by the
  starting thread and their answers read, as they come, by the thread that iterates it (one
  poll of their connections; ``on_end`` runs there). Nothing else differs: a call that must
  wait (no admission slot at once, a retry's backoff) goes on on a thread of the core, and a
  caller that stops iterating early hands the rest to the core with ``let_go``. A set of
  streamed calls, of jobs, with ``parallel``, or with a prompt over 64 KiB (whose uploads
  must not wait for each other) is never polled.
* A call's admission slot is given back when the upstream is done with the call
  (``SlotRelease``): at once after its answer; for a call cut before it (its deadline, its
  set's cancel), once the upstream has ended the call (``metrics.upstream.settle``), not when
  the seat gave up, so an endpoint's ``max_concurrent`` holds at the upstream. A retry takes a
  slot of the same limit again, within the call's same deadline.
* A call given ``on_delta`` is streamed: the listener hears each piece of the answer's text as
  it arrives (on the call's thread), and the result is the whole answer all the same. A call
  given ``stop`` is cut when that flag is set, as the set's cancel cuts every call.
* ``parallel`` holds at most that many units of a set at once per lane, in the order given: a
  call's lane is its model's endpoint (a slow or limited endpoint never holds back another), a
  job's the one it names (by default one lane for every job of the set). Without it, every
  unit starts at once. A set of one that is waited for (``run``) runs in the caller's thread.
* Each call is logged once, as it finishes, by the log it was given: never its messages, always
  its role, status, tokens, time, attempts and the caller's own fields (``meta``).
* An upstream's error names the call's endpoint as the roster does, never its URL, host or port
  (``transport.named``), before anything (a log, a cooldown, a pause, a reply) reads it: every
  caller of the core answers people who may use an endpoint without being told where it is.
* A rate limit that states a Retry-After pauses the endpoint in admission (so every process
  waits; at most ``max_pause`` seconds when the caller caps it); a call is tried again only
  when its ``retries`` allow, the failure is transient (rate limit, server error, connection)
  and the deadline leaves room.
* A call never asks for more tokens than its model may write: an output budget
  (``BUDGETS``) above the model's known ``max_output`` is sent lowered to it, and the result
  says so (``clamped``). A refusal that states a lower cap (``OutputCapExceeded``) is sent
  again once within it, whatever ``retries`` says, when the deadline leaves room: it is a
  correction, not a retry of something that might pass.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, overload

from panelist.metrics.plaintext import shorten
from panelist.metrics.upstream.client import Chats, Upstream, encode_messages
from panelist.metrics.upstream.transport import CancelFlag, joined, named
from panelist.metrics.errors import (
    AtLimit,
    Cancelled,
    OutputCapExceeded,
    RateLimited,
    UpstreamError,
    UpstreamTimeout,
)
from panelist.metrics.roster.roster import Endpoint, Model, RosterView
from panelist.metrics.seats.calls import (
    BUDGETS,
    GRACE,
    MAX_BACKOFF,
    TRANSIENT,
    JobResult,
    Learn,
    OnEnd,
    Result,
    Scrub,
    SeatCall,
    SeatJob,
    SeatResult,
    Tries,
    Unit,
    Write,
    answered,
    closed,
    failed,
    log_results,
    own_deadline,
    run_job,
)
from panelist.metrics.seats.seatset import SeatSet


@dataclass(frozen=True)
class Hooks:
    """What a set's calls share besides their deadline and cancel flag."""

    write: Write | None = None
    learn: Learn | None = None
    scrub: Scrub | None = None
    on_end: OnEnd | None = None
    max_pause: float | None = None
    encoded: "EncodedMessages" = field(default_factory=lambda: EncodedMessages())
    meter: object = None  # the memory budget large answers are charged to (Upstream.chat)
    # the log's ``write_all(results)``, when it has one: a polled set's answers that came
    # together are logged in one write
    write_all: Callable[[list], None] | None = None


class RosterSnapshot:
    """The roster and the endpoints' keys read once for the calls a polled set sends together
    (a retry, later, reads them again)."""

    def __init__(self, roster):
        self.roster = roster
        self._view: RosterView | None = None
        self._keys: dict[str, str | None] = {}

    def view(self) -> RosterView:
        # looked at by the first call that needs it, so a roster that cannot be read fails
        # each call as it would on its own
        if self._view is None:
            self._view = self.roster.view()
        return self._view

    def key(self, endpoint: Endpoint) -> str | None:
        if endpoint.name not in self._keys:  # a refusal is not kept: each call meets it
            self._keys[endpoint.name] = self.roster.api_key(endpoint)
        return self._keys[endpoint.name]


class EncodedMessages:
    """The messages of a set's calls, each distinct list encoded once: the seats of a panel
    share one list, so a 20 MB prompt is held once for all of them, not once per seat."""

    def __init__(self):
        self._lock = threading.Lock()
        self._done: dict[int, tuple[list, bytes]] = {}  # id(list) -> (the list, its JSON)

    def of(self, messages: list) -> bytes:
        with self._lock:
            known = self._done.get(id(messages))
            if known is not None and known[0] is messages:  # the list held: its id is its own
                return known[1]
        data = encode_messages(messages)  # outside the lock: seats never wait on each other
        with self._lock:
            self._done[id(messages)] = (messages, data)
        return data

    def clear(self) -> None:
        """Let the encodings go (a call made later encodes its messages again)."""
        with self._lock:
            self._done.clear()


def _hooks(log, learn, scrub, on_end, max_pause, meter) -> Hooks:
    return Hooks(
        _writer(log),
        learn,
        scrub,
        on_end,
        max_pause,
        meter=meter,
        write_all=getattr(log, "write_all", None),
    )


def _writer(log) -> Write | None:
    if log is None:
        return None
    write = getattr(log, "write", log)
    if not callable(write):
        raise TypeError("log must have write(result) or be a callable taking the result")
    return write


class Seats:
    """Makes model calls for one data folder; build one per server or race, ``close`` it after.

    ``roster``: anything with ``view() -> RosterView`` (endpoints are looked up at call time, so
    an edit of the roster applies to the next call) and ``api_key(endpoint)``, the one read of
    an endpoint's key (``Roster.api_key``). ``admission``: None means no limits."""

    def __init__(
        self,
        roster,
        upstream: Chats | None = None,
        *,
        admission=None,
        max_workers: int = 256,
        thread_name: str = "seats",
        learn: Learn | None = None,
    ):
        """``learn``: hears the failures of calls given no ``learn`` of their own."""
        self.roster = roster
        self.learn = learn
        self._own_upstream: Upstream | None = None  # one made here is this core's to close
        if upstream is None:
            upstream = self._own_upstream = Upstream()
        self.upstream: Chats = upstream
        self.admission = admission
        self._max_workers, self._prefix = max_workers, thread_name
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._own_upstream is not None:
            self._own_upstream.close()

    def snapshot(self) -> RosterSnapshot:
        """One read of the roster and keys for calls sent together (``send``)."""
        return RosterSnapshot(self.roster)

    def submit(self, fn, *args, **kw):
        """Run ``fn`` on the core's threads (a caller's follow-up, such as a merge); a Future."""
        with self._pool_lock:
            if self._pool is None:  # made on first use: a caller of one call at a time needs none
                self._pool = ThreadPoolExecutor(
                    max_workers=self._max_workers, thread_name_prefix=self._prefix
                )
            return self._pool.submit(fn, *args, **kw)

    # -- the one entry ----------------------------------------------------------------------------
    def start(
        self,
        units: Iterable[Unit],
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        log=None,
        learn: Learn | None = None,
        scrub: Scrub | None = None,
        on_end: OnEnd | None = None,
        max_pause: float | None = None,
        parallel: int | None = None,
        grace: float = GRACE,
        meter=None,
        poll: bool = False,
    ) -> "SeatSet":
        """Start every unit (call or job) at once, or ``parallel`` at a time per lane; iterate
        the set (or its ``progress``) for results as they land.

        The set's deadline is ``deadline`` (``time.monotonic()``) or ``timeout`` seconds from
        now (the earlier when both are given; none: each call's own). ``log`` is written each
        call's result as it ends (``write(result)``, or the callable itself). ``learn(model,
        error)`` hears every upstream failure (the gateway cools models down); ``scrub(text)``
        cleans an error's text before anyone sees it (the gateway hides image URLs an upstream
        may echo); ``on_end(result)`` runs on the unit's thread once a call is logged and before
        its result is handed over; ``max_pause`` caps the pause a stated Retry-After puts on an
        endpoint. ``meter``: anything with ``take(n) -> bool`` and ``give(n)``, charged the
        bytes of each large answer as they arrive; the caller gives them back when it no longer
        holds the answers (a call past it ends with kind ``memory``).

        ``poll``: this thread sends every call now, and the thread that iterates the set reads
        the answers as they come, in one poll of their connections, with no thread of the
        core's (``on_end`` then runs on the iterating thread). That costs a panel far less than
        a thread per call, but its answers are read only while the set is iterated: a caller
        that stops early (a picked reply) calls ``let_go``. A call that must wait (for
        admission, or to be tried again) goes on on a thread of the core; a set of streamed
        calls, of jobs, with ``parallel`` or with a prompt over 64 KiB runs on them all along.
        A polled set needs this core's upstream to be an ``Upstream`` (its ``send_chat``); any
        other kind is refused here rather than run another way unseen."""
        if poll and not isinstance(self.upstream, Upstream):
            raise TypeError(
                f"a polled set sends its calls with Upstream.send_chat, and this "
                f"core's upstream is a {type(self.upstream).__name__}; start the "
                "set without poll=True"
            )
        return SeatSet(
            self,
            list(units),
            _deadline(timeout, deadline),
            cancel if cancel is not None else CancelFlag(),
            _hooks(log, learn, scrub, on_end, max_pause, meter),
            parallel,
            grace,
            poll,
        )

    # a unit's result is of its kind: calls give SeatResults, jobs JobResults
    @overload
    def run(
        self,
        units: Iterable[SeatCall],
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        log=None,
        learn: Learn | None = None,
        scrub: Scrub | None = None,
        on_end: OnEnd | None = None,
        max_pause: float | None = None,
        parallel: int | None = None,
        grace: float = GRACE,
        meter=None,
    ) -> list[SeatResult]: ...

    @overload
    def run(
        self,
        units: Iterable[SeatJob],
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        log=None,
        learn: Learn | None = None,
        scrub: Scrub | None = None,
        on_end: OnEnd | None = None,
        max_pause: float | None = None,
        parallel: int | None = None,
        grace: float = GRACE,
        meter=None,
    ) -> list[JobResult]: ...

    @overload
    def run(
        self,
        units: Iterable[Unit],
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        log=None,
        learn: Learn | None = None,
        scrub: Scrub | None = None,
        on_end: OnEnd | None = None,
        max_pause: float | None = None,
        parallel: int | None = None,
        grace: float = GRACE,
        meter=None,
    ) -> list[Result]: ...

    def run(
        self,
        units: Iterable[Unit],
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
        log=None,
        learn: Learn | None = None,
        scrub: Scrub | None = None,
        on_end: OnEnd | None = None,
        max_pause: float | None = None,
        parallel: int | None = None,
        grace: float = GRACE,
        meter=None,
    ) -> list:
        """``start`` and wait: every result, in the order the units were given. A set of one
        (and no ``parallel``) runs in this thread: one call costs no thread of the core's."""
        units = list(units)
        hooks = _hooks(log, learn, scrub, on_end, max_pause, meter)
        if len(units) != 1 or parallel is not None:
            return SeatSet(
                self,
                units,
                _deadline(timeout, deadline),
                cancel if cancel is not None else CancelFlag(),
                hooks,
                parallel,
                grace,
            ).wait()
        unit = units[0]
        result = SeatResult.of(unit) if isinstance(unit, SeatCall) else JobResult(unit.label)
        self.perform(unit, result, _deadline(timeout, deadline), cancel, hooks)
        return [result]

    def perform(self, unit: Unit, result: Result, deadline: float, cancel, hooks: Hooks) -> None:
        """Run one unit to its end, filling ``result`` in place; never raises."""
        # a unit's result is made for its kind: SeatResult.of a call, a JobResult of a job
        if isinstance(unit, SeatCall):
            assert isinstance(result, SeatResult)
            self._ask(unit, result, deadline, cancel, hooks)
        else:
            assert isinstance(result, JobResult)
            run_job(unit, result, cancel)
        if hooks.on_end is not None:
            hooks.on_end(result)

    # -- one call ----------------------------------------------------------------------------------
    def _ask(
        self, call: SeatCall, result: SeatResult, deadline: float, cancel, hooks: Hooks
    ) -> None:
        """Make one call in this thread by its deadline (see the module docstring)."""
        t0 = time.monotonic()
        if call.stop is not None:
            cancel = joined(cancel if cancel is not None else CancelFlag(), call.stop)
        self._carry(
            call,
            result,
            t0,
            min(deadline, own_deadline(call, t0, deadline)),
            cancel,
            hooks,
            Tries(call),
            0.0,
        )

    def resume(
        self,
        call: SeatCall,
        result: SeatResult,
        t0: float,
        deadline: float,
        cancel,
        hooks: Hooks,
        tries: "Tries",
        delay: float,
    ) -> None:
        """Go on with a call whose attempt, made by a set's own thread, asks for another."""
        self._carry(call, result, t0, deadline, cancel, hooks, tries, delay)
        if hooks.on_end is not None:
            hooks.on_end(result)

    def _carry(
        self,
        call: SeatCall,
        result: SeatResult,
        t0: float,
        deadline: float,
        cancel,
        hooks: Hooks,
        tries: "Tries",
        delay: float,
    ) -> None:
        """A call's attempts from here (after ``delay``) to its end, which is logged."""
        try:
            _hold(call, delay, cancel)
            self._attempts(call, result, deadline, cancel, hooks, tries)
        except Exception as exc:  # a bug in one call must not fail its set
            failed(result, exc)
        closed(result, t0, hooks)
        log_results(hooks, [result])

    def _attempts(
        self,
        call: SeatCall,
        result: SeatResult,
        deadline: float,
        cancel,
        hooks: Hooks,
        tries: "Tries",
    ) -> None:
        while True:
            result.attempts += 1
            try:
                answer = self._attempt(call, result, deadline, cancel, hooks, tries.cap)
            except UpstreamError as exc:
                delay = self.retry_delay(call, result, exc, tries, deadline, hooks)
                if delay is None:
                    raise
                _hold(call, delay, cancel)
                continue
            answered(result, answer)
            return

    def retry_delay(
        self,
        call: SeatCall,
        result: SeatResult,
        exc: UpstreamError,
        tries: "Tries",
        deadline: float,
        hooks: Hooks,
    ) -> float | None:
        """An attempt failed with ``exc``: the seconds to wait before the next one, or None when
        there is none (the failure is the call's)."""
        learn = hooks.learn if hooks.learn is not None else self.learn
        if isinstance(exc, TRANSIENT):
            pause = self._pause(call.model, exc, hooks.max_pause)  # first: all wait
            if learn is not None:
                learn(call.model, exc)
            # a streamed call is never tried again: its pieces may have gone out
            if result.attempts - tries.corrected > call.retries or call.on_delta is not None:
                return None
            delay = pause if pause is not None else tries.backoff
            tries.backoff = min(tries.backoff * 2, MAX_BACKOFF)
            if time.monotonic() + delay >= deadline:
                return None  # no room left to try again
            # with admission, the pause itself holds the next attempt back
            return delay if pause is None or self.admission is None else 0.0
        if learn is not None:
            learn(call.model, exc)
        stated = exc.max_output if isinstance(exc, OutputCapExceeded) else None
        if (
            stated
            and (tries.cap is None or stated < tries.cap)
            and clamp(call.params, stated)[1] is not None
            and time.monotonic() < deadline
        ):
            tries.cap, tries.corrected = stated, tries.corrected + 1
            return 0.0
        return None

    def _prepared(
        self,
        call: SeatCall,
        result: SeatResult,
        cancel,
        cap: int | None,
        snapshot: "RosterSnapshot | None" = None,
    ) -> tuple[Endpoint, str | None, dict]:
        """An attempt's endpoint, key and body, checked before any slot or byte is taken.
        ``snapshot``: the roster and keys as read once for the calls sent together."""
        model = call.model
        endpoint = call.endpoint
        if endpoint is None:
            view: RosterView = self.roster.view() if snapshot is None else snapshot.view()
            endpoint = view.endpoints.get(model.endpoint)
        if endpoint is None:
            raise UpstreamError(
                f"endpoint '{model.endpoint}' of {model.alias} is gone from the "
                "roster; add the endpoint back, or use another model"
            )
        # KeyRefused before any slot or byte is taken
        key = self.roster.api_key(endpoint) if snapshot is None else snapshot.key(endpoint)
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"call {call.label} not made: its set was cancelled")
        params, result.clamped = clamp(call.params, cap)
        return endpoint, key, dict(params, model=model.served, messages=call.messages)

    def _attempt(
        self,
        call: SeatCall,
        result: SeatResult,
        deadline: float,
        cancel,
        hooks: Hooks,
        cap: int | None,
    ):
        model = call.model
        endpoint, key, body = self._prepared(call, result, cancel, cap)
        extra: dict[str, Any] = {} if call.on_delta is None else {"on_delta": call.on_delta}
        if hooks.meter is not None:  # an upstream of another kind (onboarding's) has none
            extra["meter"] = hooks.meter
        if self.admission is not None:
            left = deadline - time.monotonic()
            wait = max(0.0, left if call.wait is None else min(call.wait, left))
            w0 = time.monotonic()
            slot = self.admission.slot(endpoint.name, model.alias, wait=wait, cancel=cancel)
            try:  # no slot within the wait is AtLimit; a cancelled wait is Cancelled
                slot.__enter__()
            finally:
                result.waited += time.monotonic() - w0
            # the upstream gives the slot back once it is done with the call (SlotRelease)
            extra["on_release"] = release = SlotRelease(slot)
        try:
            left = _left(call, deadline)
        except BaseException:
            if self.admission is not None:
                release()  # nothing was sent
            raise
        try:
            return self.upstream.chat(
                endpoint.base_url,
                key,
                body,
                timeout=min(call.timeout, left),
                cancel=cancel,
                messages_json=hooks.encoded.of(call.messages),
                **extra,
            )
        except UpstreamError as exc:
            _named(exc, endpoint)
            raise

    def send(
        self,
        call: SeatCall,
        result: SeatResult,
        deadline: float,
        cancel,
        hooks: Hooks,
        cap: int | None,
        snapshot: "RosterSnapshot | None" = None,
    ) -> "SentCall | None":
        """``_attempt``'s first half for a set that reads its answers in one thread: the call
        sent, holding its slot; None when admission has no slot at once (a thread of the core
        then waits for one)."""
        model = call.model
        endpoint, key, body = self._prepared(call, result, cancel, cap, snapshot)
        release = None
        if self.admission is not None:
            slot = self.admission.slot(endpoint.name, model.alias, wait=0.0, cancel=cancel)
            try:
                slot.__enter__()
            except AtLimit:
                return None
            release = SlotRelease(slot)  # given back by the upstream once done with the call
        try:
            timeout = min(call.timeout, _left(call, deadline))
        except BaseException:
            if release is not None:
                release()  # nothing was sent
            raise
        try:
            # a set is polled only with an Upstream (``start`` refuses it otherwise)
            assert isinstance(self.upstream, Upstream)
            return SentCall(
                self.upstream.send_chat(
                    endpoint.base_url,
                    key,
                    body,
                    timeout=timeout,
                    cancel=cancel,
                    messages_json=hooks.encoded.of(call.messages),
                    meter=hooks.meter,
                    on_release=release,
                ),
                endpoint,
            )
        except UpstreamError as exc:
            _named(exc, endpoint)
            raise

    def _pause(self, model: Model, exc: UpstreamError, cap: float | None) -> float | None:
        """A stated Retry-After: the endpoint pauses for everyone; returns the seconds."""
        seconds = getattr(exc, "retry_after", None)
        if not isinstance(exc, RateLimited) or not seconds or seconds <= 0:
            return None
        if cap is not None:  # a Retry-After of a year must not stop an endpoint for a year
            seconds = min(seconds, cap)
        if self.admission is not None:
            self.admission.pause(model.endpoint, seconds, shorten(exc.message, 200))
        return seconds


def clamp(params: dict, cap: int | None) -> tuple[dict, dict | None]:
    """``params`` with each output budget above ``cap`` lowered to it, and what was lowered:
    ``{"param", "asked", "sent"}`` (the first budget of ``BUDGETS`` that was), or None when
    nothing was (no cap known, no budget asked, or one within the cap)."""
    if not cap:
        return params, None
    over = [k for k in BUDGETS if type(params.get(k)) is int and params[k] > cap]
    if not over:
        return params, None
    return dict(params, **{k: cap for k in over}), {
        "param": over[0],
        "asked": params[over[0]],
        "sent": cap,
    }


class SentCall:
    """A call sent by a set's own thread: its answer to read. Its slot, if any, is the
    upstream's to give back (``SlotRelease``), once it is done with the call."""

    __slots__ = ("chat", "endpoint", "index", "t0", "deadline", "tries")
    # set by the set that sent it (SeatSet._send): its unit's place, when it was sent, by
    # when it must end, and the tries it has left
    index: int
    t0: float
    deadline: float
    tries: Tries

    def __init__(self, chat, endpoint: Endpoint):
        self.chat, self.endpoint = chat, endpoint

    def answer(self):
        try:
            return self.chat.answer()
        except UpstreamError as exc:
            _named(exc, self.endpoint)
            raise

    def drop(self) -> None:
        self.chat.drop()


class SlotRelease:
    """Gives an admission slot back, once, from whichever thread calls it first: the upstream
    calls it when it is done with the call (``Upstream.chat``'s ``on_release``), which for a
    call cut before its answer is when the upstream ended it, not when the seat gave up. So a
    slot counts every call the upstream is still working on, and the upstream never sees more
    calls at once than ``max_concurrent``."""

    __slots__ = ("_slot", "_lock")

    def __init__(self, slot):
        self._slot, self._lock = slot, threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            slot, self._slot = self._slot, None
        if slot is not None:
            slot.__exit__(None, None, None)


def _named(exc: UpstreamError, endpoint: Endpoint) -> None:
    """Make ``exc`` name the endpoint, never its URL: callers read the endpoint's name."""
    text = named(exc.message, endpoint.base_url, endpoint.name)
    exc.message, exc.args = text, (text,)  # its class and fields stay as they were


def _left(call: SeatCall, deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise UpstreamTimeout(
            f"call {call.label} not made: its deadline passed while it "
            "waited; give the set more time or lower the load"
        )
    return left


def _hold(call: SeatCall, delay: float, cancel) -> None:
    """Wait ``delay`` seconds before a call's next attempt, unless its set is cancelled."""
    if delay > 0:
        waiter = cancel if cancel is not None else threading.Event()
        if waiter.wait(delay):
            raise Cancelled(f"call {call.label} cancelled while waiting to retry")


def _deadline(timeout: float | None, deadline: float | None) -> float:
    out = math.inf if deadline is None else deadline
    if timeout is not None:
        out = min(out, time.monotonic() + timeout)
    return out
