"""The ledger's records on PostgreSQL (``DatabaseLogs``): the surface of ``logs.FileLogs`` over
the tables of ``store.pgschema``, so that several instances on several hosts share one ledger.

A record's position is its row id: evidence ids (``evidence`` and ``verdicts``) come from one
sequence, and a panel's pointer is its ``panels`` row id. The index (``index.py``) is fed the
same records as it is fed evidence.jsonl's lines, in the order their transactions first wrote (by
id within one), which for two records of one decision's key is the order they were written.

Invariants:

* No write waits for another instance: nothing on the write path takes a lock that a writer
  elsewhere holds (``pgschema`` version 6).
* Following never rescans and never passes over a row committed late: the index follows both
  evidence tables by transaction (``pgfollow.fresh``): its ``offset`` is a transaction horizon
  (every row below it folded) and its ``past`` the ``(xid, id)`` of the rows folded at or
  beyond it; so it folds each row once, as soon as it is committed. It reads only when
  something may be new: a ``NOTIFY`` arrived (``pgschema.CHANNEL``), this instance wrote, the
  decision section asks (``force``), or the listener is not connected (then every follow looks,
  so nothing is missed while notifications cannot arrive).
* ``Reader`` (and ``end``) count final rows only (``pgfollow.final``): a position is a horizon.
* A finished panel is one statement: its evidence and its ``panels`` row land together or not
  at all, and once only (a panel whose seq is stored is not written again).
* A decision (``exclusive(key)`` + ``write_held``) holds a transaction advisory lock on its own
  key (one call's verdict, one model's window) from before the ledger catches up until its
  record is committed: two decisions on one key take turns, decisions on others never wait.
* Anything that cannot reach the database raises ``errors.DatabaseUnreachable`` (503 with
  Retry-After); nothing is half-written, and the next call after the server is back succeeds.
* A finished panel's write (its seats were asked and paid) is tried again for up to the
  statement bound; if it still cannot land it is kept in the runs folder's ``Outbox`` and the
  error names the panel, which ``kept`` serves meanwhile. Kept writes are sent at start,
  before every write and at most every ``SEND_EVERY`` seconds of following; a write landing
  twice stores it once, so nothing is lost and nothing doubled.
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

from panelist.metrics import errors
from panelist.metrics.ledger import snapshot
from panelist.metrics.ledger.index import Index
from panelist.metrics.ledger.outbox import Outbox
from panelist.metrics.store import jsonwire, pg, pgfollow, pgschema

BATCH = 5000  # evidence rows read per statement while following
SEND_EVERY = 1.0  # seconds between two tries of the outbox while following
CLOCK_EVERY = 60.0  # seconds between two measures of this host's clock's offset
_FOLLOW = pgfollow.query(
    pgfollow.part("evidence", "record", fresh=True), pgfollow.part("verdicts", "record", fresh=True)
)
_FINAL = pgfollow.query(pgfollow.part("evidence", "record"), pgfollow.part("verdicts", "record"))
_AT = (
    "SELECT id, record FROM evidence WHERE id = ANY(%(ids)s) "
    "UNION ALL SELECT id, record FROM verdicts WHERE id = ANY(%(ids)s)"
)
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

    def __init__(
        self,
        url: str,
        snapshot_path: Path | None = None,
        *,
        clock=time.time,
        outbox: Path | None = None,
    ):
        self.db = pg.Database(url, application="panelist-ledger")
        self.shown = self.db.shown
        try:
            version = (
                self.db.execute("SELECT max(version) FROM panelist_schema")[0][0]
                if self.db.execute("SELECT to_regclass('panelist_schema') IS NOT NULL")[0][0]
                else None
            )
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
        # another one, whose records the index never counted ("/xid": positions are
        # transaction horizons, so a snapshot that counted row ids is not loaded)
        self.identity = self.db.execute(
            "SELECT current_database() || '/' || 'evidence'::regclass::oid::text || '/xid'"
        )[0][0]
        try:
            self.db.run(lambda conn: pgfollow.settle(conn, pgschema.FOLLOWED))
        except BaseException:
            self.db.close()
            raise
        self._known = 0  # panel seqs known to be handed out (the counter only grows)
        self._lock = threading.Lock()
        self._news = 1  # bumped for each notification, reconnect and own write
        self._seen = 0  # _news when the last follow began
        self._listener = self.db.listener(pgschema.CHANNEL, self._heard, self._heard).start()
        self._held = threading.local()  # the decision section's connection, in its thread
        self._snapshot = snapshot_path
        self._clock = clock  # this host's epoch seconds
        self._offset: tuple[float, float] | None = None  # (measured at, database - here)
        self.outbox = Outbox(outbox) if outbox is not None else None
        self._sent_at = 0.0  # when following last tried the outbox
        self.send_kept()

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
        return snapshot.load_if(
            self._snapshot, index, lambda ino, offset: ino == self.identity and 0 <= offset <= top
        )

    def save_snapshot(self, state: dict) -> None:
        if self._snapshot is not None:
            snapshot.save(self._snapshot, state)

    def follow(self, index: Index, now: float, force: bool = False) -> int:
        if index.ino != self.identity:
            index.reset(self.identity)
        if (
            self.outbox is not None
            and self.outbox.pending()
            and time.monotonic() - self._sent_at >= SEND_EVERY
        ):
            self.send_kept()
        with self._lock:
            news = self._news
        if not force and news == self._seen and self._listener.listening:
            return 0
        self._seen = news
        abandoned = self._abandoned() if index.offset == 0 else frozenset()
        total = 0
        for rows, cursor in pgfollow.fresh(self.db, _FOLLOW, index.offset, index.past, BATCH):
            try:
                if rows:
                    pairs = [(i, r) for _, i, r in rows]
                    if any(r.get("kind") == "cooldown" for _, r in pairs):
                        pairs = self._local_times(pairs)
                    total += index.fold_all(pairs, now, abandoned)
            finally:  # a batch is taken whole, as a file's lines are, even if a fold failed
                index.past.update((x, i) for x, i, _ in rows)
                if cursor != index.offset:
                    index.offset = cursor
                    index.past = pgfollow.prune(index.past, cursor)
        return total

    def _local_times(self, rows: list) -> list:
        """``rows`` with each cooldown's end moved from the database's clock onto this host's
        (a record of an older version, written on its host's clock, is taken as it is)."""
        offset = self.clock_offset()
        return [
            (i, {**r, "until": r["until"] - offset})
            if r.get("kind") == "cooldown"
            and r.get("clock") == "database"
            and isinstance(r.get("until"), (int, float))
            else (i, r)
            for i, r in rows
        ]

    def _abandoned(self) -> frozenset[str]:
        """Panels whose record says the caller left: imported ones may predate their
        ``"abandoned"`` evidence (read once, for a replay from the first id)."""
        rows = self.db.execute("SELECT panel FROM panels WHERE record @> '{\"abandoned\": true}'")
        return frozenset(r[0] for r in rows)

    def append(self, *records: dict) -> None:
        if not records:
            return
        self.send_kept()
        self.db.execute("SELECT panelist_append(%s::jsonb)", (to_json(list(records)),), retry=False)
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
        """``(this database, the horizon)``: a ``reader`` from it reads what is final after."""
        return self.identity, pgfollow.horizon(self.db)

    def reader(self, pos: int) -> "Reader":
        return Reader(self.db, pos)

    @contextmanager
    def exclusive(self, key: str):
        """A lock on ``key`` held in one transaction on one connection, released at its end
        (a 64-bit hash of the key: two keys may share a lock, and then merely take turns)."""
        with self.db.begin() as conn:
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                ("panelist decision " + key,),
            )
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
            if count > 1:  # consecutive seqs: every multi-seq reservation takes turns
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (pgschema.APPEND_LOCK + 1,))
            return [
                r[0]
                for r in conn.execute(
                    "SELECT nextval('panel_ids') FROM generate_series(1, %s)", (count,)
                )
            ]

        # a sequence is never rolled back: a retry may skip seqs, never repeat one
        seqs = (
            [self.db.execute("SELECT nextval('panel_ids')")[0][0]]
            if count == 1
            else sorted(self.db.transaction(take))
        )
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
        # one statement, so one round trip and one commit; a panel stored already (a retry
        # after a lost COMMIT) is left alone with its evidence
        self.send_kept()
        try:
            self._put_again(pairs, abandoned)
        except errors.DatabaseUnreachable:
            if self.outbox is None:
                raise
            self.outbox.keep(pairs, abandoned)
            names = ", ".join(str(r.get("panel")) for _, r in pairs)
            raise errors.DatabaseUnreachable(
                f"the database is unreachable; the answers of panel {names} are kept on this "
                f"instance and stored once the database is back (nothing is lost or written "
                f"twice): read them with GET /bench/panels/{names.split(', ')[0]}",
                retry_after=pg.RETRY_AFTER,
            ) from None

    def _put(self, pairs: list[tuple[int, dict]], abandoned: list[dict]) -> None:
        rows = [[seq, record.get("panel"), record] for seq, record in pairs]
        # safe to send twice: a seq stored already is left alone with its evidence
        self.db.execute(
            "SELECT panelist_put_panels(%s::jsonb, %s::jsonb)", (to_json(rows), to_json(abandoned))
        )
        self._heard()

    def _put_again(self, pairs: list[tuple[int, dict]], abandoned: list[dict]) -> None:
        """``_put``, tried again after a failure until the statement bound has passed."""
        deadline = time.monotonic() + self.db.bounds.statement
        pause = 0.1
        while True:
            try:
                return self._put(pairs, abandoned)
            except errors.DatabaseUnreachable:
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(1.0, pause * 2)

    def send_kept(self) -> int:
        """Send the outbox's kept writes; how many landed (0 when the database is still away:
        they stay kept)."""
        if self.outbox is None or not self.outbox.pending():
            return 0
        self._sent_at = time.monotonic()
        try:
            return self.outbox.send(self._put)
        except errors.DatabaseUnreachable:
            return 0

    def kept(self, seq: int) -> dict | None:
        if self.outbox is None or not self.outbox.pending():
            return None
        return self.outbox.find(seq)

    def pointer(self, seq: int) -> int | None:
        rows = self.db.execute("SELECT id FROM panels WHERE seq = %s", (seq,))
        if rows:
            return rows[0][0]
        return 0 if self.reserved(seq) else None

    def count(self):
        return None, self.db.execute(_COUNT)[0][0]

    def slots(self, handle, first: int, n: int):
        rows = self.db.execute(
            "SELECT seq, id FROM panels WHERE seq >= %s AND seq < %s", (first, first + n)
        )
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
        found = dict(
            self.db.execute("SELECT id, record FROM panels WHERE id = ANY(%s)", (list(pointers),))
        )
        return [found.get(p) for p in pointers]

    def recent_panels(self, n: int) -> list[dict]:
        if n <= 0:
            return []
        return [
            r[0]
            for r in self.db.execute("SELECT record FROM panels ORDER BY id DESC LIMIT %s", (n,))
        ]

    def close(self) -> None:
        self._listener.close()
        self.db.close()


class Reader:
    """Follows the evidence tables from a horizon, as ``jsonl.Tail`` follows a file: ``read``
    yields the final rows (``pgfollow.final``), ``offset`` is the horizon it got to."""

    def __init__(self, db, offset: int):
        self.db = db
        self.offset = offset

    def read(self):
        for rows, cursor in pgfollow.final(self.db, _FINAL, self.offset, BATCH):
            for _, pos, record in rows:
                yield pos, record
            self.offset = cursor
