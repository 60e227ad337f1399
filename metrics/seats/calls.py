"""What the seats core is given and hands back: a ``SeatCall`` (one model call) or a ``SeatJob``
(a caller's work run as a unit of a set), and how each ended (``SeatResult``, ``JobResult``), with
the small rules both the core (``core.py``) and its sets (``seatset.py``) apply to them: how a
failure becomes a result, a call's own deadline, where its attempts stand, how it is logged."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Union

from panelist.metrics.errors import (
    EmptyAnswer,
    RateLimited,
    UpstreamError,
    UpstreamServerError,
    UpstreamUnreachable,
)
from panelist.metrics.roster.roster import Endpoint, Model

STATUSES = ("ok", "tool_calls", "empty", "error", "cancelled")
ANSWERED = frozenset({"ok", "tool_calls"})
TRANSIENT = (RateLimited, UpstreamServerError, UpstreamUnreachable)
BACKOFF = 1.0  # seconds before a retry when the upstream named no wait (doubles)
MAX_BACKOFF = 30.0
GRACE = 2.0  # seconds past a set's deadline (or cancel) before a stuck unit is given up
BUDGETS = ("max_tokens", "max_completion_tokens")  # the output budgets of a chat body


@dataclass(frozen=True)
class SeatCall:
    """One model call a caller wants made."""

    label: str  # unique within its set: a call id, "run3.candidate", …
    role: str  # one of ``record.ROLES``: member, candidate, judge, probe, …
    model: Model
    messages: list
    params: dict = field(default_factory=dict)  # everything else in the body (tools, …)
    timeout: float = 120.0  # seconds the model may take once the call is admitted
    wait: float | None = None  # seconds it may wait for admission (None: up to the deadline)
    # True: ``timeout`` runs from the call's start and covers its wait for admission too (the
    # gateway's seat deadline); False: it starts once the call is admitted
    wait_in_timeout: bool = False
    retries: int = 0  # further attempts after a transient failure
    meta: dict = field(default_factory=dict)  # the caller's fields, logged with the result
    # where to send it when its endpoint is not on the roster (yet): the dashboard's Test of an
    # endpoint being added; None: the roster's endpoint of ``model``, looked up at call time
    endpoint: Endpoint | None = None
    # hears each piece of the answer's text as it arrives (the call is then streamed upstream,
    # and tried once: a second try would repeat what the listener already has)
    on_delta: Callable[[str], None] | None = field(default=None, compare=False)
    # cuts this call alone, as its set's cancel cuts them all (a stream's stalled answer); a
    # ``transport.CancelFlag``, heard in a set whose own cancel is one too (the core makes one
    # when given none; a panel's is one)
    stop: threading.Event | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SeatJob:
    """Work of a caller run as one unit of a set: code that makes its own calls (``Seats.run``)
    between other steps. ``work()``'s return is its ``JobResult.value``; what it raises, its
    ``exception``."""

    label: str
    work: Callable[[], object]
    lane: str = ""  # jobs of one lane share the set's ``parallel``


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
    status: str = "error"  # one of STATUSES
    answer: str = ""
    tool_calls: list = field(default_factory=list)
    finish_reason: str = ""
    tokens: dict = field(default_factory=dict)  # {"prompt", "completion", "total"}
    seconds: float = 0.0  # from the call's start to its end, waiting included
    waited: float = 0.0  # of which waiting for admission
    error_kind: str = ""  # the client's kind (rate_limit, timeout, …), at_limit, internal
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
        return cls(
            call=call.label,
            seat=call.role,
            alias=m.alias,
            served=m.served,
            endpoint=m.endpoint,
            meta=dict(call.meta) if call.meta else {},
        )

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
    error_kind: str = ""  # raised | timeout | cancelled
    error: str = ""
    seconds: float = 0.0
    begun: bool = False  # its work was started (a job never begun did nothing)

    @property
    def answered(self) -> bool:
        return self.status == "ok"


Unit = Union[SeatCall, SeatJob]
Result = Union[SeatResult, JobResult]


class CallFailed(UpstreamError):
    """Raised by ``SeatResult.check`` when a call gave no answer; carries the result."""

    def __init__(self, result: SeatResult):
        kind = result.error_kind or result.status
        super().__init__(
            f"{result.role} call {result.label} to {result.alias} failed "
            f"({kind}): {result.error or 'no answer'}"
        )
        self.result = result
        self.kind = kind


class CallSink(Protocol):
    """Where results are logged: ``record.CallLog``, the suite's samples, the gateway's
    ledger behind an adapter (or any callable taking the result)."""

    def write(self, result: SeatResult) -> None: ...


class Admission(Protocol):
    """What the core needs of ``metrics.upstream.admission.Admission``: slots and pauses.
    ``slot`` raises ``AtLimit`` when no slot comes within ``wait``, ``Cancelled`` when ``cancel``
    is set meanwhile: nothing else."""

    def slot(
        self, endpoint: str, model: str, *, wait: float, cancel: threading.Event | None = None
    ): ...

    def pause(self, endpoint: str, seconds: float, why: str) -> None: ...


Learn = Callable[[Model, UpstreamError], None]
Scrub = Callable[[str], str]
OnEnd = Callable[[Result], None]
Write = Callable[[SeatResult], None]


class Tries:
    """Where a call's attempts stand: the output cap it is sent within, the corrections sent
    (which are not retries), the wait before the next retry."""

    __slots__ = ("cap", "corrected", "backoff")

    def __init__(self, call: SeatCall):
        self.cap, self.corrected, self.backoff = call.model.max_output, 0, BACKOFF


def answered(result: SeatResult, answer) -> None:
    result.status = "tool_calls" if answer.tool_calls else "ok"
    result.answer, result.tokens = answer.text, answer.tokens or {}
    result.tool_calls, result.finish_reason = answer.tool_calls, answer.finish_reason


def failed(result: SeatResult, exc: Exception) -> None:
    if isinstance(exc, EmptyAnswer):
        result.status, result.error_kind, result.error = "empty", exc.kind, exc.message
    elif isinstance(exc, UpstreamError):
        result.status = "cancelled" if exc.kind == "cancelled" else "error"
        result.error_kind, result.error = exc.kind, exc.message
    else:
        result.status, result.error_kind = "error", "internal"
        result.error = f"{type(exc).__name__}: {exc}"
    result.raised = exc


def own_deadline(call: SeatCall, t0: float, deadline: float) -> float:
    """The latest a call may end by its own limits, from its start ``t0``."""
    if call.wait_in_timeout:
        return t0 + call.timeout
    if call.wait is not None:
        return t0 + call.wait + call.timeout
    if deadline == math.inf:  # no wait of its own and no set deadline: it waits its timeout
        return t0 + 2 * call.timeout
    return math.inf


def run_job(job: SeatJob, result: JobResult, cancel) -> None:
    t0 = time.monotonic()
    if cancel is not None and cancel.is_set():
        result.status, result.error_kind = "cancelled", "cancelled"
        result.error = f"{job.label} not begun: its set was cancelled"
        return
    result.begun = True
    try:
        result.value = job.work()
        result.status = "ok"
    except Exception as exc:  # the job's own failure is its result, never its set's
        result.status, result.error_kind, result.exception = "error", "raised", exc
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = round(time.monotonic() - t0, 3)


def closed(result: SeatResult, t0: float, hooks) -> None:
    """A call's result as it is logged: its time, and its error scrubbed."""
    result.seconds = round(time.monotonic() - t0, 3)
    result.waited = round(result.waited, 3)
    if hooks.scrub is not None and result.error:
        result.error = hooks.scrub(result.error)


def log_results(hooks, results: list[SeatResult]) -> None:
    """Log ``results`` (in one write when the log can, and there are several). A full disk or
    a broken sink loses the line, not the answer: the result says so."""
    if hooks.write_all is not None and len(results) > 1:
        try:
            hooks.write_all(results)
        except Exception as exc:
            for result in results:
                result.meta.setdefault("log_error", f"{type(exc).__name__}: {exc}")
        return
    for result in results if hooks.write is not None else ():
        try:
            hooks.write(result)
        except Exception as exc:
            result.meta.setdefault("log_error", f"{type(exc).__name__}: {exc}")
