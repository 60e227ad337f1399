"""What keys and collections spent, counted once across every instance on one database
(``DatabaseSpend``): what ``panel.budgets.Spend`` keeps in the data folder's files, one row of
``spend`` per subject, period (``day``, ``month``) and period number.

Invariants:

* An addition is one statement that adds to both of its rows (inserted at zero when new), so
  instances adding at once never lose one another's spend.
* A read that cannot reach the database raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After): a panel under a cap is never let through unjudged.
* An addition that cannot reach the database is kept and added with the next one that does (the
  panel it charges was already answered): spend is lost only with the process that kept it.
  A connection found dead is retried on a new one, so at worst an amount is counted twice,
  which only ever refuses sooner.
* Days and months are numbered by the caller's clock (``budgets.day_of``, ``month_of``), as the
  files number them.
"""

from __future__ import annotations

import threading
import time

from panelist.metrics import errors
from panelist.metrics.panel.budgets import day_of, month_of
from panelist.metrics.store import pg, pgschema

_ADD = """INSERT INTO spend (subject, period, n, amount)
    VALUES (%s, 'day', %s, %s), (%s, 'month', %s, %s)
    ON CONFLICT (subject, period, n) DO UPDATE SET amount = spend.amount + excluded.amount"""
_READ = """SELECT period, amount FROM spend
    WHERE subject = %s AND ((period = 'day' AND n = %s) OR (period = 'month' AND n = %s))"""


class DatabaseSpend:
    """``Spend`` on a database: ``spent`` and ``add`` by subject (``key-NAME``,
    ``collection-NAME``)."""

    def __init__(self, url: str, *, application: str = "panelist-spend"):
        self.db = pg.Database(url, application=application)
        self._lock = threading.Lock()
        self._owed: list[tuple[str, float, float]] = []  # (subject, amount, when) not yet added

    def spent(self, subject: str, t: float | None = None) -> dict:
        """``{"day", "month"}``: what ``subject`` spent in the current UTC day and month."""
        t = time.time() if t is None else t
        pgschema.ensure(self.db)
        self._pay_owed()
        rows = self.db.execute(_READ, (subject, day_of(t), month_of(t)))
        found = {period: float(value) for period, value in rows}
        return {"day": found.get("day", 0.0), "month": found.get("month", 0.0)}

    def add(self, subject: str, value: float, t: float | None = None) -> None:
        """Add ``value`` to ``subject``'s day and month of ``t`` (now), now or, if the database
        is away, with the next addition or read that reaches it."""
        with self._lock:
            self._owed.append((subject, value, time.time() if t is None else t))
        try:
            pgschema.ensure(self.db)
            self._pay_owed()
        except errors.DatabaseUnreachable:
            pass  # kept in _owed: the panel is answered and logged; its cost waits

    def _pay_owed(self) -> None:
        while True:
            with self._lock:
                if not self._owed:
                    return
                subject, value, t = self._owed.pop(0)
            try:
                day, month = day_of(t), month_of(t)
                self.db.execute(_ADD, (subject, day, value, subject, month, value))
            except BaseException:
                with self._lock:
                    self._owed.insert(0, (subject, value, t))
                raise

    def close(self) -> None:
        try:
            self._pay_owed()
        except errors.DatabaseUnreachable:
            pass  # nothing more can be done for it: the process is ending
        self.db.close()
