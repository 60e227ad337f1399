"""How this process has used its databases: errors, time spent waiting on them, and waits for a
free pooled connection (``Stats``), as ``GET /metrics`` shows them.

One ``Stats`` per process (``STATS``), which every ``pg.Database`` of the process adds to: the
parts of a server each open their own ``Database`` (ledger, limits, config, races), and what an
operator asks is how the process fares with its database, whichever part waited. Like a
``logging`` logger, it is the one process-wide object here: it only counts, and nothing reads
it to decide anything.

Invariants: counters only grow; every figure is read under the lock, so a scrape sees one
consistent set; labels are a fixed few words (``kind``), never a URL, a host or a user.
"""

from __future__ import annotations

import threading


class Stats:
    """Counters of database use; ``snapshot()`` reads them all at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._errors: dict[str, int] = {}
        self._uses = 0
        self._seconds = 0.0
        self._pool_waits = 0
        self._pool_wait_seconds = 0.0
        self._pool_refusals = 0
        self._in_use = 0

    def error(self, kind: str) -> None:
        """One failure: ``unreachable`` (refused, reset, cut by the watch) or ``too_slow`` (a
        statement or lock past its bound), or ``pool_full`` (no connection freed in time)."""
        with self._lock:
            self._errors[kind] = self._errors.get(kind, 0) + 1

    def used(self, seconds: float) -> None:
        """One statement or transaction, ``seconds`` from asking for a connection to the end."""
        with self._lock:
            self._uses += 1
            self._seconds += seconds

    def pool_wait(self, seconds: float, got: bool) -> None:
        """A caller that found every pooled connection in use and waited ``seconds``."""
        with self._lock:
            self._pool_waits += 1
            self._pool_wait_seconds += seconds
            if not got:
                self._pool_refusals += 1

    def taken(self, n: int) -> None:
        with self._lock:
            self._in_use += n

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "errors": dict(self._errors),
                "uses": self._uses,
                "seconds": self._seconds,
                "pool_waits": self._pool_waits,
                "pool_wait_seconds": self._pool_wait_seconds,
                "pool_refusals": self._pool_refusals,
                "in_use": self._in_use,
            }


STATS = Stats()
