"""The threads that answer connections (``Pool``), kept from one connection to the next, so that
handing a connection over never waits for a thread to start.

``threading.Thread.start`` returns only once the new thread has run, and on a busy process that
takes as long as the new thread needs to get the interpreter lock: a heads thread starting one
thread per connection spent a flood's time waiting there while real clients queued behind it.

Invariants:

* at most ``size`` threads; a job handed in (``submit``) goes to the thread idle the shortest
  time, else waits in order of arrival, taken by the first thread to finish its job or by one
  the pool's own starter thread starts for it. ``submit`` never waits for a thread.
* a thread idle for ``idle`` seconds ends (the most recently busy ones are handed work first, so
  the others are the ones that end): a pool busy once shrinks back when quiet.
* ``unbegun`` counts the jobs handed in that no running thread has taken up yet: handed to a
  thread not yet awake, or waiting. On a busy process it grows (each thread waits its turn for
  the interpreter lock), so a caller can hold back work that would only make more threads
  compete; ``on_begun`` is called each time it falls below ``busy_at``.
* a job is run exactly once; a job's exception is the job's to handle (it is printed, and its
  thread goes on).
* ``close``: no job is taken after it; threads idle now end now, busy ones once their job is
  done and none is left waiting. Nothing is started before ``start``.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections import deque
from typing import Callable

IDLE_THREAD = 30.0  # seconds a thread waits for its next connection before it ends


class _Slot:
    """An idle thread's place in the pool: where its next job is put, and its wake-up."""

    __slots__ = ("job", "ready")

    def __init__(self):
        self.job: tuple | None = None
        self.ready = threading.Event()


class Pool:
    """Threads running ``submit``-ted jobs, at most ``size`` at once."""

    def __init__(
        self,
        size: int,
        idle: float = IDLE_THREAD,
        name: str = "handler",
        *,
        busy_at: int = 4,
        on_begun: Callable[[], None] = lambda: None,
    ):
        if size < 1:
            raise ValueError("a pool needs room for at least one thread")
        self.size, self.idle, self.name = size, idle, name
        self.busy_at, self._on_begun = busy_at, on_begun
        self._unbegun = 0
        self._lock = threading.Lock()
        self._wanted = threading.Condition(self._lock)  # the starter waits here for work
        self._jobs: deque = deque()  # waiting for a thread, oldest first
        self._idle: list[_Slot] = []  # the most recently idle last
        self._threads = 0  # running, or being started with a job of their own
        self._made = 0  # threads ever started, for their names
        self._closed = False
        self._starter: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """Whether ``busy_at`` jobs or more are handed in and not yet taken up by a thread."""
        return self._unbegun >= self.busy_at

    @property
    def threads(self) -> int:
        """How many threads the pool has now (busy, idle or starting)."""
        return self._threads

    def start(self) -> None:
        """Start the starter thread (once)."""
        with self._lock:
            if self._starter is not None or self._closed:
                return
            self._starter = threading.Thread(
                target=self._start_threads, daemon=True, name=f"{self.name}-starter"
            )
        self._starter.start()

    def submit(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on a pool thread, as soon as one is free; never waits.
        RuntimeError once the pool is closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is closed")
            self._unbegun += 1
            if self._idle:
                slot = self._idle.pop()
                slot.job = (fn, args)
                slot.ready.set()
                return
            self._jobs.append((fn, args))
            if self._threads < self.size:
                self._wanted.notify()

    def close(self) -> None:
        """Take no more jobs; idle threads end now, busy ones when their job and the queue
        are done. Returns at once."""
        with self._lock:
            self._closed = True
            for slot in self._idle:
                slot.ready.set()  # with no job: the thread ends
            self._idle.clear()
            self._wanted.notify()
        starter = self._starter
        if starter is not None and starter is not threading.current_thread():
            starter.join(timeout=5)

    # -- the threads ----------------------------------------------------------------------------
    def _start_threads(self) -> None:
        """The starter: a thread for each job that waits while there is room for one. It alone
        waits for ``Thread.start``; the job goes with the new thread, so no other thread can
        take it meanwhile and leave the new one without work."""
        with self._lock:
            while True:
                while self._jobs and self._threads < self.size:
                    job = self._jobs.popleft()
                    self._took()
                    self._threads += 1
                    self._made += 1
                    thread = threading.Thread(
                        target=self._work,
                        args=(job,),
                        daemon=True,
                        name=f"{self.name}-{self._made}",
                    )
                    self._lock.release()
                    try:
                        thread.start()
                        started = True
                    except RuntimeError:  # out of threads: the job waits for a busy one
                        started = False
                    finally:
                        self._lock.acquire()
                    if not started:
                        self._threads -= 1
                        self._unbegun += 1
                        self._jobs.appendleft(job)
                        if self._threads == 0 or self._closed:
                            # nobody else will take it: try again in a moment
                            self._wanted.wait(0.1)
                        else:
                            self._wanted.wait()
                if self._closed and not self._jobs:
                    return
                self._wanted.wait()

    def _took(self) -> None:
        """A thread took up a job (called with the lock held)."""
        self._unbegun -= 1
        if self._unbegun == self.busy_at - 1:  # no longer busy: who held work back may go on
            self._on_begun()

    def _work(self, job: tuple | None) -> None:
        slot = _Slot()
        while True:
            if job is not None:
                fn, args = job
                job = None
                try:
                    fn(*args)
                except BaseException:  # the job's own fault: this thread serves on
                    print(f"[{self.name}] a job failed:", file=sys.stderr)
                    traceback.print_exc()
            with self._lock:
                if self._jobs:
                    job = self._jobs.popleft()
                    self._took()
                    continue
                if self._closed:
                    self._threads -= 1
                    return
                slot.job = None
                slot.ready.clear()
                self._idle.append(slot)
            slot.ready.wait(self.idle)
            with self._lock:
                if slot.job is not None:  # handed a job (the event is set with it)
                    job = slot.job
                    self._took()
                    continue
                if slot in self._idle:  # no job came in time
                    self._idle.remove(slot)
                self._threads -= 1
                if self._jobs and not self._closed:
                    self._wanted.notify()  # work came as this one gave up: a thread for it
                return
