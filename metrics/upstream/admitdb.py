"""Admission's shared state in PostgreSQL (``DatabaseStore``), for gateway instances on several
machines sharing one database: the same slots, rate logs and pauses as ``admitfiles``, held so
that the limits count every call of every instance.

* A slot is a session advisory lock on (the scope's id in ``admission_scopes``, the slot's
  index), taken with ``pg_try_advisory_lock`` on one connection this process keeps for its
  slots. A lock belongs to the session: an instance that dies (even by SIGKILL) ends its
  connection and the server frees its slots, as the kernel frees a dead process's ``flock``.
  Session locks stack within one session, so this process keeps which slots it holds and never
  asks for one of them again.
* A scope's rate log is its row of ``admission_rates``, locked (``FOR UPDATE``, the model's
  row before the endpoint's) for the one statement that judges a call and records it: the
  ``rpm``-th latest admission must lie a span before now, exactly as in the files.
* A pause is a row of ``admission_pauses`` with ``until``; a later pause extends it, an earlier
  one never shortens it.
* Every time that several instances compare is the database's clock (``clock_timestamp()``),
  the one clock that hosts with drifting clocks share.
* If the database cannot be reached, every call raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After): no call is admitted that the shared counts did not admit. If the slot
  connection breaks while calls hold slots, the server has freed them; those calls run on, and
  their slots are not given back twice.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.store import jsonwire, pg, pgschema
from panelist.metrics.upstream.admitfiles import MAX_WHY


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

    def __init__(self, url: str, *, application: str = "panelist-admission"):
        self.db = pg.Database(url, application=application)
        self._operational = pg.driver().OperationalError
        self._lock = threading.Lock()          # the scopes' ids, the schema check
        self._ids: dict[str, int] = {}
        self._scopes: dict[str, Slots] = {}
        self._ready = False
        self._slot_lock = threading.Lock()     # the slot connection and what it holds
        self._conn = None
        self._generation = 0
        self._held: dict[tuple[str, int], int] = {}   # (scope, slot) -> the connection's generation

    # -- the schema and the scopes' ids ---------------------------------------------------------
    def _migrated(self) -> None:
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                pgschema.migrate(self.db)
                self._ready = True

    def _id(self, key: str) -> int:
        got = self._ids.get(key)
        if got is None:
            self._migrated()
            rows = self.db.execute(
                "INSERT INTO admission_scopes (scope) VALUES (%s) ON CONFLICT (scope) "
                "DO UPDATE SET scope = EXCLUDED.scope RETURNING id", (key,))
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

    # -- slots ----------------------------------------------------------------------------------
    def _session(self):
        """The slot connection, opened when there is none (under ``_slot_lock``)."""
        if self._conn is None or self._conn.closed:
            self._conn = self.db.connect()
            self._generation += 1
        return self._conn

    def _lost(self, exc: Exception) -> DatabaseUnreachable:
        """The slot connection failed: the server freed every lock it held."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        return self.db.unreachable(exc)

    def take(self, key: str, n: int) -> int | None:
        scope_id = self._id(key)
        with self._slot_lock:
            mine = [i for (k, i) in self._held if k == key]
            for attempt in range(2):
                fresh = self._conn is None or self._conn.closed
                conn = self._session()
                try:
                    row = conn.execute("SELECT panelist_take_slot(%s, %s, %s)",
                                       (scope_id, n, mine)).fetchone()
                    break
                except self._operational as exc:
                    # a connection that died while idle (a server restart) held nothing: one
                    # more try on a new one; a new one failing means the server is away
                    lost = self._lost(exc)
                    if fresh or attempt:
                        raise lost from None
            i = int(row[0])
            if i < 0:
                return None
            self._held[(key, i)] = self._generation
            return i

    def give(self, key: str, i: int) -> None:
        """Free a slot; never raises (it runs as a call ends, whatever ended it)."""
        scope_id = self._ids.get(key)
        with self._slot_lock:
            generation = self._held.pop((key, i), None)
            if generation is None or scope_id is None or generation != self._generation \
                    or self._conn is None:
                return   # its connection is gone, and the lock with it
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (scope_id, i))
            except self._operational as exc:
                self._lost(exc)

    def in_use(self, key: str, n: int) -> int:
        """Slots below ``n`` held now, by any instance."""
        rows = self.db.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND objsubid = 2 AND classid = %s::oid AND objid < %s::oid",
            (self._id(key), n))
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
        rows = self.db.execute("SELECT panelist_admission_rate(%s, %s, %s, %s)",
                               (keys, rpms, span, record))
        later, worst, judged = rows[0][0]
        if later > 0:
            return float(later), scopes[int(worst) - 1], float(judged)
        return 0.0, None, float(judged)

    def recent(self, state: Slots, since: float) -> int:
        ago = max(0.0, time.time() - since)   # how far back, on the database's clock
        self._migrated()
        rows = self.db.execute(
            "SELECT coalesce((SELECT count(*) FROM admission_rates, unnest(times) x "
            "WHERE scope = %s AND x > extract(epoch FROM clock_timestamp()) - %s), 0)",
            (state.key, ago))
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
            (endpoint, seconds, round(seconds, 3), jsonwire.clean(str(why))[:MAX_WHY]))

    def resume(self, endpoint: str) -> bool:
        self._migrated()
        return bool(self.db.execute(
            "DELETE FROM admission_pauses WHERE endpoint = %s RETURNING 1", (endpoint,)))

    def paused(self, endpoint: str) -> tuple[float, str]:
        self._migrated()
        rows = self.db.execute(
            "SELECT until - extract(epoch FROM clock_timestamp()), why FROM admission_pauses "
            "WHERE endpoint = %s", (endpoint,))
        if not rows or rows[0][0] <= 0:
            return 0.0, ""
        return float(rows[0][0]), rows[0][1]

    def close(self) -> None:
        with self._slot_lock:
            conn, self._conn = self._conn, None
            self._held.clear()
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        self.db.close()
