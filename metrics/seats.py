"""The seats core: the one fan-out. A set of model calls runs at once; each ends as a result.

Every caller that asks models describes its work as ``SeatCall``s (a label, a role, the roster
``Model``, messages, params) and hands them to ``Seats.start`` (results as they land) or
``Seats.run`` (every result, in call order): the gateway's panel (its seats, its merger), the
decider, the race (its reference, candidates and judge), the suite, health's probes and the
dashboard's endpoint Test. Work that makes calls of its own between other code (a race's run:
the job's code and its tool loop; a judgement asked again when unusable) is a ``SeatJob`` of a
set, and its calls are sets of their own. The core never writes a log of its own choosing: the
caller hands it the log to write (``log``: an object with ``write(result)`` or a callable), and
builds its lines with ``metrics.seatrecord``. What is the caller's stays the caller's: the panel
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
* A call given ``on_delta`` is streamed: the listener hears each piece of the answer's text as
  it arrives (on the call's thread), and the result is the whole answer all the same.
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
import queue
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Protocol, Union

from panelist.metrics.plaintext import shorten
from panelist.metrics.upstream.client import Upstream, encode_messages
from panelist.metrics.upstream.transport import CancelFlag, named
from panelist.metrics.errors import (Cancelled, EmptyAnswer, OutputCapExceeded, RateLimited,
                                     UpstreamError, UpstreamServerError, UpstreamTimeout,
                                     UpstreamUnreachable)
from panelist.metrics.roster.roster import Endpoint, Model, RosterView

STATUSES = ("ok", "tool_calls", "empty", "error", "cancelled")
ANSWERED = frozenset({"ok", "tool_calls"})
TRANSIENT = (RateLimited, UpstreamServerError, UpstreamUnreachable)
BACKOFF = 1.0          # seconds before a retry when the upstream named no wait (doubles)
MAX_BACKOFF = 30.0
GRACE = 2.0            # seconds past a set's deadline (or cancel) before a stuck unit is given up
BUDGETS = ("max_tokens", "max_completion_tokens")   # the output budgets of a chat body


@dataclass(frozen=True)
class SeatCall:
    """One model call a caller wants made."""

    label: str                 # unique within its set: a call id, "run3.candidate", …
    role: str                  # one of ``seatrecord.ROLES``: member, candidate, judge, probe, …
    model: Model
    messages: list
    params: dict = field(default_factory=dict)   # everything else in the body (tools, …)
    timeout: float = 120.0     # seconds the model may take once the call is admitted
    wait: float | None = None  # seconds it may wait for admission (None: up to the deadline)
    # True: ``timeout`` runs from the call's start and covers its wait for admission too (the
    # gateway's seat deadline); False: it starts once the call is admitted
    wait_in_timeout: bool = False
    retries: int = 0           # further attempts after a transient failure
    meta: dict = field(default_factory=dict)     # the caller's fields, logged with the result
    # where to send it when its endpoint is not on the roster (yet): the dashboard's Test of an
    # endpoint being added; None: the roster's endpoint of ``model``, looked up at call time
    endpoint: Endpoint | None = None
    # hears each piece of the answer's text as it arrives (the call is then streamed upstream,
    # and tried once: a second try would repeat what the listener already has)
    on_delta: Callable[[str], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SeatJob:
    """Work of a caller run as one unit of a set: code that makes its own calls (``Seats.run``)
    between other steps. ``work()``'s return is its ``JobResult.value``; what it raises, its
    ``exception``."""

    label: str
    work: Callable[[], object]
    lane: str = ""             # jobs of one lane share the set's ``parallel``


@dataclass
class SeatResult:
    """How one call ended. ``call`` is its call id (the ``SeatCall``'s label), ``seat`` its role
    and ``answer`` its text; ``label``, ``role`` and ``text`` read the same fields under the
    ``SeatCall``'s names. ``error`` is the message alone, ``error_kind`` its kind; ``reason``
    joins them as one line."""

    call: str
    seat: str
    alias: str
    served: str
    endpoint: str = ""
    status: str = "error"       # one of STATUSES
    answer: str = ""
    tool_calls: list = field(default_factory=list)
    finish_reason: str = ""
    tokens: dict = field(default_factory=dict)   # {"prompt", "completion", "total"}
    seconds: float = 0.0        # from the call's start to its end, waiting included
    waited: float = 0.0         # of which waiting for admission
    error_kind: str = ""        # the client's kind (rate_limit, timeout, …), at_limit, internal
    error: str = ""
    attempts: int = 0
    # an output budget sent lower than asked: {"param", "asked", "sent"} (see ``clamp``)
    clamped: dict | None = None
    meta: dict = field(default_factory=dict)
    # the error the call ended with, for a caller that raises it again (the endpoint Test)
    raised: BaseException | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, call: SeatCall) -> "SeatResult":
        m = call.model
        return cls(call=call.label, seat=call.role, alias=m.alias, served=m.served,
                   endpoint=m.endpoint, meta=dict(call.meta) if call.meta else {})

    @property
    def label(self) -> str:
        return self.call

    @property
    def role(self) -> str:
        return self.seat

    @property
    def text(self) -> str:
        return self.answer

    @property
    def answered(self) -> bool:
        return self.status in ANSWERED

    @property
    def reason(self) -> str:
        """The error as one line: ``kind: message`` (an empty answer's message says so itself,
        and an error given without a kind, as a seat read back from a reply, is kept whole)."""
        if self.error_kind and self.status != "empty":
            return f"{self.error_kind}: {self.error}"
        return self.error

    def check(self) -> "SeatResult":
        """This result if answered; else raise ``CallFailed`` saying why."""
        if not self.answered:
            raise CallFailed(self)
        return self


@dataclass
class JobResult:
    """How one ``SeatJob`` ended: ``ok`` (``value`` is what it returned), ``error`` (it raised
    ``exception``, or was given up at the set's deadline: ``error_kind`` ``timeout``) or
    ``cancelled`` (never begun, or given up after the set's cancel)."""

    label: str
    status: str = "error"
    value: object = None
    exception: BaseException | None = None
    error_kind: str = ""        # raised | timeout | cancelled
    error: str = ""
    seconds: float = 0.0
    begun: bool = False         # its work was started (a job never begun did nothing)

    @property
    def answered(self) -> bool:
        return self.status == "ok"


Unit = Union[SeatCall, SeatJob]
Result = Union[SeatResult, JobResult]


class CallFailed(UpstreamError):
    """Raised by ``SeatResult.check`` when a call gave no answer; carries the result."""

    def __init__(self, result: SeatResult):
        kind = result.error_kind or result.status
        super().__init__(f"{result.role} call {result.label} to {result.alias} failed "
                         f"({kind}): {result.error or 'no answer'}")
        self.result = result
        self.kind = kind


class CallSink(Protocol):
    """Where results are logged: ``seatrecord.CallLog``, the suite's samples, the gateway's
    ledger behind an adapter (or any callable taking the result)."""

    def write(self, result: SeatResult) -> None: ...


class Admission(Protocol):
    """What the core needs of ``metrics.upstream.admission.Admission``: slots and pauses.
    ``slot`` raises ``AtLimit`` when no slot comes within ``wait``, ``Cancelled`` when ``cancel``
    is set meanwhile: nothing else."""

    def slot(self, endpoint: str, model: str, *, wait: float,
             cancel: threading.Event | None = None): ...

    def pause(self, endpoint: str, seconds: float, why: str) -> None: ...


Learn = Callable[[Model, UpstreamError], None]
Scrub = Callable[[str], str]
OnEnd = Callable[[Result], None]
Write = Callable[[SeatResult], None]


@dataclass(frozen=True)
class _Hooks:
    """What a set's calls share besides their deadline and cancel flag."""

    write: Write | None = None
    learn: Learn | None = None
    scrub: Scrub | None = None
    on_end: OnEnd | None = None
    max_pause: float | None = None
    encoded: "_Encoded" = field(default_factory=lambda: _Encoded())
    meter: object = None   # the memory budget large answers are charged to (Upstream.chat)


class _Encoded:
    """The messages of a set's calls, each distinct list encoded once: the seats of a panel
    share one list, so a 20 MB prompt is held once for all of them, not once per seat."""

    def __init__(self):
        self._lock = threading.Lock()
        self._done: dict[int, tuple[list, bytes]] = {}   # id(list) -> (the list, its JSON)

    def of(self, messages: list) -> bytes:
        with self._lock:
            known = self._done.get(id(messages))
            if known is not None and known[0] is messages:   # the list held: its id is its own
                return known[1]
        data = encode_messages(messages)   # outside the lock: seats never wait on each other
        with self._lock:
            self._done[id(messages)] = (messages, data)
        return data


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

    def __init__(self, roster, upstream: Upstream | None = None, *, admission=None,
                 max_workers: int = 256, thread_name: str = "seats",
                 learn: Learn | None = None):
        """``learn``: hears the failures of calls given no ``learn`` of their own."""
        self.roster = roster
        self.learn = learn
        self.upstream = upstream or Upstream()
        self._own_upstream = upstream is None
        self.admission = admission
        self._max_workers, self._prefix = max_workers, thread_name
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._own_upstream:
            self.upstream.close()

    def submit(self, fn, *args, **kw):
        """Run ``fn`` on the core's threads (a caller's follow-up, such as a merge); a Future."""
        with self._pool_lock:
            if self._pool is None:   # made on first use: a caller of one call at a time needs none
                self._pool = ThreadPoolExecutor(max_workers=self._max_workers,
                                                thread_name_prefix=self._prefix)
            return self._pool.submit(fn, *args, **kw)

    # -- the one entry ----------------------------------------------------------------------------
    def start(self, units: Iterable[Unit], *, timeout: float | None = None,
              deadline: float | None = None, cancel: threading.Event | None = None,
              log=None, learn: Learn | None = None, scrub: Scrub | None = None,
              on_end: OnEnd | None = None, max_pause: float | None = None,
              parallel: int | None = None, grace: float = GRACE, meter=None) -> "SeatSet":
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
        holds the answers (a call past it ends with kind ``memory``)."""
        return SeatSet(self, list(units), _deadline(timeout, deadline),
                       cancel if cancel is not None else CancelFlag(),
                       _Hooks(_writer(log), learn, scrub, on_end, max_pause, meter=meter),
                       parallel, grace)

    def run(self, units: Iterable[Unit], *, timeout: float | None = None,
            deadline: float | None = None, cancel: threading.Event | None = None, log=None,
            learn: Learn | None = None, scrub: Scrub | None = None,
            on_end: OnEnd | None = None, max_pause: float | None = None,
            parallel: int | None = None, grace: float = GRACE, meter=None) -> list[Result]:
        """``start`` and wait: every result, in the order the units were given. A set of one
        (and no ``parallel``) runs in this thread: one call costs no thread of the core's."""
        units = list(units)
        hooks = _Hooks(_writer(log), learn, scrub, on_end, max_pause, meter=meter)
        if len(units) != 1 or parallel is not None:
            return SeatSet(self, units, _deadline(timeout, deadline),
                           cancel if cancel is not None else CancelFlag(), hooks, parallel,
                           grace).wait()
        unit = units[0]
        result = SeatResult.of(unit) if isinstance(unit, SeatCall) else JobResult(unit.label)
        self._perform(unit, result, _deadline(timeout, deadline), cancel, hooks)
        return [result]

    def _perform(self, unit: Unit, result: Result, deadline: float, cancel,
                 hooks: _Hooks) -> None:
        """Run one unit to its end, filling ``result`` in place; never raises."""
        if isinstance(unit, SeatCall):
            self._ask(unit, result, deadline, cancel, hooks)
        else:
            _work(unit, result, cancel)
        if hooks.on_end is not None:
            hooks.on_end(result)

    # -- one call ----------------------------------------------------------------------------------
    def _ask(self, call: SeatCall, result: SeatResult, deadline: float, cancel,
             hooks: _Hooks) -> None:
        """Make one call in this thread by its deadline (see the module docstring)."""
        learn = hooks.learn if hooks.learn is not None else self.learn
        t0 = time.monotonic()
        deadline = min(deadline, _own_deadline(call, t0, deadline))
        try:
            self._attempts(call, result, deadline, cancel, learn, hooks)
        except EmptyAnswer as exc:
            result.status, result.error_kind, result.error = "empty", exc.kind, exc.message
            result.raised = exc
        except UpstreamError as exc:
            result.status = "cancelled" if exc.kind == "cancelled" else "error"
            result.error_kind, result.error, result.raised = exc.kind, exc.message, exc
        except Exception as exc:  # a bug in one call must not fail its set
            result.status, result.error_kind = "error", "internal"
            result.error, result.raised = f"{type(exc).__name__}: {exc}", exc
        result.seconds = round(time.monotonic() - t0, 3)
        result.waited = round(result.waited, 3)
        if hooks.scrub is not None and result.error:
            result.error = hooks.scrub(result.error)
        if hooks.write is not None:
            try:
                hooks.write(result)
            except Exception as exc:   # a full disk or a broken sink loses the line, not the answer
                result.meta.setdefault("log_error", f"{type(exc).__name__}: {exc}")

    def _attempts(self, call: SeatCall, result: SeatResult, deadline: float, cancel,
                  learn: Learn | None, hooks: _Hooks) -> None:
        backoff = BACKOFF
        cap = call.model.max_output
        corrected = 0   # attempts sent again within a cap a refusal stated: not retries
        while True:
            result.attempts += 1
            try:
                answer = self._attempt(call, result, deadline, cancel, hooks, cap)
            except TRANSIENT as exc:
                pause = self._pause(call.model, exc, hooks.max_pause)   # first: all wait
                if learn is not None:
                    learn(call.model, exc)
                # a streamed call is never tried again: its pieces may have gone out
                if result.attempts - corrected > call.retries or call.on_delta is not None:
                    raise
                delay = pause if pause is not None else backoff
                backoff = min(backoff * 2, MAX_BACKOFF)
                if time.monotonic() + delay >= deadline:
                    raise   # no room left to try again
                if pause is None or self.admission is None:
                    # with admission, the pause itself holds the next attempt back
                    waiter = cancel if cancel is not None else threading.Event()
                    if waiter.wait(delay):
                        raise Cancelled(f"call {call.label} cancelled while waiting to retry")
                continue
            except UpstreamError as exc:
                if learn is not None:
                    learn(call.model, exc)
                stated = exc.max_output if isinstance(exc, OutputCapExceeded) else None
                if stated and (cap is None or stated < cap) and \
                        clamp(call.params, stated)[1] is not None and \
                        time.monotonic() < deadline:
                    cap, corrected = stated, corrected + 1
                    continue
                raise
            result.status = "tool_calls" if answer.tool_calls else "ok"
            result.answer, result.tokens = answer.text, answer.tokens or {}
            result.tool_calls, result.finish_reason = answer.tool_calls, answer.finish_reason
            return

    def _attempt(self, call: SeatCall, result: SeatResult, deadline: float, cancel,
                 hooks: _Hooks, cap: int | None):
        model = call.model
        endpoint = call.endpoint
        if endpoint is None:
            view: RosterView = self.roster.view()
            endpoint = view.endpoints.get(model.endpoint)
        if endpoint is None:
            raise UpstreamError(f"endpoint '{model.endpoint}' of {model.alias} is gone from the "
                                "roster; add the endpoint back, or use another model")
        key = self.roster.api_key(endpoint)   # KeyRefused before any slot or byte is taken
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"call {call.label} not made: its set was cancelled")
        params, result.clamped = clamp(call.params, cap)
        body = dict(params, model=model.served, messages=call.messages)
        with ExitStack() as held:
            if self.admission is not None:
                left = deadline - time.monotonic()
                wait = max(0.0, left if call.wait is None else min(call.wait, left))
                w0 = time.monotonic()
                try:   # no slot within the wait is AtLimit; a cancelled wait is Cancelled
                    held.enter_context(self.admission.slot(endpoint.name, model.alias, wait=wait,
                                                           cancel=cancel))
                finally:
                    result.waited += time.monotonic() - w0
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamTimeout(f"call {call.label} not made: its deadline passed while it "
                                      "waited; give the set more time or lower the load")
            extra = {} if call.on_delta is None else {"on_delta": call.on_delta}
            if hooks.meter is not None:   # an upstream of another kind (onboarding's) has none
                extra["meter"] = hooks.meter
            try:
                return self.upstream.chat(endpoint.base_url, key, body,
                                          timeout=min(call.timeout, left), cancel=cancel,
                                          messages_json=hooks.encoded.of(call.messages),
                                          **extra)
            except UpstreamError as exc:   # callers read the endpoint's name, never its URL
                text = named(exc.message, endpoint.base_url, endpoint.name)
                exc.message, exc.args = text, (text,)   # its class and fields stay as they were
                raise

    def _pause(self, model: Model, exc: UpstreamError, cap: float | None) -> float | None:
        """A stated Retry-After: the endpoint pauses for everyone; returns the seconds."""
        seconds = getattr(exc, "retry_after", None)
        if not isinstance(exc, RateLimited) or not seconds or seconds <= 0:
            return None
        if cap is not None:   # a Retry-After of a year must not stop an endpoint for a year
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
    return dict(params, **{k: cap for k in over}), {"param": over[0],
                                                     "asked": params[over[0]], "sent": cap}


def _deadline(timeout: float | None, deadline: float | None) -> float:
    out = math.inf if deadline is None else deadline
    if timeout is not None:
        out = min(out, time.monotonic() + timeout)
    return out


def _own_deadline(call: SeatCall, t0: float, deadline: float) -> float:
    """The latest a call may end by its own limits, from its start ``t0``."""
    if call.wait_in_timeout:
        return t0 + call.timeout
    if call.wait is not None:
        return t0 + call.wait + call.timeout
    if deadline == math.inf:   # no wait of its own and no set deadline: it waits its timeout
        return t0 + 2 * call.timeout
    return math.inf


def _work(job: SeatJob, result: JobResult, cancel) -> None:
    t0 = time.monotonic()
    if cancel is not None and cancel.is_set():
        result.status, result.error_kind = "cancelled", "cancelled"
        result.error = f"{job.label} not begun: its set was cancelled"
        return
    result.begun = True
    try:
        result.value = job.work()
        result.status = "ok"
    except Exception as exc:   # the job's own failure is its result, never its set's
        result.status, result.error_kind, result.exception = "error", "raised", exc
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = round(time.monotonic() - t0, 3)


class SeatSet:
    """A set of units in flight; results are handed over in the order they finish. Iterating
    the set yields each result as it lands (``progress`` also yields None every tick)."""

    def __init__(self, seats: Seats, units: list[Unit], deadline: float,
                 cancel: threading.Event, hooks: _Hooks, parallel: int | None = None,
                 grace: float = GRACE):
        labels = [u.label for u in units]
        if len(set(labels)) != len(labels):
            raise ValueError("every call of a set needs its own label; "
                             f"repeated: {sorted({x for x in labels if labels.count(x) > 1})}")
        if parallel is not None and parallel < 1:
            raise ValueError(f"parallel must be at least 1, not {parallel!r}")
        self._seats, self._hooks = seats, hooks
        self.deadline, self.cancel, self.grace = deadline, cancel, grace
        self._parallel = parallel
        self.units: list[Unit] = []
        # one result per unit from the start, each filled in place as its unit ends
        self.results: list[Result] = []
        self._labels: set[str] = set()
        self._finished: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._unreported: set[int] = set()
        self._lock = threading.Lock()   # guards the lanes and the units' list
        self._running: dict[str, int] = {}
        self._held: dict[str, deque[int]] = {}
        self._cancelled_at: float | None = None
        for unit in units:
            self.add(unit)

    def add(self, unit: Unit) -> Result:
        """One more unit, started as the set's ``parallel`` allows; its result (filled in place).
        The set's iteration then waits for it too."""
        result = SeatResult.of(unit) if isinstance(unit, SeatCall) else JobResult(unit.label)
        lane = unit.model.endpoint if isinstance(unit, SeatCall) else unit.lane
        with self._lock:
            if unit.label in self._labels:
                raise ValueError(f"every call of a set needs its own label; repeated: "
                                 f"{unit.label!r}")
            self._labels.add(unit.label)
            i = len(self.units)
            self.units.append(unit)
            self.results.append(result)
            self._unreported.add(i)
            now = self._parallel is None or self._running.get(lane, 0) < self._parallel
            if now:
                self._running[lane] = self._running.get(lane, 0) + 1
            else:
                self._held.setdefault(lane, deque()).append(i)
        if now:
            self._seats.submit(self._run, i, lane)
        return result

    def _run(self, i: int | None, lane: str) -> None:
        # a lane's slot drains its lane on this thread: the next unit held back starts here
        while i is not None:
            try:
                self._seats._perform(self.units[i], self.results[i], self.deadline, self.cancel,
                                     self._hooks)   # never raises but for a broken on_end
            finally:   # handed over whatever happened, so nobody waits for the deadline
                self._finished.put(i)
                i = self._next(lane)

    def _next(self, lane: str) -> int | None:
        """A unit of ``lane`` ended: the next one held back, to begin now (none once the set is
        cancelled: those are dropped)."""
        if self._parallel is None:
            return None
        with self._lock:
            held = self._held.get(lane)
            if held and not self.cancel.is_set():
                return held.popleft()
            self._running[lane] -= 1
        if self.cancel.is_set():
            self._drop_held()
        return None

    def _drop_held(self) -> None:
        """The set was cancelled: units held back are never begun (nor sent, nor logged)."""
        with self._lock:
            dropped = [i for held in self._held.values() for i in held]
            for held in self._held.values():
                held.clear()
        for i in dropped:
            result = self.results[i]
            result.status, result.error_kind = "cancelled", "cancelled"
            result.error = f"{self.units[i].label} not begun: its set was cancelled"
            self._finished.put(i)

    @property
    def settled(self) -> bool:
        """Whether every result has been handed over (or given up by ``progress``)."""
        return not self._unreported

    def __iter__(self) -> Iterator[Result]:
        return (r for r in self.progress() if r is not None)

    def progress(self, tick: float = 0.25) -> Iterator[Result | None]:
        """Yield each result once, as its unit finishes, and None every ``tick`` seconds while
        units still run (so the caller can check on its client or its cancel). A unit stuck past
        the deadline, or past the set's cancel, plus the grace is given up (a timeout, or
        cancelled); a call of it is logged by its own thread if it ever ends. Called again, it
        yields only what it has not yielded yet."""
        while self._unreported:
            end = self.deadline
            if self.cancel.is_set():
                if self._cancelled_at is None:
                    self._cancelled_at = time.monotonic()
                    self._drop_held()
                end = min(end, self._cancelled_at)
            left = end + self.grace - time.monotonic()
            if left <= 0:
                break
            try:
                i = self._finished.get(timeout=min(tick, left))
            except queue.Empty:
                yield None
                continue
            if i in self._unreported:
                self._unreported.discard(i)
                yield self.results[i]
        for i in sorted(self._unreported):
            self._unreported.discard(i)
            yield self._given_up(self.results[i])

    def _given_up(self, result: Result) -> Result:
        if self._cancelled_at is not None:
            result.status, result.error_kind = "cancelled", "cancelled"
            result.error = f"it did not stop within {self.grace:g} s of its set's cancel"
        else:
            result.status, result.error_kind = "error", "timeout"
            result.error = "the call did not finish by its set's deadline"
        return result

    def wait(self) -> list[Result]:
        """Every result, in the order the units were given."""
        for _ in self.progress():
            pass
        return list(self.results)

    def abandon(self) -> None:
        """Stop every unit still waiting or running; they end as ``cancelled``."""
        self.cancel.set()
