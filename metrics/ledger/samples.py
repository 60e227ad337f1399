"""Where the suite's samples live: ``FileSamples`` (``runs/suite/samples.jsonl``, the embedded
default) or ``DatabaseSamples`` (the ``suite_samples`` table, when the data folder names a
database), chosen by ``of_home``. The suite's writer and readers (``suite.results``,
``suite.report``, ``suite.livereport``, ``ledger.suiteevidence``) speak only to this surface, so
every host on one database counts the samples any host wrote:

* ``append(record)`` writes one sample whole;
* ``reader(pos)`` follows the samples from a position, as ``jsonl.Tail`` does: ``read()``
  yields ``(pos, record)`` for each one not read yet, ``offset`` is where it got to;
* ``stamp()`` changes whenever a sample is added; its first item is the position after the
  last sample, so a reader whose offset is past it knows the samples were replaced;
* ``read_all()`` is every record in the order written.

Invariants: a reader's position is a byte offset (file) or a transaction horizon (table:
every sample written by a transaction below it has been read, ``store.pgfollow``), so a sample
committed late is never passed over, and an insert waits for no other. A table's stamp is the
horizon (its second item).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from panelist.metrics.store import jsonl, pgfollow, pgschema

STAMP_AGE = 1.0  # seconds a database stamp is reused by readers that ask per request


class FileSamples:
    """samples.jsonl in the data folder; many threads and processes may share it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.where = str(self.path)
        self._appender: jsonl.Appender | None = None
        self._lock = threading.Lock()

    def append(self, record: dict) -> None:
        with self._lock:
            if self._appender is None:
                self._appender = jsonl.Appender(self.path)
            appender = self._appender
        appender.append(record)

    def reader(self, pos: int = 0) -> jsonl.Tail:
        return jsonl.Tail(self.path, pos)

    def stamp(self, max_age: float = 0.0) -> tuple:
        return jsonl.stamp(self.path)

    def read_all(self) -> list[dict]:
        return [r for _, r in jsonl.Tail(self.path).read()]

    def close(self) -> None:
        with self._lock:
            appender, self._appender = self._appender, None
        if appender is not None:
            appender.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_FINAL = pgfollow.query(pgfollow.part("suite_samples", "record"))


class _TableTail:
    """Follows ``suite_samples`` by transaction, as ``jsonl.Tail`` follows the file by
    offset."""

    BATCH = 5000

    def __init__(self, db, offset: int = 0):
        self.db, self.offset = db, offset

    def read(self):
        for rows, cursor in pgfollow.final(self.db, _FINAL, self.offset, self.BATCH):
            for _, row_id, record in rows:
                if isinstance(record, dict):
                    yield row_id, record
            self.offset = cursor


class DatabaseSamples:
    """The ``suite_samples`` table of the data folder's database."""

    def __init__(self, url: str):
        from panelist.metrics.store import pg

        self.db = pg.Database(url, application="panelist-suite")
        self.where = f"the database {self.db.shown} (table suite_samples)"
        self._stamp: tuple[float, tuple] | None = None

    def _migrated(self) -> None:
        pgschema.ensure(self.db)

    def append(self, record: dict) -> None:
        from panelist.metrics.ledger.pglogs import to_json

        self._migrated()

        # not retried: a lost COMMIT must not write the sample twice
        self.db.execute(
            "INSERT INTO suite_samples (record) VALUES (%s::jsonb)", (to_json(record),), retry=False
        )
        self._stamp = None

    def reader(self, pos: int = 0) -> _TableTail:
        self._migrated()
        return _TableTail(self.db, pos)

    def stamp(self, max_age: float = 0.0) -> tuple:
        """``(FAR, horizon)``: the table is never replaced under a reader (``FAR`` is past
        every position), and the horizon moves whenever a sample may have become final;
        ``max_age``: a stamp this young is reused (a per-request reader
        then asks the database at most once in that time)."""
        held = self._stamp
        now = time.monotonic()
        if held is not None and max_age and now - held[0] < max_age:
            return held[1]
        self._migrated()
        stamp = (pgfollow.FAR, pgfollow.horizon(self.db))
        self._stamp = (now, stamp)
        return stamp

    def read_all(self) -> list[dict]:
        return [r for _, r in self.reader().read()]

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def of_home(home) -> FileSamples | DatabaseSamples:
    """The samples of a data folder: in its database when it names one, else in its runs
    folder. The caller closes it."""
    if getattr(home, "database", None):
        return DatabaseSamples(home.database)
    return FileSamples(home.suite_samples)


__all__ = ["DatabaseSamples", "FileSamples", "STAMP_AGE", "of_home"]
