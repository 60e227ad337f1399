"""Where race reports live: ``FileReports`` (``runs/races/<id>.json``, the embedded default) or,
when the data folder names a database, ``DatabaseReports`` (the ``race_reports`` table, one row
per race) beside the file, chosen by ``of_home``. The race (``benchmark.py``) writes through
this surface and the registry (``registry.py``) reads through it, so every host on one
database lists and reads the races any host ran.

* ``call_log(race, path)`` logs its calls (calls.jsonl; with a database each is also a row of
  ``races``);
* ``named(race)`` says a race began (a row with no report yet; files need nothing, the race's
  folder says it);
* ``save(race, doc)`` writes its report whole;
* ``ids()`` are the races known here; ``stored(race)`` is ``(stamp, report or None, started)``
  or None for a race with no trace, the stamp changing whenever the report does.

What stays only in the race's folder on the host that ran it, database or not: the judge
prompts (``judge/``). The report (rows, transcripts, the verdict) holds what the listing, the
report page and the verdict read.
"""

from __future__ import annotations

from pathlib import Path

from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.seats import record as seatrecord
from panelist.metrics.seats.record import CallLog
from panelist.metrics.store import atomic, jsonwire


class FileReports:
    """The reports in a data folder's runs/races."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def named(self, race: str) -> None:
        pass  # the race's folder, made when it was named, says it began

    def call_log(self, race: str, path: Path) -> CallLog:
        """Where the race's model and judge calls are logged (its calls.jsonl)."""
        return CallLog(path)

    def save(self, race: str, doc: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic.write(
            self.folder / f"{race}.json", jsonwire.dumps(doc, indent=1) + "\n", fsync=False
        )

    def ids(self) -> list[str]:
        try:
            return [p.name.removesuffix(".json") for p in self.folder.iterdir()]
        except FileNotFoundError:
            return []

    def stored(self, race: str):
        path = self.folder / f"{race}.json"
        try:
            st = path.stat()
        except FileNotFoundError:
            try:
                return None, None, (self.folder / race).stat().st_mtime
            except FileNotFoundError:
                return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        try:
            doc = jsonwire.loads(path.read_bytes())
        except (OSError, ValueError):
            doc = False  # there, but not readable
        return stamp, doc, st.st_mtime

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class DatabaseReports(FileReports):
    """The ``race_reports`` table, with each report also kept as the file of the host that
    ran it (so ``panelist race`` output and the folder's layout stay as they are)."""

    def __init__(self, folder: Path, url: str):
        super().__init__(folder)
        from panelist.metrics.store import pg

        self.db = pg.Database(url, application="panelist-races")
        try:
            self._migrated()
        except DatabaseUnreachable:
            pass  # out of reach at start: brought up to date at the first use
        except BaseException:
            self.db.close()
            raise

    def _migrated(self) -> None:
        from panelist.metrics.store import pgschema

        pgschema.ensure(self.db)

    def named(self, race: str) -> None:
        self._migrated()
        self.db.execute(
            "INSERT INTO race_reports (race) VALUES (%s) ON CONFLICT DO NOTHING", (race,)
        )

    def call_log(self, race: str, path: Path) -> CallLog:
        return _TableCallLog(path, self.db, race)

    def save(self, race: str, doc: dict) -> None:
        from panelist.metrics.ledger.pglogs import to_json

        super().save(race, doc)
        self._migrated()
        # the same whole report each time: safe to run twice
        self.db.execute(
            "INSERT INTO race_reports (race, ended, report) VALUES "
            "(%s, now(), %s::jsonb) ON CONFLICT (race) DO UPDATE SET "
            "ended = now(), report = EXCLUDED.report",
            (race, to_json(doc)),
        )

    def ids(self) -> list[str]:
        self._migrated()
        return [r[0] for r in self.db.execute("SELECT race FROM race_reports")] + super().ids()

    def stored(self, race: str):
        self._migrated()
        rows = self.db.execute(
            "SELECT extract(epoch FROM started), "
            "extract(epoch FROM ended), report FROM race_reports "
            "WHERE race = %s",
            (race,),
        )
        if not rows:
            return super().stored(race)  # a race run before the database was named
        started, ended, doc = rows[0]
        return (("db", float(ended)) if ended is not None else None), doc, float(started)

    def close(self) -> None:
        self.db.close()


class _TableCallLog(CallLog):
    """The race's calls.jsonl, each line also a row of ``races`` (what ``db export`` writes
    back as the race's calls.jsonl)."""

    def __init__(self, path: Path, db, race: str):
        super().__init__(path)
        self.db, self.race = db, race

    def write(self, result) -> None:
        from panelist.metrics.ledger.pglogs import to_json

        record = seatrecord.line(result, self.kind, **result.meta)
        self._appender.append(record)
        # not retried: a lost COMMIT must not log the call twice
        self.db.execute(
            "INSERT INTO races (race, record) VALUES (%s, %s::jsonb)",
            (self.race, to_json(record)),
            retry=False,
        )


def of_home(home) -> FileReports:
    """The race reports of a data folder; the caller closes them."""
    if getattr(home, "database", None):
        return DatabaseReports(home.races, home.database)
    return FileReports(home.races)


__all__ = ["DatabaseReports", "FileReports", "of_home"]
