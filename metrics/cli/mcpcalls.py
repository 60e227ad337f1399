"""The tool calls of one ``panelist mcp`` session: a few run at once, a bounded few more wait.

A client may send thousands of ``tools/call`` requests without waiting for a reply; each one
holding a thread (and a connection to the gateway) would cost the process a thread per call.
Here ``workers`` threads run the calls, first come first served; up to ``MAX_WAITING`` more wait
for a free worker, holding at most ``WAITING_BYTES`` of their messages; a call past either bound
is refused at once (``Busy``), and its caller answers it with an error that says to retry.

Invariants:

* The threads are the workers (started as calls come, never more than ``workers``) and one
  clock for progress notifications, however many calls arrive.
* Every call ``submit`` took gets exactly one reply, written once ``run`` returns; ``close``
  returns when every taken call has been answered, the workers and the clock having ended.
* A call with a progress token gets ``notifications/progress`` every ``every`` seconds from the
  moment it was taken, waiting included (a client may give up on a call that stays silent for
  a minute), until its reply and never after it: a notification is written under the call's
  lock, and the reply only once the call is marked answered under that lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

MAX_WAITING = 64  # calls waiting for a free worker
WAITING_BYTES = 64 * 1024 * 1024  # their messages' bytes: two of the largest a line may be


class Busy(Exception):
    """Raised by ``submit`` when a call can neither run nor wait; the message says to retry."""


@dataclass(eq=False)
class Call:
    """One ``tools/call`` request: its id, tool, arguments, progress token and message size."""

    rid: object
    name: str
    args: dict
    token: str | int | None = None
    size: int = 0
    taken: float = field(default_factory=time.monotonic)
    started: float | None = None  # when a worker took it; None while it waits
    due: float = 0.0  # when its next progress notification is due
    ticks: int = 0
    answered: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class CallPool:
    """Runs calls on at most ``workers`` threads: ``run(call)`` returns the reply (and never
    raises), ``write(message)`` sends one message to the client."""

    def __init__(
        self,
        run: Callable[[Call], dict],
        write: Callable[[dict], None],
        *,
        workers: int,
        every: float,
    ):
        if workers < 1:
            raise ValueError("a pool needs one worker at least")
        self.workers = workers
        self.every = every
        self._run, self._write = run, write
        self._cond = threading.Condition()
        self._waiting: deque[Call] = deque()
        self._waiting_bytes = 0
        self._running = 0
        self._threads: list[threading.Thread] = []
        self._clock: threading.Thread | None = None
        self._heard: set[Call] = set()  # calls with a progress token, not answered yet
        self._closing = False

    def submit(self, call: Call) -> None:
        """Take ``call``: run it now, or let it wait for a worker; ``Busy`` if it can do
        neither."""
        with self._cond:
            if self._closing:
                raise Busy("this server is shutting down; send the call again to a new session")
            queued = self._running + len(self._waiting) - self.workers  # waiting, not running
            if queued >= MAX_WAITING:
                raise Busy(
                    f"busy: {self.workers} tool calls are running and {MAX_WAITING} "
                    "more are waiting; retry this call once one of them is answered"
                )
            if queued >= 0 and self._waiting_bytes + call.size > WAITING_BYTES:
                raise Busy(
                    f"busy: the calls waiting for one of the {self.workers} running "
                    f"hold {self._waiting_bytes // (1024 * 1024)} MB of prompts; retry "
                    "this call once one of them is answered"
                )
            call.taken = time.monotonic()
            self._waiting.append(call)
            self._waiting_bytes += call.size
            if call.token is not None:
                call.due = call.taken + self.every
                self._heard.add(call)
                if self._clock is None:
                    self._clock = self._start(self._tick, "mcp-progress")
            if (
                self._running + len(self._waiting) > len(self._threads)
                and len(self._threads) < self.workers
            ):
                self._threads.append(self._start(self._work, f"mcp-call-{len(self._threads)}"))
            self._cond.notify_all()

    def close(self) -> None:
        """Answer every call taken, then end the workers and the clock."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            threads = list(self._threads) + ([self._clock] if self._clock else [])
        for thread in threads:
            thread.join()

    def _start(self, target, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closing:
                    self._cond.wait()
                if not self._waiting:
                    return  # closing, and nothing is left to run
                call = self._waiting.popleft()
                self._waiting_bytes -= call.size
                self._running += 1
                call.started = time.monotonic()
            try:
                reply = self._run(call)
                with call.lock:
                    call.answered = True  # from here on the clock passes it by
                self._write(reply)
            finally:
                with self._cond:
                    self._running -= 1
                    self._heard.discard(call)
                    self._cond.notify_all()

    def _tick(self) -> None:
        while True:
            with self._cond:
                if self._closing and not self._heard:
                    return  # every call with a token has been answered
                now = time.monotonic()
                due = [c for c in self._heard if c.due <= now]
                if not due:
                    nxt = min((c.due for c in self._heard), default=None)
                    self._cond.wait(None if nxt is None else nxt - now)
                    continue
            for call in due:
                with call.lock:
                    if call.answered:
                        continue
                    call.ticks += 1  # progress must grow with every notification
                    call.due = now + self.every
                    self._write(self._progress(call, now))

    def _progress(self, call: Call, now: float) -> dict:
        if call.started is None:
            said = (
                f"{call.name} waiting for one of {self.workers} running calls after "
                f"{now - call.taken:.0f} s"
            )
        else:
            said = f"{call.name} still working after {now - call.taken:.0f} s"
        return {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": call.token, "progress": call.ticks, "message": said},
        }
