"""Leases on PostgreSQL: a row that says who holds something until when, on the database's clock,
renewed by its holder while it works. What must hold across instances and outlive a connection
is a lease, not a session advisory lock: a lock ends with its connection (a terminated backend
frees it while the process that held it still works) and never ends for a frozen holder whose
connection stays open; a lease ends when its holder stops renewing it, whatever the connection
does.

* ``period`` (``PANELIST_LEASE_SECONDS``, default ``PERIOD``): how long a lease lasts past its
  last renewal. A holder renews every third of it, so two renewals in a row may fail (a slow
  statement, a connection cut and made again) before it lapses. A holder frozen or cut off for
  longer loses it, and another may take it one period after the last renewal.
* Every time compared is the database's (``clock_timestamp()``): hosts whose clocks disagree
  agree on when a lease ends.
* ``Lease`` is one named lease (``leases``): held by one holder at a time; its ``term`` counts
  the times it changed hands. A holder believes it holds the lease only until its own clock
  passes the moment it *sent* the last renewal that succeeded plus the period, which is never
  later than the expiry the database wrote (the statement ran after it was sent): a holder
  that was frozen does not act on a lease it may have lost until it has renewed it again.
* ``Renewer`` is the thread that renews, every third of the period, until ``close``.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time

from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.store import envsetting

PERIOD = 10.0  # seconds a lease lasts unless renewed
VARIABLE = "PANELIST_LEASE_SECONDS"
MIN_PERIOD = 0.5


def period_of_env(env=None) -> float:
    """The lease period the environment sets, else ``PERIOD``; a bad value names the variable."""
    env = os.environ if env is None else env
    return envsetting.seconds(env, VARIABLE, PERIOD, low=MIN_PERIOD, high=3600, low_included=True)


def holder_name(role: str) -> str:
    """Who holds a lease, for an operator reading the table: host, process and a random tag
    (two processes of one host, or one process's two parts, never share a name)."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Lease:
    """One named lease on ``db`` (a ``pg.Database`` migrated to schema version 6)."""

    def __init__(self, db, name: str, holder: str, period: float, *, clock=time.monotonic):
        self.db = db
        self.name = name
        self.holder = holder
        self.period = float(period)
        self._clock = clock
        self._until = 0.0  # this process's clock: when its belief in holding it ends
        self.term: int | None = None

    def renew(self) -> bool:
        """Take the lease if it is free or lapsed, or extend it if it is ours; whether this
        holds it now. Raises ``DatabaseUnreachable`` when the database cannot say."""
        sent = self._clock()
        rows = self.db.execute(
            "INSERT INTO leases AS l (name, holder, term, until) "
            "VALUES (%s, %s, 1, clock_timestamp() + make_interval(secs => %s)) "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until, "
            "term = l.term + (l.holder <> EXCLUDED.holder)::int, "
            "since = CASE WHEN l.holder = EXCLUDED.holder THEN l.since ELSE clock_timestamp() END "
            "WHERE l.holder = EXCLUDED.holder OR l.until <= clock_timestamp() "
            "RETURNING term",
            (self.name, self.holder, self.period),
        )
        if rows:
            self._until = sent + self.period
            self.term = int(rows[0][0])
            return True
        self._until = 0.0
        return False

    def held(self) -> bool:
        """Whether this holder may act on the lease now (see the module's invariants)."""
        return self._clock() < self._until

    def release(self) -> None:
        """Give the lease up at once (a clean stop), so another need not wait out the period;
        never raises."""
        self._until = 0.0
        try:
            # ended, not removed: the next holder's term still counts on from this one
            self.db.execute(
                "UPDATE leases SET until = clock_timestamp() WHERE name = %s AND holder = %s",
                (self.name, self.holder),
                retry=False,
            )
        except DatabaseUnreachable:
            pass  # it lapses by itself

    def who(self) -> dict | None:
        """The lease's row as the database has it: holder, term, seconds left (None: none)."""
        rows = self.db.execute(
            "SELECT holder, term, extract(epoch FROM until - clock_timestamp()) FROM leases "
            "WHERE name = %s",
            (self.name,),
        )
        if not rows:
            return None
        return {
            "holder": rows[0][0],
            "term": int(rows[0][1]),
            "seconds_left": round(max(0.0, float(rows[0][2])), 1),
        }


class Renewer:
    """A thread that calls ``renew()`` every third of ``period`` until ``close``; a renewal that
    raises is tried again at the next turn (the lease lapses only after a whole period without
    one). ``passes`` counts the turns done, for a test to wait on."""

    def __init__(self, renew, period: float, name: str):
        self._renew = renew
        self.every = period / 3
        self._stop = threading.Event()
        self._turn = threading.Condition()
        self.passes = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def start(self) -> Renewer:
        with self._turn:
            if not self._started and not self._stop.is_set():
                self._started = True
                self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._renew()
            except DatabaseUnreachable:
                pass  # logged by the database once; the next turn tries again
            except Exception:  # noqa: BLE001 - the renewals must outlive one bad turn
                import traceback

                traceback.print_exc()
            with self._turn:
                self.passes += 1
                self._turn.notify_all()
            self._stop.wait(self.every)

    def wait_passes(self, n: int, timeout: float) -> bool:
        with self._turn:
            return self._turn.wait_for(lambda: self.passes >= n, timeout)

    def close(self) -> None:
        self._stop.set()
        if self._started and self._thread is not threading.current_thread():
            self._thread.join()
