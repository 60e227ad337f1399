"""The panels' search index fed from PostgreSQL (``DatabaseSearchIndex``): the same local
SQLite index as ``search.SearchIndex`` (its tables, queries, one writer and background build),
following the database's ``panels`` and evidence tables by id instead of the two logs by byte
offset, so the panels page's filters answer the same on an instance whose ledger is in a
database.

Invariants: the index is "the database D up to panel horizon C and evidence horizon E" (every
row written by a transaction below the horizon is in it, ``store.pgfollow``), both and D
written in the same transaction as the rows they cover (as the byte offsets and inodes are for
the logs); an index of another database, or of row ids (before ``pgschema`` version 6), is
rebuilt. Following by transaction passes over no row committed late, and no writer waits for
it. A batch reads whole transactions only, up to the horizon it saw when it began.
``behind_bytes`` counts rows behind (up to ``BEHIND_CAP``), at ``ROW_BYTES`` each: an
estimate, so that a backlog of a few hundred panels is still followed in the request and a
longer one in the background.
"""

from __future__ import annotations

from pathlib import Path

from panelist.metrics import errors
from panelist.metrics.ledger.search import SearchIndex, _meta, _reset
from panelist.metrics.ledger.searchfold import Fold
from panelist.metrics.store import pg, pgfollow

ROW_BYTES = 2048
BEHIND_CAP = 100_000  # rows counted behind at most: past it, the backlog is long anyway
_SOURCE = "SELECT current_database() || '/' || 'evidence'::regclass::oid::text || '/xid'"
_BEHIND = (
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM panels WHERE xid >= %(c)s::text::xid8 "
    "LIMIT %(cap)s) p), (SELECT count(*) FROM (SELECT 1 FROM evidence "
    "WHERE xid >= %(e)s::text::xid8 LIMIT %(cap)s) e) + (SELECT count(*) FROM "
    "(SELECT 1 FROM verdicts WHERE xid >= %(e)s::text::xid8 LIMIT %(cap)s) v)"
)
_EVIDENCE = pgfollow.query(
    pgfollow.part("evidence", "record", "kind IN ('delivered', 'abandoned', 'seated')"),
    pgfollow.part("verdicts", "record"),
)
_PANELS = pgfollow.query(pgfollow.part("panels", "seq, record"))


class DatabaseSearchIndex(SearchIndex):
    """One instance's search index over the ledger's tables; threads may share it."""

    def __init__(self, runs_dir: Path, database: str, **kw):
        super().__init__(runs_dir, **kw)
        self.db = pg.Database(database, application="panelist-search")

    def _behind(self) -> int:
        meta = self._read(_meta, build=False) or {}
        if meta.get("source") != self.db.execute(_SOURCE)[0][0]:
            meta = {}
        panels, evidence = self.db.execute(
            _BEHIND,
            {
                "c": int(meta.get("calls_offset") or 0),
                "e": int(meta.get("evidence_offset") or 0),
                "cap": BEHIND_CAP,
            },
        )[0]
        return (panels + evidence) * ROW_BYTES

    def _panels_behind(self, indexed: int) -> int | None:
        # panels.idx is no record of a ledger in a database; the rows behind are counted
        # only up to BEHIND_CAP, so no exact number is given
        return None

    def _batch(self, db, panels: int | None, nbytes: int | None) -> bool:
        source = self.db.execute(_SOURCE)[0][0]
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = _meta(db)
            if meta.get("source") != source:
                _reset(db)  # another database: what is held is not in it
                meta = {}
            fold = Fold(db)
            ev_from = int(meta.get("evidence_offset") or 0)
            n = (nbytes // ROW_BYTES + 1) if nbytes is not None else None
            rows, ev_end, ev_done = pgfollow.page(self.db, _EVIDENCE, ev_from, n)
            for _, _, record in rows:
                if isinstance(record, dict):
                    fold.evidence_record(record)
            calls_from = int(meta.get("calls_offset") or 0)
            rows, calls_end, calls_done = pgfollow.page(self.db, _PANELS, calls_from, panels)
            fold.panel_records(
                [(seq, record) for _, _, seq, record in rows if isinstance(record, dict)]
            )
            db.executemany(
                "INSERT OR REPLACE INTO meta(name, value) VALUES (?, ?)",
                [
                    ("source", source),
                    ("calls_offset", max(calls_from, calls_end)),
                    ("evidence_offset", max(ev_from, ev_end)),
                    ("panels", int(meta.get("panels") or 0) + fold.panels),
                ],
            )
            db.execute("COMMIT")
            self._folded += fold.panels
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return calls_done and ev_done

    def _build(self, rebuild: bool) -> None:
        try:
            super()._build(rebuild)
        except errors.DatabaseUnreachable as exc:
            # requests answer from what is indexed; the next one starts the build again
            self._error = exc.message

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.db.close()
