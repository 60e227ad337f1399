"""Samples of what a database's backends are doing (``pg_stat_activity``), for the benchmarks.

A thread asks, every ``every`` seconds on a connection of its own, which client backends of the
database are active and what each waits on. From the samples it counts:

* ``lock_share``: the share of samples in which at least one backend waited on a lock
  (``wait_event_type = 'Lock'``: row, transaction and advisory locks; not the server's
  internal lightweight locks), and ``backend_lock_share``, the share of active backends seen
  waiting on one, with the lock kinds (``wait_event``) seen;
* ``active_s``: backend-seconds spent active (running a statement, or waiting inside one),
  each sample counting its active backends times the time since the sample before.

These are samples, not a trace: a wait shorter than the interval may fall between two, and the
figures are estimates whose error shrinks with the number of samples (printed beside them).
The sampler's own backend is left out. ``phase(name)`` starts a new tally, so each phase of a
run has its own figures.
"""

from __future__ import annotations

import collections
import threading
import time

QUERY = (
    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND backend_type = 'client backend'"
)


class Tally:
    def __init__(self):
        self.samples = 0
        self.with_lock_wait = 0
        self.active = 0  # active backends over every sample
        self.waiting = 0  # of them, waiting on a lock
        self.kinds: collections.Counter = collections.Counter()
        self.active_s = 0.0

    def figures(self) -> dict:
        return {
            "samples": self.samples,
            "lock_share_pct": round(100 * self.with_lock_wait / self.samples, 1)
            if self.samples
            else None,
            "backend_lock_share_pct": round(100 * self.waiting / self.active, 1)
            if self.active
            else None,
            "lock_kinds": dict(self.kinds),
            "active_s": round(self.active_s, 2),
        }


class Sampler:
    """``start()``, ``phase(name)`` as the run moves on, ``stop()``; ``tallies[name]``."""

    def __init__(self, db, every: float = 0.05):
        self.db, self.every = db, every
        self.tallies: dict[str, Tally] = {}
        self._now: Tally | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-activity", daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def phase(self, name: str | None) -> None:
        with self._lock:
            self._now = self.tallies.setdefault(name, Tally()) if name else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.every):
            try:
                rows = self.db.execute(QUERY)
            except Exception:
                continue  # the database away for a moment: no sample then
            now = time.monotonic()
            span, last = now - last, now
            with self._lock:
                tally = self._now
                if tally is None:
                    continue
                active = [r for r in rows if r[0] == "active"]
                locked = [r for r in active if r[1] == "Lock"]
                tally.samples += 1
                tally.active += len(active)
                tally.waiting += len(locked)
                tally.with_lock_wait += bool(locked)
                tally.kinds.update(r[2] for r in locked)
                tally.active_s += len(active) * span
