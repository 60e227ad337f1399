"""A set of the seats core in flight (``Seats.start``): its units run on the core's threads, or,
for a polled set (started with ``poll=True``), are sent by the starting thread and read by the
iterating one in one ``poll()`` loop; its results are handed over as they land. The rules are the
core's (``core.py``).

A polled set hands a call it cannot finish in its loop (no admission slot at once, a retry's
backoff) to a thread of the core: such a call is *offloaded*, and the loop looks at the queue of
offloaded calls every ``OFFLOAD_TICK`` seconds beside its poll."""

from __future__ import annotations

import queue
import select
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Iterator

from panelist.metrics.errors import UpstreamError
from panelist.metrics.seats.calls import (
    GRACE,
    JobResult,
    Result,
    SeatCall,
    SeatResult,
    Tries,
    Unit,
    answered,
    closed,
    failed,
    log_results,
    own_deadline,
)

if TYPE_CHECKING:  # the core makes sets; a set only calls back into it
    from panelist.metrics.seats.core import Hooks, RosterSnapshot, Seats, SentCall

OFFLOAD_TICK = 0.02  # how often a polled set looks for its offloaded calls that ended
# A polled set sends its calls one after another: a prompt up to this size leaves at once (the
# socket takes it whole), a larger one could hold the next seat's upload back, so it goes on
# threads that send in parallel.
POLL_MAX_PROMPT = 64 * 1024


class SeatSet:
    """A set of units in flight; results are handed over in the order they finish. Iterating
    the set yields each result as it lands (``progress`` also yields None every tick)."""

    def __init__(
        self,
        seats: Seats,
        units: list[Unit],
        deadline: float,
        cancel: threading.Event,
        hooks: Hooks,
        parallel: int | None = None,
        grace: float = GRACE,
        poll: bool = False,
    ):
        labels = [u.label for u in units]
        if len(set(labels)) != len(labels):
            raise ValueError(
                "every call of a set needs its own label; "
                f"repeated: {sorted({x for x in labels if labels.count(x) > 1})}"
            )
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
        self._lock = threading.Lock()  # guards the lanes and the units' list
        self._running: dict[str, int] = {}
        self._held: dict[str, deque[int]] = {}
        self._cancelled_at: float | None = None
        # ``poll``: calls sent by this thread, read by whichever thread iterates the set; the
        # rules below (documented in core.py) send the rest to the core's threads
        self._polled = (
            poll
            and parallel is None
            and all(
                isinstance(u, SeatCall)
                and u.on_delta is None
                and u.stop is None
                and len(hooks.encoded.of(u.messages)) <= POLL_MAX_PROMPT
                for u in units
            )
        )
        self._sent: dict[int, SentCall] = {}  # file descriptor -> call in flight
        self._landed: deque[int] = deque()  # ended in the iterating thread, to hand over
        self._offloaded = 0  # of a polled set, units on the core's threads
        for unit in units:
            self.add(unit, start=not self._polled)
        if self._polled:
            snapshot = seats.snapshot()
            for i in range(len(self.units)):
                self._send(i, snapshot)

    def add(self, unit: Unit, start: bool = True) -> Result:
        """One more unit, started as the set's ``parallel`` allows; its result (filled in place).
        The set's iteration then waits for it too."""
        result = SeatResult.of(unit) if isinstance(unit, SeatCall) else JobResult(unit.label)
        lane = unit.model.endpoint if isinstance(unit, SeatCall) else unit.lane
        with self._lock:
            if unit.label in self._labels:
                raise ValueError(
                    f"every call of a set needs its own label; repeated: {unit.label!r}"
                )
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
        if now and start:
            if self._polled:
                self._offloaded += 1
            self._seats.submit(self._run, i, lane)
        return result

    # -- a polled set: one thread sends every call, then reads the answers as they come ---------
    def _polled_unit(self, i: int) -> tuple[SeatCall, SeatResult]:
        """Unit ``i`` of a polled set and its result: a set is polled only when every unit is a
        ``SeatCall`` (``__init__``), and a call's result is a ``SeatResult`` (``add``)."""
        call, result = self.units[i], self.results[i]
        assert isinstance(call, SeatCall) and isinstance(result, SeatResult)
        return call, result

    def _send(self, i: int, snapshot: RosterSnapshot) -> None:
        call, result = self._polled_unit(i)
        seats, hooks = self._seats, self._hooks
        t0 = time.monotonic()
        deadline = min(self.deadline, own_deadline(call, t0, self.deadline))
        tries = Tries(call)
        result.attempts += 1
        try:
            sent = seats.send(call, result, deadline, self.cancel, hooks, tries.cap, snapshot)
        except Exception as exc:
            self._failed(i, t0, deadline, tries, exc)
            return
        if sent is None:  # no slot at once: a thread of the core waits for one
            result.attempts -= 1
            self._offload(seats.perform, call, result, self.deadline, self.cancel, hooks, i=i)
            return
        sent.index, sent.t0, sent.deadline, sent.tries = i, t0, deadline, tries
        self._sent[sent.chat.fileno()] = sent

    def _read(self, sent: SentCall, ended: list) -> None:
        i = sent.index
        try:
            answer = sent.answer()
        except Exception as exc:
            self._failed(i, sent.t0, sent.deadline, sent.tries, exc, ended)
            return
        answered(self._polled_unit(i)[1], answer)
        ended.append((i, sent.t0))

    def _failed(
        self,
        i: int,
        t0: float,
        deadline: float,
        tries: Tries,
        exc: Exception,
        ended: list | None = None,
    ) -> None:
        (call, result), seats = self._polled_unit(i), self._seats
        if isinstance(exc, UpstreamError):
            delay = seats.retry_delay(call, result, exc, tries, deadline, self._hooks)
            if delay is not None:  # tried again on a thread of the core (it may wait first)
                self._offload(
                    seats.resume,
                    call,
                    result,
                    t0,
                    deadline,
                    self.cancel,
                    self._hooks,
                    tries,
                    delay,
                    i=i,
                )
                return
        failed(result, exc)
        if ended is None:
            self._end([(i, t0)])
        else:
            ended.append((i, t0))

    def _end(self, ended: list[tuple[int, float]]) -> None:
        """Calls that ended in this thread: logged (together), then handed over."""
        hooks, results = self._hooks, [self._polled_unit(i)[1] for i, _ in ended]
        for result, (_, t0) in zip(results, ended):
            closed(result, t0, hooks)
        log_results(hooks, results)
        for result, (i, _) in zip(results, ended):
            if hooks.on_end is not None:
                hooks.on_end(result)
            self._landed.append(i)

    def _offload(self, fn, *args, i: int) -> None:
        """Finish a unit of a polled set on a thread of the core (``fn`` logs it and runs the
        set's ``on_end``)."""
        self._offloaded += 1

        def run():
            try:
                fn(*args)
            finally:
                self._finished.put(i)

        self._seats.submit(run)

    def drop_encodings(self) -> None:
        """The set's caller is done with its calls' request bodies (a panel being logged):
        their one shared encoding is let go now, not when the set itself goes."""
        self._hooks.encoded.clear()

    def let_go(self) -> None:
        """The iterating thread is done with the set before every unit ended (a picked reply
        went out): a thread of the core reads the answers still to come, so each is logged and
        ends as it would have. No-op for a set whose calls run on the core's threads."""
        if self._polled and self._unreported:
            self._seats.submit(self.wait)

    def _run(self, i: int | None, lane: str) -> None:
        # a lane's slot drains its lane on this thread: the next unit held back starts here
        while i is not None:
            try:
                self._seats.perform(
                    self.units[i], self.results[i], self.deadline, self.cancel, self._hooks
                )  # never raises but for a broken on_end
            finally:  # handed over whatever happened, so nobody waits for the deadline
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
        if self._polled:
            return self._progress_polled(tick)
        return self._progress(tick)

    def _progress(self, tick: float) -> Iterator[Result | None]:
        while self._unreported:
            left = self._left()
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

    def _progress_polled(self, tick: float) -> Iterator[Result | None]:
        # One poll over the calls' connections: the deadline and a cancel need no polling of
        # their own, since the transport's watchdog shuts a doomed call's socket, which wakes the
        # poll and ends the call with the error it is due.
        poller = select.poll()
        for fd in self._sent:
            poller.register(fd, select.POLLIN)
        last = time.monotonic()
        while self._unreported:
            while self._landed:
                i = self._landed.popleft()
                if i in self._unreported:
                    self._unreported.discard(i)
                    yield self.results[i]
            while True:  # offloaded units that ended
                try:
                    i = self._finished.get_nowait()
                except queue.Empty:
                    break
                self._offloaded -= 1
                if i in self._unreported:
                    self._unreported.discard(i)
                    yield self.results[i]
            if not self._sent:  # what is left runs on the core's threads
                yield from self._progress(tick)
                return
            left = self._left()
            if left <= 0:
                break
            # with offloaded units too, look at their queue now and then (rare: a retry, a wait
            # for admission)
            wait = min(tick, left, OFFLOAD_TICK if self._offloaded else tick)
            ready = poller.poll(max(wait, 0.0) * 1000)
            ended: list[tuple[int, float]] = []
            while ready:  # and what came meanwhile: answers that land together log together
                for fd, _ in ready:
                    sent = self._sent.pop(fd, None)
                    if sent is not None:
                        poller.unregister(fd)
                        self._read(sent, ended)
                ready = poller.poll(0) if self._sent else []
            if ended:
                self._end(ended)
            now = time.monotonic()
            if now - last >= tick:
                last = now
                yield None
        for fd, sent in list(self._sent.items()):  # stuck past the deadline and the grace
            del self._sent[fd]
            sent.drop()
            self._given_up(self.results[sent.index])
            self._end([(sent.index, sent.t0)])
        for i in sorted(self._unreported):
            self._unreported.discard(i)
            result = self.results[i]
            yield result if i in self._landed else self._given_up(result)
        self._landed.clear()

    def _left(self) -> float:
        """Seconds until units still running are given up: the deadline, or the cancel (seen
        now for the first time: units held back are dropped), plus the grace."""
        end = self.deadline
        if self.cancel.is_set():
            if self._cancelled_at is None:
                self._cancelled_at = time.monotonic()
                self._drop_held()
            end = min(end, self._cancelled_at)
        return end + self.grace - time.monotonic()

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
