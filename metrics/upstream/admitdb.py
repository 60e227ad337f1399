"""Admission's shared state in PostgreSQL (``DatabaseStore``), for gateway instances on several
machines sharing one database: the same slots, rate logs and pauses as ``admitfiles``, held so
that the limits count every call of every instance.

* A slot is a lease (``store.pglease``): a row of ``admission_leases`` for each call in flight
  in a scope, with an expiry on the database's clock that a thread of this process renews every
  third of the lease period while the call runs. ``panelist_take_lease`` admits a call only
  while fewer than ``max_concurrent`` leases of its scope are live, and counts a lease past its
  expiry as free (its holder died, froze or lost the network for a whole period). The slot's
  handle (what ``take`` returns and ``give`` takes back) is the lease's token.
* A lease does not depend on a connection: a connection cut or terminated under a running call
  leaves its lease in place (the next renewal comes on a new connection), so the slot is never
  handed out while the call still runs. An instance killed outright stops renewing: its slots
  come free one lease period later.
* A lease lost while its call still ran (the holder frozen or cut off longer than a period, and
  the lease taken as lapsed) is put back by the holder's next renewal, whatever the count: the
  call goes on (it may already be answered upstream, and cutting it would waste what it cost),
  and its slot is counted as occupied until the call ends, so that no new call is admitted in
  its place until the count is under the limit again. The call is never admitted a second time
  (no second slot, no second mark in the rate log). ``reinstated`` counts such leases.
* ``give`` removes only the lease with its own token (never one another holder took), and a
  lease it could not remove (the database unreachable) lapses one period later: a slot is at
  worst held too long, never handed out twice.
* A scope's rate log is its row of ``admission_rates``, locked (``FOR UPDATE``, the model's
  row before the endpoint's) for the one statement that judges a call and records it: the
  ``rpm``-th latest admission must lie a span before now, exactly as in the files.
* A pause is a row of ``admission_pauses`` with ``until``; a later pause extends it, an earlier
  one never shortens it.
* Every time that several instances compare is the database's clock (``clock_timestamp()``),
  the one clock that hosts with drifting clocks share.
* If the database cannot be reached, every call raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After): no call is admitted that the shared counts did not admit. Calls already running
  keep their leases as long as a renewal gets through within the period.
"""

from __future__ import annotations

import logging
import threading
import time
from urllib.parse import quote

from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.store import jsonwire, pg, pglease, pgschema
from panelist.metrics.upstream.admitfiles import MAX_WHY

log = logging.getLogger("panelist.admission")


class Slots:
    """One scope's slots: ``take``, ``give`` and ``in_use``, as ``admitfiles.Files`` has."""

    def __init__(self, store: "DatabaseStore", key: str):
        self.store = store
        self.key = key

    def take(self, n: int) -> int | None:
        return self.store.take(self.key, n)

    def give(self, i: int) -> None:
        self.store.give(self.key, i)

    def in_use(self, n: int) -> int:
        return self.store.in_use(self.key, n)


class DatabaseStore:
    """Slots, rate logs and pauses of every instance on one database."""

    # a slot freed by another instance is seen only by asking the database: a gentler poll
    # than between the processes of one machine, since each look is a round trip
    poll = (0.01, 0.1)

    def __init__(
        self, url: str, *, application: str = "panelist-admission", lease: float | None = None
    ):
        """``lease``: the seconds a slot's lease lasts unless renewed (default: the
        environment's ``PANELIST_LEASE_SECONDS``, else ``pglease.PERIOD``)."""
        self.db = pg.Database(url, application=application)
        self.lease = pglease.period_of_env() if lease is None else float(lease)
        self.holder = pglease.holder_name("admission")
        self._lock = threading.Lock()  # the scopes' ids
        self._ids: dict[str, int] = {}
        self._scopes: dict[str, Slots] = {}
        self._held_lock = threading.Lock()  # the leases this process holds
        self._held: dict[int, int] = {}  # token -> the scope's id
        self.reinstated = 0  # leases put back after they lapsed mid-call
        self.renewer = pglease.Renewer(self._renew, self.lease, "admission-leases")

    # -- the schema and the scopes' ids ---------------------------------------------------------
    def _migrated(self) -> None:
        pgschema.ensure(self.db)

    def _id(self, key: str) -> int:
        got = self._ids.get(key)
        if got is None:
            self._migrated()
            rows = self.db.execute(
                "INSERT INTO admission_scopes (scope) VALUES (%s) ON CONFLICT (scope) "
                "DO UPDATE SET scope = EXCLUDED.scope RETURNING id",
                (key,),
            )
            got = self._ids[key] = int(rows[0][0])
        return got

    @staticmethod
    def _key(kind: str, name: str, endpoint: str) -> str:
        # names %-quoted, so two scopes never share a key (as the files' folders are named)
        if kind == "endpoint":
            return "endpoint/" + quote(name, safe="")
        return f"model/{quote(endpoint, safe='')}/{quote(name, safe='')}"

    def scope(self, kind: str, name: str, endpoint: str) -> Slots:
        key = self._key(kind, name, endpoint)
        got = self._scopes.get(key)
        if got is None:
            with self._lock:
                got = self._scopes.setdefault(key, Slots(self, key))
        return got

    # -- slots: leases --------------------------------------------------------------------------
    def take(self, key: str, n: int) -> int | None:
        """A lease on one of the scope's ``n`` slots (its token), or None when ``n`` are live.
        Retried once on a fresh connection: a take whose answer was lost holds a slot nobody
        renews, which comes free one period later (too careful, never over the limit)."""
        scope_id = self._id(key)
        rows = self.db.execute(
            "SELECT panelist_take_lease(%s, %s, %s, %s)", (scope_id, n, self.holder, self.lease)
        )
        token = int(rows[0][0])
        if token < 0:
            return None
        with self._held_lock:
            self._held[token] = scope_id
        self.renewer.start()
        return token

    def give(self, key: str, token: int) -> None:
        """End a call's lease; never raises (it runs as a call ends, whatever ended it)."""
        with self._held_lock:
            if self._held.pop(token, None) is None:
                return
        try:
            self.db.execute("DELETE FROM admission_leases WHERE token = %s", (token,))
        except DatabaseUnreachable:
            pass  # no longer renewed: it lapses one period from its last renewal

    def _renew(self) -> None:
        """Every lease of a call still running, moved one period on; one lost meanwhile is put
        back (see the module's invariants)."""
        with self._held_lock:
            held = dict(self._held)
        if not held:
            return
        rows = self.db.execute(
            "SELECT panelist_renew_leases(%s, %s, %s, %s)",
            (list(held), list(held.values()), self.holder, self.lease),
        )
        back = [int(t) for t in rows[0][0] or ()]
        with self._held_lock:
            # a call that ended while the renewal ran was given back before it: its lease, put
            # back by the renewal, goes again
            ended = [t for t in back if t not in self._held]
            self.reinstated += len(back) - len(ended)
        if len(back) > len(ended):
            log.warning(
                "%d admission lease(s) lapsed while their calls ran (this process was "
                "frozen or cut off from the database for over %g s); they are counted "
                "again until those calls end",
                len(back) - len(ended),
                self.lease,
            )
        if ended:
            self.db.execute("DELETE FROM admission_leases WHERE token = ANY(%s)", (ended,))

    def in_use(self, key: str, n: int) -> int:
        """Calls of the scope holding a live lease now, on any instance (a lease put back after
        it lapsed counts too, so this may exceed ``n`` for a while)."""
        rows = self.db.execute(
            "SELECT count(*) FROM admission_leases WHERE scope = %s AND until > clock_timestamp()",
            (self._id(key),),
        )
        return int(rows[0][0])

    # -- rate logs ------------------------------------------------------------------------------
    def rate(self, scopes, at: float, span: float, *, record: bool):
        """As ``admitfiles.FileStore.rate``, judged and recorded on the database's clock,
        whose time is returned (``at`` is this host's, not shared)."""
        self._migrated()
        keys = [s.state.key for s in scopes]
        rpms = [int(s.limits.rpm) for s in scopes]
        # retried on a new connection when a pooled one was found dead: at worst an admission
        # is logged twice, which only ever holds the next call back longer
        rows = self.db.execute(
            "SELECT panelist_admission_rate(%s, %s, %s, %s)", (keys, rpms, span, record)
        )
        later, worst, judged = rows[0][0]
        if later > 0:
            return float(later), scopes[int(worst) - 1], float(judged)
        return 0.0, None, float(judged)

    def recent(self, state: Slots, since: float) -> int:
        ago = max(0.0, time.time() - since)  # how far back, on the database's clock
        self._migrated()
        rows = self.db.execute(
            "SELECT coalesce((SELECT count(*) FROM admission_rates, unnest(times) x "
            "WHERE scope = %s AND x > extract(epoch FROM clock_timestamp()) - %s), 0)",
            (state.key, ago),
        )
        return int(rows[0][0])

    # -- pauses ---------------------------------------------------------------------------------
    def pause(self, endpoint: str, until: float, seconds: float, why: str) -> None:
        """Pause ``endpoint`` for ``seconds`` from now on the database's clock (``until`` is
        this host's), unless a pause already lasts longer."""
        self._migrated()
        self.db.execute(
            "INSERT INTO admission_pauses AS p (endpoint, until, seconds, why) "
            "VALUES (%s, extract(epoch FROM clock_timestamp()) + %s, %s, %s) "
            "ON CONFLICT (endpoint) DO UPDATE SET until = EXCLUDED.until, "
            "seconds = EXCLUDED.seconds, why = EXCLUDED.why, ts = now() "
            "WHERE p.until < EXCLUDED.until",
            (endpoint, seconds, round(seconds, 3), jsonwire.clean(str(why))[:MAX_WHY]),
        )

    def resume(self, endpoint: str) -> bool:
        self._migrated()
        return bool(
            self.db.execute(
                "DELETE FROM admission_pauses WHERE endpoint = %s RETURNING 1", (endpoint,)
            )
        )

    def paused(self, endpoint: str) -> tuple[float, str]:
        self._migrated()
        rows = self.db.execute(
            "SELECT until - extract(epoch FROM clock_timestamp()), why FROM admission_pauses "
            "WHERE endpoint = %s",
            (endpoint,),
        )
        if not rows or rows[0][0] <= 0:
            return 0.0, ""
        return float(rows[0][0]), rows[0][1]

    def close(self) -> None:
        """Stop renewing; the leases of calls still running lapse one period later (a server
        closes its calls before its admission)."""
        self.renewer.close()
        with self._held_lock:
            self._held.clear()
        self.db.close()
