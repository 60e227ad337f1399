"""The ledger's records on PostgreSQL (``DatabaseLogs``): the surface of ``logs.FileLogs`` over
the tables of ``store.pgschema``, so that several instances on several hosts share one ledger.

A record's position is its row id: evidence ids (``evidence`` and ``verdicts``) come from one
sequence, and a panel's pointer is its ``panels`` row id. The index (``index.py``) is fed the
same records, in id order, as it is fed evidence.jsonl's lines in byte order.

Invariants:

* Following never rescans: it reads ``id > last`` from both evidence tables (by their primary
  keys) and only when something may be new: a ``NOTIFY`` arrived (``pgschema.CHANNEL``), this
  instance wrote, the decision section asks (``force``), or the listener is not connected (then
  every follow looks, so nothing is missed while notifications cannot arrive).
* Ids become visible in id order (``panelist_append`` holds the append lock until commit), so
  following by id never passes over a late row.
* A finished panel is one transaction: its ``"abandoned"`` evidence and its ``panels`` row land
  together or not at all.
* A decision (``exclusive`` + ``write_held``) holds the append lock in one transaction from
  before the ledger catches up until its record is committed, as the flock does for files.
* Anything that cannot reach the database raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After); nothing is half-written, and the next call after the server is back succeeds.
* A time another instance must read alike (a cooldown's end) is written on the database's
  clock (``shared_time``) and read back onto this host's (``follow``), by the offset between
  the two, measured by a query at most every ``CLOCK_EVERY`` seconds (within half its round
  trip): hosts whose clocks disagree still rest a model for the time its upstream asked.
* Each instance keeps its own snapshot of the index (index.json in its runs folder) for this
  database and the last id folded, so a restart folds only what came after; a snapshot of
  another database, or past the last id it holds (a database restored from an older backup),
  is not loaded, and the tables are folded from the first id.
"""

from __future__ import annotations

import threading
import time
from array import array
from contextlib import contextmanager
from pathlib import Path

from panelist.metrics.ledger import snapshot
from panelist.metrics.ledger.index import Index
from panelist.metrics.store import jsonwire, pg, pgschema

BATCH = 5000                  # evidence rows read per statement while following
CLOCK_EVERY = 60.0            # seconds between two measures of this host's clock's offset
_FOLLOW = ("SELECT id, record FROM evidence WHERE id > %(after)s "
           "UNION ALL SELECT id, record FROM verdicts WHERE id > %(after)s "
           "ORDER BY id LIMIT %(limit)s")
_AT = ("SELECT id, record FROM evidence WHERE id = ANY(%(ids)s) "
       "UNION ALL SELECT id, record FROM verdicts WHERE id = ANY(%(ids)s)")
_COUNT = "SELECT CASE WHEN is_called THEN last_value + 1 ELSE 0 END FROM panel_ids"


def to_json(value) -> str:
    """JSON text for a ``jsonb`` parameter. JSONB cannot hold U+0000, so that one character
    becomes U+FFFD (a record is never refused for it); every other character is kept."""
    text = jsonwire.dumps(value, separators=(",", ":"))
    if "\\u0000" in text:
        text = jsonwire.dumps(_no_nul(value), separators=(",", ":"))
    return text


def _no_nul(value):
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_no_nul(v) for v in value]
    return value


class DatabaseLogs:
    """One process's view of the ledger's tables; many threads and instances share them."""

    snapshots = True

    def __init__(self, url: str, snapshot_path: Path | None = None, *, clock=time.time):
        self.db = pg.Database(url, application="panelist-ledger")
        self.shown = self.db.shown
        try:
            version = self.db.execute("SELECT max(version) FROM panelist_schema")[0][0] \
                if self.db.execute("SELECT to_regclass('panelist_schema') IS NOT NULL")[0][0] \
                else None
        except BaseException:
            self.db.close()
            raise
        if version != pgschema.VERSION:
            # an older schema is brought up to date here; `panelist db init` does the same
            try:
                pgschema.migrate(self.db)
            except BaseException:
                self.db.close()
                raise
        # the database and its evidence table stand for a file's inode: a database made anew is
        # another one, whose records the index never counted
        self.identity = self.db.execute(
            "SELECT current_database() || '/' || 'evidence'::regclass::oid::text")[0][0]
        self._known = 0            # panel seqs known to be handed out (the counter only grows)
        self._lock = threading.Lock()
        self._news = 1             # bumped for each notification, reconnect and own write
        self._seen = 0             # _news when the last follow began
        self._listener = self.db.listener(pgschema.CHANNEL, self._heard, self._heard).start()
        self._held = threading.local()   # the decision section's connection, in its thread
        self._snapshot = snapshot_path
        self._clock = clock            # this host's epoch seconds
        self._offset: tuple[float, float] | None = None   # (measured at, database - here)

    def clock_offset(self) -> float:
        """The database's clock minus this host's, in seconds (measured again after
        ``CLOCK_EVERY`` seconds)."""
        now = time.monotonic()
        with self._lock:
            known = self._offset
        if known is not None and now - known[0] < CLOCK_EVERY:
            return known[1]
        before = self._clock()
        there = float(self.db.execute("SELECT extract(epoch FROM clock_timestamp())")[0][0])
        offset = there - (before + self._clock()) / 2
        with self._lock:
            self._offset = (now, offset)
        return offset

    def shared_time(self, local: float) -> float:
        return local + self.clock_offset()

    def _heard(self, *_):
        with self._lock:
            self._news += 1

    # ----------------------------------------------------------------- evidence

    def load_snapshot(self, index: Index) -> bool:
        """The instance's own snapshot (index.json in its runs folder), if it is one of this
        database up to an id the database holds."""
        if self._snapshot is None:
            return False
        top = self.end()[1]
        return snapshot.load_if(self._snapshot, index, lambda ino, offset:
                                ino == self.identity and 0 <= offset <= top)

    def save_snapshot(self, state: dict) -> None:
        if self._snapshot is not None:
            snapshot.save(self._snapshot, state)

    def follow(self, index: Index, now: float, force: bool = False) -> int:
        if index.ino != self.identity:
            index.reset(self.identity)
        with self._lock:
            news = self._news
        if not force and news == self._seen and self._listener.listening:
            return 0
        self._seen = news
        abandoned = self._abandoned() if index.offset == 0 else frozenset()
        total = 0
        while True:
            rows = self.db.execute(_FOLLOW, {"after": index.offset, "limit": BATCH})
            if not rows:
                return total
            if any(r[1].get("kind") == "cooldown" for r in rows):
                rows = self._local_times(rows)
            try:
                total += index.fold_all(rows, now, abandoned)
            finally:
                index.offset = rows[-1][0]
            if len(rows) < BATCH:
                return total

    def _local_times(self, rows: list) -> list:
        """``rows`` with each cooldown's end moved from the database's clock onto this host's
        (a record of an older version, written on its host's clock, is taken as it is)."""
        offset = self.clock_offset()
        return [(i, {**r, "until": r["until"] - offset})
                if r.get("kind") == "cooldown" and r.get("clock") == "database"
                and isinstance(r.get("until"), (int, float)) else (i, r) for i, r in rows]

    def _abandoned(self) -> frozenset[str]:
        """Panels whose record says the caller left: imported ones may predate their
        ``"abandoned"`` evidence (read once, for a replay from the first id)."""
        rows = self.db.execute("SELECT panel FROM panels WHERE record @> '{\"abandoned\": true}'")
        return frozenset(r[0] for r in rows)

    def append(self, *records: dict) -> None:
        if not records:
            return
        self.db.execute("SELECT panelist_append(%s::jsonb)", (to_json(list(records)),),
                        retry=False)
        self._heard()

    def evidence_at(self, pos: int) -> dict | None:
        return self.evidence_many([pos])[0]

    def evidence_many(self, positions: list[int]) -> list[dict | None]:
        if not positions:
            return []
        conn = getattr(self._held, "conn", None)
        params = {"ids": list(positions)}
        if conn is None:
            rows = self.db.execute(_AT, params)
        else:
            with self.db.reaching():
                rows = conn.execute(_AT, params).fetchall()
        found = dict(rows)
        return [found.get(p) for p in positions]

    def end(self) -> tuple[str, int]:
        """``(this database, the last evidence id)``."""
        top = self.db.execute("SELECT greatest((SELECT coalesce(max(id), 0) FROM evidence), "
                              "(SELECT coalesce(max(id), 0) FROM verdicts))")[0][0]
        return self.identity, top

    def reader(self, pos: int) -> "Reader":
        return Reader(self.db, pos)

    @contextmanager
    def exclusive(self):
        """The append lock held in one transaction on one connection, released at its end."""
        with self.db.begin() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (pgschema.APPEND_LOCK,))
            self._held.conn = conn
            try:
                yield
            finally:
                self._held.conn = None
        self._heard()

    def write_held(self, record: dict) -> None:
        with self.db.reaching():
            self._held.conn.execute("SELECT panelist_append(%s::jsonb)", (to_json([record]),))

    # ----------------------------------------------------------------- panels

    def reserve(self, count: int, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        day = time.strftime("%Y%m%d", time.gmtime(now))

        def take(conn):
            if count > 1:   # consecutive seqs: every multi-seq reservation takes turns
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (pgschema.APPEND_LOCK + 1,))
            return [r[0] for r in conn.execute(
                "SELECT nextval('panel_ids') FROM generate_series(1, %s)", (count,))]
        # a sequence is never rolled back: a retry may skip seqs, never repeat one
        seqs = [self.db.execute("SELECT nextval('panel_ids')")[0][0]] if count == 1 else \
            sorted(self.db.transaction(take))
        with self._lock:
            self._known = max(self._known, seqs[-1] + 1)
        return [f"p{day}-{seq}" for seq in seqs]

    def reserved(self, seq: int) -> bool:
        if seq < self._known:
            return True
        count = self.db.execute(_COUNT)[0][0]
        with self._lock:
            self._known = max(self._known, count)
        return seq < count

    def append_panels(self, pairs: list[tuple[int, dict]], abandoned: list[dict]) -> None:
        if not pairs:
            return
        # one statement, so one round trip and one commit (the append lock is taken inside,
        # and panel ids become visible in id order for the search index that follows them)
        rows = [[seq, record.get("panel"), record] for seq, record in pairs]
        self.db.execute("SELECT panelist_put_panels(%s::jsonb, %s::jsonb)",
                        (to_json(rows), to_json(abandoned)), retry=False)
        if abandoned:
            self._heard()

    def pointer(self, seq: int) -> int | None:
        rows = self.db.execute("SELECT id FROM panels WHERE seq = %s", (seq,))
        if rows:
            return rows[0][0]
        return 0 if self.reserved(seq) else None

    def count(self):
        return None, self.db.execute(_COUNT)[0][0]

    def slots(self, handle, first: int, n: int):
        rows = self.db.execute("SELECT seq, id FROM panels WHERE seq >= %s AND seq < %s",
                               (first, first + n))
        count = self.db.execute(_COUNT)[0][0]
        out = array("Q", bytes(8 * max(0, min(n, count - first))))
        for seq, pointer in rows:
            if seq - first < len(out):
                out[seq - first] = pointer
        return out

    def panel_at(self, pointer: int) -> dict | None:
        rows = self.db.execute("SELECT record FROM panels WHERE id = %s", (pointer,))
        return rows[0][0] if rows else None

    def panels_at(self, pointers: list[int]) -> list[dict | None]:
        if not pointers:
            return []
        found = dict(self.db.execute("SELECT id, record FROM panels WHERE id = ANY(%s)",
                                     (list(pointers),)))
        return [found.get(p) for p in pointers]

    def recent_panels(self, n: int) -> list[dict]:
        if n <= 0:
            return []
        return [r[0] for r in self.db.execute(
            "SELECT record FROM panels ORDER BY id DESC LIMIT %s", (n,))]

    def close(self) -> None:
        self._listener.close()
        self.db.close()


class Reader:
    """Follows the evidence tables from an id, as ``jsonl.Tail`` follows a file."""

    def __init__(self, db, offset: int):
        self.db = db
        self.offset = offset

    def read(self):
        while True:
            rows = self.db.execute(_FOLLOW, {"after": self.offset, "limit": BATCH})
            for pos, record in rows:
                self.offset = pos
                yield pos, record
            if len(rows) < BATCH:
                return
