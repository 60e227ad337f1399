"""Requests a minute per gateway key, counted once across every instance on one database
(``DatabaseRateCounter``): the same sliding estimate as ``ratelimit``, each key's two minutes
held in its row of ``rate_counts``.

Invariants:

* One check is one statement (``panelist_rate_admit``): the key's row is locked, judged and,
  when the request fits, counted before the lock is let go, so two instances never both take
  the last place of a minute.
* Minutes are the database's clock, the one every host shares, unless a caller names the time.
* A check that cannot reach the database raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After): a request is never let through uncounted.
"""

from __future__ import annotations

import threading

from panelist.metrics.server.ratelimit import WINDOW, RateCounter, wait_for
from panelist.metrics.store import pg, pgschema


class DatabaseRateCounter:
    """Admits or refuses requests for keys by name; one per server, sharing a database."""

    retry_after = staticmethod(RateCounter.retry_after)

    def __init__(self, url: str, *, application: str = "panelist-rates"):
        self.db = pg.Database(url, application=application)
        self._lock = threading.Lock()
        self._ready = False

    def admit(self, name: str, limit: int, now: float | None = None,
              cost: int = 1) -> float | None:
        """Count ``cost`` requests for ``name`` (``cost <= limit``): None if admitted, else the
        seconds to wait. The first statement admits only when all ``cost`` fit; the rest are
        counted one statement each (so another instance may slip one in between: at worst the
        key is refused a little sooner, never let past its limit by more than that)."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    pgschema.migrate(self.db)
                    self._ready = True
        # a pooled connection found dead (the server restarted) is retried on a new one: at
        # worst a request that did count is counted twice, which only ever refuses sooner
        rows = self.db.execute("SELECT panelist_rate_admit(%s, %s, %s, %s)",
                               (name, limit - cost + 1, WINDOW, now))
        admitted, before, current, elapsed = rows[0][0]
        if admitted:
            for _ in range(cost - 1):
                self.db.execute("SELECT panelist_rate_admit(%s, %s, %s, %s)",
                                (name, 2**62, WINDOW, now))
            return None
        return wait_for(limit, int(before), int(current), float(elapsed), cost)

    def close(self) -> None:
        self.db.close()
