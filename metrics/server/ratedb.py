"""Requests a minute per gateway key, counted once across every instance on one database
(``DatabaseRateCounter``): as ``ratelimit`` counts them, at most the limit in any 60 s, each
key's admission times of the last 60 s held in its row of ``rate_log``.

Invariants:

* One check is one statement (``panelist_rate_take``): the key's row is locked, judged and,
  when the request fits, counted before the lock is let go, so two instances never both take
  the last place of a window.
* Minutes are the database's clock, the one every host shares, unless a caller names the time.
* A check that cannot reach the database raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After): a request is never let through uncounted.
"""

from __future__ import annotations


from panelist.metrics.server.ratelimit import WINDOW, RateCounter
from panelist.metrics.store import pg, pgschema


class DatabaseRateCounter:
    """Admits or refuses requests for keys by name; one per server, sharing a database."""

    retry_after = staticmethod(RateCounter.retry_after)

    def __init__(self, url: str, *, application: str = "panelist-rates"):
        self.db = pg.Database(url, application=application)

    def admit(self, name: str, limit: int, now: float | None = None, cost: int = 1) -> float | None:
        """Count ``cost`` requests for ``name`` at once, in one statement, all or none (``cost
        <= limit``): None if admitted, else the seconds to wait."""
        pgschema.ensure(self.db)
        # a pooled connection found dead (the server restarted) is retried on a new one: at
        # worst a request that did count is counted twice, which only ever refuses sooner
        rows = self.db.execute(
            "SELECT panelist_rate_take(%s, %s, %s, %s, %s)", (name, limit, cost, WINDOW, now)
        )
        wait = float(rows[0][0])
        return None if wait <= 0 else wait

    def close(self) -> None:
        self.db.close()
