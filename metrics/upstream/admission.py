"""Admission: how many calls an endpoint (or a model) takes at once and per minute, counted across
every process on the data folder.

The limits are the roster's (``max_concurrent`` and ``rpm`` on an endpoint, and optionally on a
model); an endpoint with none, serving a model with none, is not managed at all: ``slot`` and
``has_room`` open no file and cost a dictionary lookup. For a managed one, each limited scope (the
endpoint, the model) has a folder ``runs/admission/<endpoint>/`` (a model's:
``runs/admission/<endpoint>/models/<alias, %-quoted>/``) holding:

* ``slot-<i>`` for i below ``max_concurrent``: a call holds an exclusive ``flock`` on one of them
  while it runs. A lock belongs to the open file, so a process that dies (even by SIGKILL)
  releases its slots by itself, and at most ``max_concurrent`` calls hold one at any moment.
  Lowering the limit takes effect as the calls holding the higher slots end.
* ``rate``: the latest admission times (a ring of wall-clock seconds, as long as the largest rpm
  it has served), read and written under an exclusive ``flock``. A call is admitted at ``t`` only
  if the ``rpm``-th latest of them is at least a window (60 s) and a margin (1 s) before ``t``,
  so any ``rpm + 1`` admissions span more than a whole window: calls admitted in any 60 s window
  never exceed ``rpm``, nor do their arrivals at the provider when sending takes under a second
  (strict, unlike the estimate in ``ratelimit.py``). An admission is recorded after the call's
  concurrency slot is held and right before it is sent, so the log holds when calls were sent.
  A wall clock stepped back only makes calls wait longer.
* ``pause.json`` (endpoint only): a learned ``Retry-After``, ``{"until", "seconds", "why"}``.
  Until then no call to the endpoint is admitted, in any process. A later pause extends it, an
  earlier one never shortens it. A pause applies to an endpoint that has a limit of its own; an
  unmanaged endpoint is rested per model by the gateway's cooldown instead.

These files are ``admitfiles.FileStore``, the default. A data folder with a database
(``Admission.of_home``) keeps the same state in it instead (``admitdb.DatabaseStore``: renewed
leases for slots, locked rows for rate logs and pauses, the database's clock), so the limits hold
across instances on several machines; the rules above are the same, and a database that cannot
be reached admits nothing (``slot`` raises ``AtLimit`` saying so; ``has_room`` says no room).

Nothing else is written: no prompt, no key, no header. Clocks: wall-clock (``time.time``) for
what processes share, ``time.monotonic`` for a caller's own wait.

Waiting never spins. Within one ``Admission``, callers of the same scope queue first come, first
served, and only the first in line tries; the others sleep on a condition. Between processes
there is no order: whoever finds a free slot first takes it. The first in line sleeps until the
pause ends or the rate window lets the next call in (both are known times), and for a slot,
sleeps on the condition, which a slot released in this process signals at once; a slot released
by another process is noticed by polling with the store's backoff (files: from 2 ms
doubling to 50 ms; a database: from 10 ms to 100 ms).
A ``cancel`` event ends a wait with ``errors.Cancelled``: a sleep until a known time waits on the
event itself, and a sleep on the condition lasts at most ``TICK`` when one is given. A wait that
cannot succeed in time (the pause or the rate window ends after it) fails at once with
``errors.AtLimit`` instead of sleeping to its end.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from panelist.metrics.errors import AtLimit, Cancelled, DatabaseUnreachable
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import CallLimits, Roster
from panelist.metrics.upstream.admitfiles import FileStore

WINDOW = 60.0  # seconds an rpm counts over
SEND_MARGIN = 1 / 60  # of the window (1 s a minute) between an admission and its arrival
TICK = 0.05  # the longest a waiter with a cancel event sleeps before looking at it
UNKNOWN_WAIT = 1.0  # the Retry-After guessed when only a running call ending makes room


@dataclass(frozen=True)
class Admitted:
    """A call let in: when (wall-clock seconds, what the rate log holds) and after how long."""

    endpoint: str
    model: str
    at: float
    waited: float


class Slots(Protocol):
    """The store's handle on one scope's slots (``admitfiles.Files``, ``admitdb.Slots``)."""

    def take(self, n: int) -> int | None: ...

    def give(self, i: int) -> None: ...

    def in_use(self, n: int) -> int: ...


@dataclass(frozen=True)
class _Scope:
    kind: str  # endpoint | model
    name: str
    limits: CallLimits
    state: Slots

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.name}'"

    @property
    def fix(self) -> str:
        return f"`panelist {self.kind} limit {self.name}`"


class _Line:
    """The callers of one process waiting for one scope, first come first served."""

    def __init__(self):
        self.cond = threading.Condition()
        self.queue: deque[object] = deque()


class Admission:
    """Admits model calls for one data folder. Build one per server (or race); it keeps the slot
    and rate files of the scopes it has used open until ``close``."""

    def __init__(self, home: Home, *, window: float = WINDOW, store=None):
        """``window``: the seconds an ``rpm`` counts over; 60 but for tests and benchmarks,
        which shorten it (every process on a folder must then use the same). ``store``: where
        slots, rate logs and pauses are shared (default: the data folder's files,
        ``admitfiles.FileStore``; ``admitdb.DatabaseStore`` for instances on one database)."""
        self.home = home
        self.store = store if store is not None else FileStore(home.admission_state)
        self.window = float(window)
        self.roster = Roster(home)
        self._lock = threading.Lock()
        self._lines: dict[tuple, _Line] = {}
        self._by_endpoint: dict[str, list[_Line]] = {}

    @classmethod
    def of_home(cls, home: Home, *, window: float = WINDOW) -> "Admission":
        """The admission every process on ``home`` shares: through its database when it has
        one (so limits hold across every instance on it), else through its files."""
        url = home.database
        if not url:
            return cls(home, window=window)
        from panelist.metrics.upstream.admitdb import DatabaseStore

        return cls(home, window=window, store=DatabaseStore(url))

    def close(self) -> None:
        self.store.close()

    # -- the interface ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def slot(
        self, endpoint: str, model: str, *, wait: float, cancel: threading.Event | None = None
    ):
        """Hold one slot for a call of ``model`` (a roster alias) on ``endpoint`` while the block
        runs, admitted within ``wait`` seconds; yields an ``Admitted``. Raises ``AtLimit`` when
        no slot came in time (at once when none can: a pause or rate window ending later) and
        ``Cancelled`` when ``cancel`` was set while waiting. A store that cannot be reached
        (a database down) admits nothing: ``AtLimit`` too, saying so."""
        t0 = time.monotonic()
        scopes = self._scopes(endpoint, model)
        if not scopes:
            yield Admitted(endpoint, model, time.time(), 0.0)
            return
        try:
            taken, at = self._admit(endpoint, model, t0 + max(0.0, wait), cancel)
        except DatabaseUnreachable as exc:
            raise AtLimit(
                f"{scopes[0].label} admits no call while its limits cannot be "
                f"counted: {exc.message}",
                exc.retry_after,
            ) from None
        try:
            yield Admitted(endpoint, model, at, time.monotonic() - t0)
        finally:
            self._give(endpoint, taken)

    def has_room(self, endpoint: str, model: str) -> bool:
        """Whether a call of ``model`` on ``endpoint`` would be admitted now, without waiting
        (not paused, nobody of this process queued for it, a free slot, room in the window)."""
        scopes = self._scopes(endpoint, model)
        if not scopes:
            return True
        line = self._lines.get(self._line_key(endpoint, model, scopes))
        if line is not None and line.queue:
            return False
        try:
            if any(s.kind == "endpoint" for s in scopes) and self.store.paused(endpoint)[0] > 0:
                return False
            for s in scopes:
                n = s.limits.max_concurrent
                if n is not None and s.state.in_use(n) >= n:
                    return False
            return self._rate(scopes, time.time(), record=False)[0] == 0.0
        except DatabaseUnreachable:
            return False  # the shared counts cannot be read: no room, as no call could go

    def pause(self, endpoint: str, seconds: float, why: str) -> bool:
        """Admit no call to ``endpoint`` for ``seconds`` (a learned Retry-After), in every
        process; ``why`` is kept beside it. False (nothing recorded) when the endpoint has no
        limit of its own, or its store cannot be reached (then no call is admitted anyway, and
        the caller keeps the upstream's own error rather than this one)."""
        if seconds <= 0 or endpoint not in self.roster.view().endpoint_limits:
            return False
        try:
            self.store.pause(endpoint, time.time() + seconds, seconds, why)
        except DatabaseUnreachable:
            return False
        return True

    def resume(self, endpoint: str) -> bool:
        """End a pause of ``endpoint`` early; False when it was not paused."""
        return self.store.resume(endpoint)

    def status(self, kind: str, name: str) -> dict:
        """What the limits of one endpoint or model are and how they are used now: calls
        running, calls admitted in the last window, and a pause (endpoint only)."""
        view = self.roster.view()
        if kind == "endpoint":
            limits = view.endpoint_limits.get(name, CallLimits())
            endpoint = name
        else:
            limits = view.model_limits.get(name, CallLimits())
            endpoint = view.models[name].endpoint if name in view.models else ""
        out = dict(limits.public(), running=None, admitted_last_window=None, paused=None)
        if not limits:
            return out
        state = self.store.scope(kind, name, endpoint)
        if limits.max_concurrent is not None:
            out["running"] = state.in_use(limits.max_concurrent)
        if limits.rpm is not None:
            out["admitted_last_window"] = self.store.recent(state, time.time() - self.window)
        if kind == "endpoint":
            left, why = self.store.paused(name)
            if left > 0:
                out["paused"] = {"seconds_left": round(left, 1), "why": why}
        return out

    def waiting(self, endpoint: str) -> int:
        """Callers of this ``Admission`` queued for a slot on ``endpoint`` now."""
        with self._lock:
            lines = list(self._by_endpoint.get(endpoint, ()))
        return sum(len(line.queue) for line in lines)

    # -- inside -------------------------------------------------------------------------------
    def _scopes(self, endpoint: str, model: str) -> list[_Scope]:
        """The limited scopes a call goes through, the model's first (the order every process
        locks them in)."""
        view = self.roster.view()
        scopes = []
        limits = view.model_limits.get(model)
        if limits:
            scopes.append(
                _Scope("model", model, limits, self.store.scope("model", model, endpoint))
            )
        limits = view.endpoint_limits.get(endpoint)
        if limits:
            scopes.append(
                _Scope(
                    "endpoint", endpoint, limits, self.store.scope("endpoint", endpoint, endpoint)
                )
            )
        return scopes

    @staticmethod
    def _line_key(endpoint: str, model: str, scopes: list[_Scope]) -> tuple:
        # a model with limits of its own queues apart, so it never holds up its endpoint's
        # other models (nor they it) while it waits for its own slot
        if any(s.kind == "model" for s in scopes):
            return (endpoint, model)
        return (endpoint,)

    def _line(self, key: tuple) -> _Line:
        with self._lock:
            line = self._lines.get(key)
            if line is None:
                line = self._lines[key] = _Line()
                self._by_endpoint.setdefault(key[0], []).append(line)
            return line

    def _admit(
        self, endpoint: str, model: str, deadline: float, cancel: threading.Event | None
    ) -> tuple[list, float]:
        scopes = self._scopes(endpoint, model)
        line = self._line(self._line_key(endpoint, model, scopes))
        me = object()
        with line.cond:
            line.queue.append(me)
        try:
            poll_min, poll_max = self.store.poll
            poll = poll_min
            while True:
                _check(cancel, endpoint)
                with line.cond:
                    while line.queue[0] is not me:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise AtLimit(
                                f"{scopes[0].label} is at its limit: "
                                f"{len(line.queue) - 1} call(s) of this process were "
                                "waiting for it first; try again later or raise it "
                                f"with {scopes[0].fix}",
                                UNKNOWN_WAIT,
                            )
                        line.cond.wait(min(left, TICK) if cancel is not None else left)
                        _check(cancel, endpoint)
                scopes = self._scopes(endpoint, model)  # the limits may have changed
                if not scopes:
                    return [], time.time()
                left = deadline - time.monotonic()
                if any(s.kind == "endpoint" for s in scopes):
                    rest, why = self.store.paused(endpoint)
                    if rest > 0:
                        if rest > left:
                            raise AtLimit(
                                f"endpoint '{endpoint}' is at its limit: paused for "
                                f"{math.ceil(rest)} s more after the upstream asked "
                                f"to wait ({why}); try again then",
                                rest,
                            )
                        _sleep(rest, cancel, endpoint)
                        continue
                taken, full = self._take(scopes)
                if full is not None:
                    if left <= 0:
                        raise AtLimit(
                            f"{full.label} is at its limit of "
                            f"{full.limits.max_concurrent} call(s) at once and none "
                            "ended in time; try again later or raise it with "
                            f"{full.fix}",
                            UNKNOWN_WAIT,
                        )
                    with line.cond:  # a slot given back in this process wakes this at once
                        line.cond.wait(min(poll, left))
                    poll = min(poll * 2, poll_max)
                    continue
                try:
                    later, rpm, at = self._rate(scopes, time.time(), record=True)
                except BaseException:  # the shared log could not be read: the slots go back
                    self._give(endpoint, taken)
                    raise
                if later > 0:
                    # a wait comes only from a scope with an rpm, which ``_rate`` names
                    assert rpm is not None
                    self._give(endpoint, taken)
                    if later > left:
                        raise AtLimit(
                            f"{rpm.label} is at its limit of {rpm.limits.rpm} call(s) "
                            f"a minute; the next may start in {math.ceil(later)} s, "
                            "after this call's wait; try again then or raise it with "
                            f"{rpm.fix}",
                            later,
                        )
                    _sleep(later, cancel, endpoint)
                    poll = poll_min
                    continue
                return taken, at
        finally:
            with line.cond:
                line.queue.remove(me)
                line.cond.notify_all()

    def _take(self, scopes: list[_Scope]) -> tuple[list[tuple[Slots, int]], _Scope | None]:
        """A slot in every scope that limits concurrency, or none and the scope that is full."""
        taken: list[tuple[Slots, int]] = []
        for s in scopes:
            n = s.limits.max_concurrent
            if n is None:
                continue
            try:
                i = s.state.take(n)
            except BaseException:
                for state, j in taken:
                    state.give(j)
                raise
            if i is None:
                for state, j in taken:
                    state.give(j)
                return [], s
            taken.append((s.state, i))
        return taken, None

    def _give(self, endpoint: str, taken: list) -> None:
        if not taken:
            return
        for state, i in taken:
            state.give(i)
        with self._lock:
            lines = list(self._by_endpoint.get(endpoint, ()))
        for line in lines:
            with line.cond:
                line.cond.notify_all()

    def _rate(
        self, scopes: list[_Scope], at: float, *, record: bool
    ) -> tuple[float, _Scope | None, float]:
        """Seconds until every rpm scope has room for one more call at ``at`` (0: room now),
        the scope that waits longest, and the time judged (``at``, or the shared clock of the
        store); with ``record``, a call that fits is written to every scope's log in the same
        step, at that time."""
        limited = [s for s in scopes if s.limits.rpm is not None]
        if not limited:
            return 0.0, None, at
        # a call reaches the provider a little after it is admitted, by a delay that varies
        # (a connection, a busy CPU); the margin keeps the provider's own count of any window
        # within rpm too, not only ours
        return self.store.rate(limited, at, self.window * (1 + SEND_MARGIN), record=record)


def _check(cancel: threading.Event | None, endpoint: str) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"cancelled while waiting for a slot on endpoint '{endpoint}'")


def _sleep(seconds: float, cancel: threading.Event | None, endpoint: str) -> None:
    if cancel is None:
        time.sleep(seconds)
    else:
        cancel.wait(seconds)  # an Event's wait ends the moment it is set
        _check(cancel, endpoint)
