"""The panels' search index fed from PostgreSQL (``DatabaseSearchIndex``): the same local
SQLite index as ``search.SearchIndex`` (its tables, queries, one writer and background build),
following the database's ``panels`` and evidence tables by id instead of the two logs by byte
offset, so the panels page's filters answer the same on an instance whose ledger is in a
database.

Invariants: the index is "the database D up to panel id C and evidence id E", both ids and D
written in the same transaction as the rows they cover (as the byte offsets and inodes are for
the logs); an index of another database is rebuilt. Ids become visible in id order (both
tables are written under the append lock, ``pgschema``), so following by id passes over none.
A batch reads only up to the highest ids it saw when it began. ``behind_bytes`` counts rows
behind, at ``ROW_BYTES`` each: an estimate, so that a backlog of a few hundred panels is
still followed in the request and a longer one in the background.
"""

from __future__ import annotations

from pathlib import Path

from panelist.metrics import errors
from panelist.metrics.ledger.search import SearchIndex, _meta, _reset
from panelist.metrics.ledger.searchfold import Fold
from panelist.metrics.store import pg

ROW_BYTES = 2048
_TOPS = ("SELECT (SELECT coalesce(max(id), 0) FROM panels), "
         "greatest((SELECT coalesce(max(id), 0) FROM evidence), "
         "(SELECT coalesce(max(id), 0) FROM verdicts)), "
         "current_database() || '/' || 'evidence'::regclass::oid::text")
_EVIDENCE = ("SELECT id, record FROM evidence WHERE id > %(lo)s AND id <= %(hi)s "
             "AND kind IN ('delivered', 'abandoned', 'seated') "
             "UNION ALL SELECT id, record FROM verdicts WHERE id > %(lo)s AND id <= %(hi)s "
             "ORDER BY id LIMIT %(n)s")
_PANELS = ("SELECT id, seq, record FROM panels WHERE id > %(lo)s AND id <= %(hi)s "
           "ORDER BY id LIMIT %(n)s")


class DatabaseSearchIndex(SearchIndex):
    """One instance's search index over the ledger's tables; threads may share it."""

    def __init__(self, runs_dir: Path, database: str, **kw):
        super().__init__(runs_dir, **kw)
        self.db = pg.Database(database, application="panelist-search")

    def _tops(self) -> tuple[int, int, str]:
        return tuple(self.db.execute(_TOPS)[0])

    def _behind(self) -> int:
        meta = self._read(_meta, build=False) or {}
        panels, evidence, source = self._tops()
        if meta.get("source") != source:
            return (panels + evidence) * ROW_BYTES if panels or evidence else 0
        return (max(0, panels - int(meta.get("calls_offset") or 0))
                + max(0, evidence - int(meta.get("evidence_offset") or 0))) * ROW_BYTES

    def _batch(self, db, panels: int | None, nbytes: int | None) -> bool:
        top_panels, top_evidence, source = self._tops()
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = _meta(db)
            if meta.get("source") != source:
                _reset(db)   # another database: what is held is not in it
                meta = {}
            fold = Fold(db)
            ev_from = int(meta.get("evidence_offset") or 0)
            n = (nbytes // ROW_BYTES + 1) if nbytes is not None else None
            rows = self.db.execute(_EVIDENCE, {"lo": ev_from, "hi": top_evidence, "n": n})
            for _, record in rows:
                if isinstance(record, dict):
                    fold.evidence_record(record)
            ev_done = n is None or len(rows) < n
            ev_end = top_evidence if ev_done else rows[-1][0]
            calls_from = int(meta.get("calls_offset") or 0)
            rows = self.db.execute(_PANELS, {"lo": calls_from, "hi": top_panels, "n": panels})
            fold.panel_records([(seq, record) for _, seq, record in rows
                                if isinstance(record, dict)])
            calls_done = panels is None or len(rows) < panels
            calls_end = top_panels if calls_done else rows[-1][0]
            db.executemany("INSERT OR REPLACE INTO meta(name, value) VALUES (?, ?)", [
                ("source", source), ("calls_offset", max(calls_from, calls_end)),
                ("evidence_offset", max(ev_from, ev_end)),
                ("panels", int(meta.get("panels") or 0) + fold.panels)])
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
