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

    def admit(self, name: str, limit: int, now: float | None = None) -> float | None:
        """Count one request for ``name``: None if admitted, else the seconds to wait."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    pgschema.migrate(self.db)
                    self._ready = True
        # a pooled connection found dead (the server restarted) is retried on a new one: at
        # worst a request that did count is counted twice, which only ever refuses sooner
        rows = self.db.execute("SELECT panelist_rate_admit(%s, %s, %s, %s)",
                               (name, limit, WINDOW, now))
        admitted, before, current, elapsed = rows[0][0]
        if admitted:
            return None
        return wait_for(limit, int(before), int(current), float(elapsed))

    def close(self) -> None:
        self.db.close()
