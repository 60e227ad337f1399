"""The seats core: a set of model calls run at once, each ending as a structured result.

Every caller that asks models (the gateway's panel, the race, the suite) describes its work as
``SeatCall``s (a label, a role, the roster ``Model``, messages, params) and hands them to one
``Seats``. It runs them in parallel (``start``) or one in the caller's thread (``ask``), through
admission and the upstream client, and logs each result with its role to the log it was given.
What is the caller's stays the caller's: the gateway's panel (``panel.py``) runs its seats as
one set and keeps seating, the reply and its records; it plugs in its evidence log (a sink with
``write(result)``), ``learn`` (cooldowns), ``scrub`` (image traces) and ``on_end`` (in-flight
holds, the last seat of a picked panel). The race and the suite ``ask`` call by call into their
own ``CallLog``s, so only the gateway's panels reach the evidence that seats panels.

Invariants:

* A call never raises: whatever happens (refused by admission, rate limited, timed out,
  cancelled, a bug) becomes the ``SeatResult``'s status (ok | tool_calls | empty | error |
  cancelled) with an error kind and message. Callers that want an exception ask for one
  (``SeatResult.check``).
* Every call ends by its deadline: the earlier of the set's deadline and, once admitted, the
  call's own ``timeout``. Waiting for admission counts against the set's deadline (and the call's
  ``wait``, when given), never against the model's own time, unless the call says
  ``wait_in_timeout`` (a gateway seat: its ``timeout`` runs from its start, the wait included).
* A set's results exist from its start (``SeatSet.results``, in call order) and each is filled
  in place as its call ends; ``on_end`` runs after the call is logged and before its result is
  handed over. A call stuck past the set's deadline (plus a grace) is handed over as a timeout;
  its own thread still logs it if it ever ends.
* Setting the set's cancel flag stops every call: those waiting for admission stop waiting,
  those in flight have their connection cut, those not begun are never sent.
* Each call is logged once, as it finishes, with one locked single-write append (``CallLog``):
  never its messages (they may be large and are the caller's to keep), always its role, status,
  tokens, time, attempts and the caller's own fields (``meta``).
* A rate limit that states a Retry-After pauses the endpoint in admission (so every process
  waits; at most ``max_pause`` seconds when the caller caps it); a call is tried again only
  when its ``retries`` allow, the failure is transient (rate limit, server error, connection)
  and the deadline leaves room.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol

from panelist.metrics.store import jsonl
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.errors import (Cancelled, EmptyAnswer, RateLimited, UpstreamError,
                                     UpstreamServerError, UpstreamTimeout, UpstreamUnreachable)
from panelist.metrics.ledger.index import ANSWERED
from panelist.metrics.store.jsonl import utc_iso
from panelist.metrics.roster.roster import Model, RosterView

STATUSES = ("ok", "tool_calls", "empty", "error", "cancelled")
TRANSIENT = (RateLimited, UpstreamServerError, UpstreamUnreachable)
BACKOFF = 1.0          # seconds before a retry when the upstream named no wait (doubles)
MAX_BACKOFF = 30.0
GRACE = 2.0            # seconds past a set's deadline before a stuck thread's call is given up


@dataclass(frozen=True)
class SeatCall:
    """One model call a caller wants made."""

    label: str                 # unique within its set: a call id, "run3.candidate", …
    role: str                  # member | explorer | merger | reference | candidate | judge | …
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
    meta: dict = field(default_factory=dict)

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

    def record(self) -> dict:
        """What the call log keeps: everything but the messages."""
        return {"label": self.label, "role": self.role, "alias": self.alias,
                "served": self.served, "endpoint": self.endpoint, "status": self.status,
                "text": self.text, "tool_calls": self.tool_calls,
                "finish_reason": self.finish_reason, "tokens": self.tokens,
                "seconds": self.seconds, "waited": self.waited, "attempts": self.attempts,
                "error_kind": self.error_kind, "error": self.error, **self.meta}

    def check(self) -> "SeatResult":
        """This result if answered; else raise ``CallFailed`` saying why."""
        if not self.answered:
            raise CallFailed(self)
        return self


class CallFailed(UpstreamError):
    """Raised by ``SeatResult.check`` when a call gave no answer; carries the result."""

    def __init__(self, result: SeatResult):
        kind = result.error_kind or result.status
        super().__init__(f"{result.role} call {result.label} to {result.alias} failed "
                         f"({kind}): {result.error or 'no answer'}")
        self.result = result
        self.kind = kind


class CallSink(Protocol):
    """Where results are logged: a ``CallLog``, or the gateway's ledger behind an adapter."""

    def write(self, result: SeatResult) -> None: ...


class CallLog:
    """``calls.jsonl`` of one run (``runs/races/<id>/``, ``runs/suite/…``): one line per call.

    Each line is a result's ``record()`` plus ``v`` (schema), ``kind: "call"`` and ``ts`` (UTC,
    when the call ended), appended under ``flock`` in one write (``jsonl.Appender``)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._appender = jsonl.Appender(self.path)

    def write(self, result: SeatResult) -> None:
        self._appender.append({"v": jsonl.SCHEMA, "kind": "call", "ts": utc_iso(time.time()),
                               **result.record()})

    def read(self) -> list[dict]:
        return [record for _, record in jsonl.Tail(self.path).read()]

    def close(self) -> None:
        self._appender.close()


class Admission(Protocol):
    """What the core needs of ``metrics.upstream.admission.Admission``: a slot per call and pauses.
    ``slot`` raises ``AtLimit`` when no slot comes within ``wait``, ``Cancelled`` when ``cancel``
    is set meanwhile: nothing else."""

    def slot(self, endpoint: str, model: str, *, wait: float,
             cancel: threading.Event | None = None): ...

    def pause(self, endpoint: str, seconds: float, why: str) -> None: ...


Learn = Callable[[Model, UpstreamError], None]
Scrub = Callable[[str], str]
OnEnd = Callable[["SeatResult"], None]


class Seats:
    """Makes model calls for one data folder; build one per server or race, ``close`` it after.

    ``roster``: anything with ``view() -> RosterView`` (endpoints are looked up at call time, so
    an edit of the roster applies to the next call). ``admission``: None means no limits."""

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
            if self._pool is None:   # made on first use: a caller of ``ask`` alone needs none
                self._pool = ThreadPoolExecutor(max_workers=self._max_workers,
                                                thread_name_prefix=self._prefix)
            return self._pool.submit(fn, *args, **kw)

    # -- a set -------------------------------------------------------------------------------------
    def start(self, calls: Iterable[SeatCall], *, timeout: float,
              cancel: threading.Event | None = None, log: CallSink | None = None,
              learn: Learn | None = None, scrub: Scrub | None = None,
              on_end: OnEnd | None = None, max_pause: float | None = None) -> "SeatSet":
        """Start every call at once; the set's deadline is ``timeout`` seconds from now.

        ``on_end(result)`` runs on the call's thread once the call is logged and before its
        result is handed over (the gateway releases the seat's in-flight hold there, and the
        last seat of a picked panel records it); ``max_pause`` caps the pause a stated
        Retry-After puts on an endpoint."""
        return SeatSet(self, list(calls), time.monotonic() + timeout,
                       cancel if cancel is not None else CancelFlag(), log, learn, scrub,
                       on_end, max_pause)

    def run(self, calls: Iterable[SeatCall], *, timeout: float, **kw) -> list[SeatResult]:
        """``start`` and wait: every result, in the order the calls were given."""
        return self.start(calls, timeout=timeout, **kw).wait()

    # -- one call ----------------------------------------------------------------------------------
    def ask(self, call: SeatCall, *, deadline: float, cancel: threading.Event | None = None,
            log: CallSink | None = None, learn: Learn | None = None,
            scrub: Scrub | None = None, max_pause: float | None = None,
            result: SeatResult | None = None) -> SeatResult:
        """Make one call in this thread, by ``deadline`` (``time.monotonic()``); never raises.

        ``learn(model, error)`` hears every upstream failure (the gateway cools models down);
        ``scrub(text)`` cleans an error's text before anyone sees it (the gateway hides image
        URLs an upstream may echo); ``max_pause`` caps a Retry-After's pause of the endpoint.
        ``result`` (as ``SeatResult.of(call)`` made it) is filled in place of a new one, so whoever
        holds it sees the call end."""
        result = result if result is not None else SeatResult.of(call)
        learn = learn if learn is not None else self.learn
        t0 = time.monotonic()
        if call.wait_in_timeout:
            deadline = min(deadline, t0 + call.timeout)
        try:
            self._attempts(call, result, deadline, cancel, learn, max_pause)
        except EmptyAnswer as exc:
            result.status, result.error_kind, result.error = "empty", exc.kind, exc.message
        except UpstreamError as exc:
            result.status = "cancelled" if exc.kind == "cancelled" else "error"
            result.error_kind, result.error = exc.kind, exc.message
        except Exception as exc:  # a bug in one call must not fail its set
            result.status, result.error_kind = "error", "internal"
            result.error = f"{type(exc).__name__}: {exc}"
        result.seconds = round(time.monotonic() - t0, 3)
        result.waited = round(result.waited, 3)
        if scrub is not None and result.error:
            result.error = scrub(result.error)
        if log is not None:
            try:
                log.write(result)
            except Exception as exc:   # a full disk or a broken sink loses the line, not the answer
                result.meta.setdefault("log_error", f"{type(exc).__name__}: {exc}")
        return result

    def _attempts(self, call: SeatCall, result: SeatResult, deadline: float, cancel,
                  learn: Learn | None, max_pause: float | None) -> None:
        backoff = BACKOFF
        while True:
            result.attempts += 1
            try:
                answer = self._attempt(call, result, deadline, cancel)
            except TRANSIENT as exc:
                pause = self._pause(call.model, exc, max_pause)   # first: every caller waits
                if learn is not None:
                    learn(call.model, exc)
                if result.attempts > call.retries:
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
                raise
            result.status = "tool_calls" if answer.tool_calls else "ok"
            result.answer, result.tokens = answer.text, answer.tokens or {}
            result.tool_calls, result.finish_reason = answer.tool_calls, answer.finish_reason
            return

    def _attempt(self, call: SeatCall, result: SeatResult, deadline: float, cancel):
        model = call.model
        view: RosterView = self.roster.view()
        endpoint = view.endpoints.get(model.endpoint)
        if endpoint is None:
            raise UpstreamError(f"endpoint '{model.endpoint}' of {model.alias} is gone from the "
                                "roster; add the endpoint back, or use another model")
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"call {call.label} not made: its set was cancelled")
        body = dict(call.params, model=model.served, messages=call.messages)
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
            return self.upstream.chat(endpoint.base_url, endpoint.api_key(), body,
                                      timeout=min(call.timeout, left), cancel=cancel)

    def _pause(self, model: Model, exc: UpstreamError, cap: float | None) -> float | None:
        """A stated Retry-After: the endpoint pauses for everyone; returns the seconds."""
        seconds = getattr(exc, "retry_after", None)
        if not isinstance(exc, RateLimited) or not seconds or seconds <= 0:
            return None
        if cap is not None:   # a Retry-After of a year must not stop an endpoint for a year
            seconds = min(seconds, cap)
        if self.admission is not None:
            self.admission.pause(model.endpoint, seconds, exc.message[:200])
        return seconds


class SeatSet:
    """A set of calls in flight; results are handed over in the order they finish."""

    def __init__(self, seats: Seats, calls: list[SeatCall], deadline: float,
                 cancel: threading.Event, log: CallSink | None, learn: Learn | None,
                 scrub: Scrub | None, on_end: OnEnd | None = None,
                 max_pause: float | None = None):
        labels = [c.label for c in calls]
        if len(set(labels)) != len(labels):
            raise ValueError("every call of a set needs its own label; "
                             f"repeated: {sorted({x for x in labels if labels.count(x) > 1})}")
        self.calls, self.deadline, self.cancel = calls, deadline, cancel
        self._finished: queue.SimpleQueue[tuple[int, SeatResult]] = queue.SimpleQueue()
        self._unreported = set(range(len(calls)))
        # one result per call from the start, each filled in place as its call ends
        self.results = [SeatResult.of(call) for call in calls]
        kw = {"log": log, "learn": learn, "scrub": scrub, "max_pause": max_pause}
        for i, call in enumerate(calls):
            seats.submit(self._run, seats, i, call, kw, on_end)

    def _run(self, seats: Seats, i: int, call: SeatCall, kw: dict, on_end) -> None:
        result = seats.ask(call, deadline=self.deadline, cancel=self.cancel,
                           result=self.results[i], **kw)   # never raises
        try:
            if on_end is not None:
                on_end(result)
        finally:   # handed over whatever happened, so nobody waits for the deadline
            self._finished.put((i, result))

    @property
    def settled(self) -> bool:
        """Whether every result has been handed over (or given up by ``progress``)."""
        return not self._unreported

    def progress(self, tick: float = 0.25) -> Iterator[SeatResult | None]:
        """Yield each result once, as its call finishes, and None every ``tick`` seconds while
        calls still run (so the caller can check on its client). A call stuck past the deadline
        (plus a grace) is given up as a timeout; it is logged by its own thread if it ever ends."""
        while self._unreported:
            left = self.deadline + GRACE - time.monotonic()
            if left <= 0:
                break
            try:
                i, result = self._finished.get(timeout=min(tick, left))
            except queue.Empty:
                yield None
                continue
            if i in self._unreported:
                self._unreported.discard(i)
                yield result
        for i in sorted(self._unreported):
            self._unreported.discard(i)
            result = self.results[i]
            result.status, result.error_kind = "error", "timeout"
            result.error = "the call did not finish by its set's deadline"
            yield result

    def wait(self) -> list[SeatResult]:
        """Every result, in the order the calls were given."""
        for _ in self.progress():
            pass
        return list(self.results)

    def abandon(self) -> None:
        """Stop every call still waiting or running; they end as ``cancelled``."""
        self.cancel.set()
