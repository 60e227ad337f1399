"""Which instance runs a cluster's jobs (``Leader``): with a database, the one holding the lease
``leader`` (``store.pglease``: a row of ``leases`` with an expiry on the database's clock); without
one, every server runs its own data folder's jobs, as before.

Invariants:

* At most one instance leads at any moment: an instance acts as leader only while its own clock
  is short of the moment it sent its last successful renewal plus the lease period, which is
  never later than the expiry the database holds (``pglease.Lease.held``). A leader frozen or
  cut off stops leading by its own reckoning before another can take the lease.
* The leader renews every third of the period (``PANELIST_LEASE_SECONDS``); when it dies,
  freezes or loses the database, another instance takes the lease within one period of its last
  renewal, and runs the jobs from the next pass of its schedule.
* A server that closes gives the lease up, so another takes over at its next renewal instead
  of a period later.
* A database that cannot be reached makes no leader: the jobs wait (they would fail anyway),
  and the instance that reaches it first after takes the lease.
* A job already running when its instance stops leading runs to its end; the schedule's book
  (``schedule.DatabaseBook``) still lets each due time run once only, whoever leads.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from panelist.metrics.home import Home
from panelist.metrics.store import pglease

if TYPE_CHECKING:  # psycopg is loaded only for a server with a database
    from panelist.metrics.store import pg

NAME = "leader"

log = logging.getLogger("panelist.leader")


class Leader:
    """This instance's part in leading: ``leads()`` says whether it runs the jobs now."""

    def __init__(self, url: str | None, *, period: float | None = None):
        self.db: pg.Database | None = None  # set together with the lease, or neither
        self.lease: pglease.Lease | None = None
        self._changed = threading.Condition()
        self._leading = url is None
        if url is not None:
            from panelist.metrics.store import pg

            self.db = pg.Database(url, application="panelist-leader")
            period = pglease.period_of_env() if period is None else float(period)
            self.lease = pglease.Lease(self.db, NAME, pglease.holder_name(NAME), period)
            self.renewer = pglease.Renewer(self._renew, period, "leader")
        self._migrated = False

    @classmethod
    def of_home(cls, home: Home) -> Leader:
        return cls(home.database)

    def start(self) -> Leader:
        if self.lease is not None:
            self.renewer.start()
        return self

    def leads(self) -> bool:
        """Whether this instance runs the cluster's jobs now."""
        if self.lease is None:
            return True
        leading = self.lease.held()
        if leading != self._leading:
            self._note(leading)
        return leading

    def _renew(self) -> None:
        assert self.lease is not None  # the renewer is made, and runs, only with a lease
        if not self._migrated:
            from panelist.metrics.store import pgschema

            pgschema.migrate(self.db)
            self._migrated = True
        self._note(self.lease.renew())

    def _note(self, leading: bool) -> None:
        with self._changed:
            if leading == self._leading:
                return
            self._leading = leading
            self._changed.notify_all()
        if leading:
            term = self.lease.term if self.lease is not None else None
            log.info("this instance now runs the cluster's jobs (lease term %s)", term)
        else:
            log.info("this instance no longer runs the cluster's jobs")

    def wait_leading(self, leading: bool, timeout: float) -> bool:
        """Wait until this instance leads (or, ``leading`` False, stops leading)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._leading == leading, timeout)

    def status(self) -> dict:
        """For ``/ready``: whether this instance leads, and (with a database) the lease's term."""
        out: dict[str, bool | int | None] = {"leader": self.leads()}
        if self.lease is not None:
            out["term"] = self.lease.term if out["leader"] else None
        return out

    def close(self) -> None:
        if self.lease is None or self.db is None:  # both or neither
            return
        self.renewer.close()
        if self.lease.held():  # else it is another's, or lapses by itself
            self.lease.release()
        self.db.close()
