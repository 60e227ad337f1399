"""Moving a data folder's logs into PostgreSQL and back: ``import_folder`` (``panelist db
import``) and ``export_folder`` (``panelist db export``).

What moves (``SOURCES``): the ledger's evidence.jsonl (into ``evidence`` and ``verdicts``) and
calls.jsonl (``panels``), every race's calls.jsonl (``races``), the suite's samples.jsonl
(``suite_samples``) and config/changes.jsonl (``config_changes``); each race's report,
runs/races/<id>.json, is its ``race_reports`` row both ways.

Invariants:

* An import is resumable: each batch of whole lines and the byte offset reached in its file
  (``imported``) are committed in one transaction, so an import cut short anywhere goes on from
  the last batch it committed, never writing a line twice; a line that does not parse is
  skipped as every reader skips it, and counted.
* An import is verified by counts: for each source, the records in the file against the
  records the database holds as imported from it; ``ok`` only when they agree.
* An import never mixes: before anything is written it is refused, whole, when the database
  holds a source read from another file (another folder's logs: their panel ids and offsets
  mean nothing here), or ledger records an import did not bring (instances have written
  there: a folder's panels would take ids they use). Each source's file is known by a hash of
  its first line (``origin``), which an append-only log keeps.
* The panel counter is moved past every seq the imported logs name, so no instance hands out
  an id the folder already used.
* An export writes only into empty places (it refuses to mix with logs already there) and
  writes records in id order, as the JSONL backend would have logged them; panels.idx is
  rebuilt from the exported logs when a ledger first opens them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from panelist.metrics import errors
from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.store import atomic, jsonl, jsonwire, pgschema
from panelist.metrics.ledger.pglogs import to_json

BATCH = 2000  # lines per transaction


def ledger_dir(folder: Path) -> Path:
    """The ledger's folder in ``folder``: a data folder's runs/gateway, or the folder itself
    when it holds the logs."""
    folder = Path(folder)
    return (
        folder
        if (folder / "evidence.jsonl").exists() or (folder / "calls.jsonl").exists()
        else folder / "runs" / "gateway"
    )


def sources(folder: Path) -> list[tuple[str, Path]]:
    """``(source name, path)`` of each log of a data folder that exists."""
    root = Path(folder)
    gateway = ledger_dir(root)
    found = [
        ("evidence", gateway / "evidence.jsonl"),
        ("panels", gateway / "calls.jsonl"),
        ("suite_samples", root / "runs" / "suite" / "samples.jsonl"),
        ("config_changes", root / "config" / "changes.jsonl"),
    ]
    races = root / "runs" / "races"
    if races.is_dir():
        found += [
            (f"races/{d.name}", d / "calls.jsonl")
            for d in sorted(races.iterdir())
            if (d / "calls.jsonl").is_file()
        ]
    return [(name, path) for name, path in found if path.is_file()]


def _insert(conn, name: str, records: list[dict]) -> int:
    """Insert one batch of ``name``'s records; the highest panel seq they name (-1: none)."""
    top = -1
    for r in records:
        seq = panel_seq(r.get("panel"))
        if seq is not None:
            top = max(top, seq)
    if name == "evidence":
        conn.execute("SELECT panelist_append(%s::jsonb)", (to_json(records),))
    elif name == "panels":
        rows = [
            (panel_seq(r.get("panel")), r["panel"], to_json(r))
            for r in records
            if panel_seq(r.get("panel")) is not None
        ]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO panels (seq, panel, record) VALUES (%s, %s, %s::jsonb) "
                "ON CONFLICT (seq) DO UPDATE SET panel = EXCLUDED.panel, "
                "record = EXCLUDED.record",
                rows,
            )
    elif name.startswith("races/"):
        race = name.partition("/")[2]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO races (race, record) VALUES (%s, %s::jsonb)",
                [(race, to_json(r)) for r in records],
            )
    else:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {name} (record) VALUES (%s::jsonb)", [(to_json(r),) for r in records]
            )
    return top


def import_folder(db, folder: Path, *, batch: int = BATCH, report=None) -> list[dict]:
    """Import ``folder``'s logs into the database behind ``db`` (``store.pg.Database``), from
    where an earlier import stopped. One dict per source: ``{"source", "in_file",
    "imported", "skipped", "ok"}``; ``report(dict)`` is called after each source."""
    folder = Path(folder)
    if not folder.is_dir():
        raise errors.NotFound(
            f"no data folder at {folder}; give --from the folder to import "
            "(the one with config/ and runs/ in it)"
        )
    pgschema.migrate(db)
    found = sources(folder)
    if not found and not _race_reports(folder):
        raise errors.NotFound(
            f"no logs in {folder} (looked for runs/gateway/evidence.jsonl, "
            "calls.jsonl, races, suite samples and config changes)"
        )
    origins = {name: origin_of(path) for name, path in found}
    _refuse_mixing(db, folder, found, origins)
    out = []
    for name, path in found:
        row = db.execute("SELECT byte_offset, records FROM imported WHERE source = %s", (name,))
        offset, done = (row[0][0], row[0][1]) if row else (0, 0)
        skipped = in_file = 0
        pending: list[dict] = []
        end = offset
        for start, line in jsonl.lines(path, 0):
            record = jsonl.parse_line(line)
            if record is not None and name == "panels" and panel_seq(record.get("panel")) is None:
                record = None  # no panel id: no place in the panel table
            if start < offset:
                in_file += record is not None
                continue
            end = start + len(line)
            if record is None:
                skipped += 1
                continue
            in_file += 1
            pending.append(record)
            if len(pending) >= batch:
                done = _commit(db, name, pending, end, done, origins[name])
                pending = []
        if pending or end > offset:
            done = _commit(db, name, pending, end, done, origins[name])
        result = {
            "source": name,
            "in_file": in_file,
            "imported": done,
            "skipped": skipped,
            "ok": in_file == done,
        }
        out.append(result)
        if report is not None:
            report(result)
    reports = _race_reports(folder)
    if reports:
        result = _import_reports(db, reports)
        out.append(result)
        if report is not None:
            report(result)
    return out


def origin_of(path: Path) -> str | None:
    """What a log file is known by: a hash of its first line (None: no whole line yet)."""
    with open(path, "rb") as f:
        first = f.readline(1 << 20)
    if not first.endswith(b"\n"):
        return None
    return hashlib.sha256(first).hexdigest()[:32]


_LEDGER_COUNTS = {
    "evidence": "SELECT (SELECT count(*) FROM evidence) + (SELECT count(*) FROM verdicts)",
    "panels": "SELECT count(*) FROM panels",
}


def _refuse_mixing(db, folder: Path, found, origins: dict) -> None:
    """Refuse the import, before anything is written, when it would mix with records that
    are not an earlier import of the same files (see the module's invariants)."""
    done = {
        source: (offset, records, origin)
        for source, offset, records, origin in db.execute(
            "SELECT source, byte_offset, records, origin FROM imported"
        )
    }
    fresh = "import it into a fresh database (`panelist db init --database` a new one)"
    for name, _ in found:
        before = done.get(name)
        # an import from before origins were kept cannot be told apart: it is let go on
        if before is not None and before[0] > 0 and before[2] not in (None, origins[name]):
            raise errors.Conflict(
                f"the database already holds {name} imported from another data folder than "
                f"{folder}; nothing was written: two folders' panels would share ids, so "
                f"{fresh}",
                code="import_mixes",
            )
    for name, sql in _LEDGER_COUNTS.items():
        path = dict(found).get(name)
        if path is None or path.stat().st_size <= (done[name][0] if name in done else 0):
            continue  # nothing of it left to write: checking counts mixes nothing
        held = db.execute(sql)[0][0]
        brought = done[name][1] if name in done else 0
        if held > brought:
            raise errors.Conflict(
                f"the database holds {held - brought} {name} record(s) written by running "
                f"instances, not by an import; nothing was written: the folder's panels would "
                f"take ids they use, so {fresh}",
                code="import_mixes",
            )


def _race_reports(folder: Path) -> dict[str, dict]:
    """The readable race reports of a data folder (runs/races/<id>.json) by race id."""
    found = {}
    races = folder / "runs" / "races"
    for path in sorted(races.glob("r*.json")) if races.is_dir() else ():
        try:
            doc = jsonwire.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("race") == path.stem:
            found[path.stem] = doc
    return found


def _import_reports(db, reports: dict[str, dict]) -> dict:
    """Each report as its race's ``race_reports`` row (a race the database already has a
    report of keeps it: an import run again changes nothing), checked by counts."""

    def body(conn):
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO race_reports (race, ended, report) VALUES (%s, now(), %s::jsonb) "
                "ON CONFLICT (race) DO UPDATE SET ended = coalesce(race_reports.ended, now()), "
                "report = coalesce(race_reports.report, EXCLUDED.report)",
                [(race, to_json(doc)) for race, doc in reports.items()],
            )

    db.transaction(body, retry=False)
    held = db.execute(
        "SELECT count(*) FROM race_reports WHERE race = ANY(%s) AND report IS NOT NULL",
        (list(reports),),
    )[0][0]
    return {
        "source": "race_reports",
        "in_file": len(reports),
        "imported": held,
        "skipped": 0,
        "ok": held == len(reports),
    }


def _commit(db, name: str, records: list[dict], end: int, done: int, origin: str | None) -> int:
    def body(conn):
        top = _insert(conn, name, records) if records else -1
        if top >= 0:
            # the counter moves past every seq the folder used (never back)
            conn.execute(
                "SELECT setval('panel_ids', greatest(%s, (SELECT CASE WHEN is_called "
                "THEN last_value ELSE -1 END FROM panel_ids)))",
                (top,),
            )
        conn.execute(
            "INSERT INTO imported (source, byte_offset, records, origin) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (source) DO UPDATE SET "
            "byte_offset = EXCLUDED.byte_offset, records = EXCLUDED.records, "
            "origin = EXCLUDED.origin",
            (name, end, done + len(records), origin),
        )

    db.transaction(body, retry=False)
    return done + len(records)


_EXPORTS = {
    "evidence": (
        "SELECT id, record FROM evidence UNION ALL SELECT id, record FROM verdicts ORDER BY id",
        Path("runs/gateway/evidence.jsonl"),
    ),
    "panels": ("SELECT id, record FROM panels ORDER BY id", Path("runs/gateway/calls.jsonl")),
    "suite_samples": (
        "SELECT id, record FROM suite_samples ORDER BY id",
        Path("runs/suite/samples.jsonl"),
    ),
    "config_changes": (
        "SELECT id, record FROM config_changes ORDER BY id",
        Path("config/changes.jsonl"),
    ),
}


def export_folder(db, folder: Path, *, report=None) -> list[dict]:
    """Write the database's records as a data folder's JSONL logs under ``folder``, which
    the embedded backend then reads. One dict per log written: ``{"source", "path",
    "records"}``."""
    folder = Path(folder)
    targets = dict(_EXPORTS)
    for (race,) in db.execute("SELECT DISTINCT race FROM races ORDER BY race"):
        if not race or "/" in race or race.startswith("."):
            continue  # not a folder name a race would have
        targets[f"races/{race}"] = (
            "SELECT id, record FROM races WHERE race = %s ORDER BY id",
            Path("runs/races") / race / "calls.jsonl",
        )
    for _, (_, rel) in targets.items():
        path = folder / rel
        if path.exists() and path.stat().st_size:
            raise errors.Conflict(
                f"{path} already holds records; export into an empty "
                "folder (nothing is mixed into existing logs)"
            )
    reports = [
        (race, doc)
        for race, doc in db.execute(
            "SELECT race, report FROM race_reports WHERE report IS NOT NULL ORDER BY race"
        )
        if race and "/" not in race and not race.startswith(".")
    ]
    for race, _ in reports:
        path = folder / "runs" / "races" / f"{race}.json"
        if path.exists():
            raise errors.Conflict(
                f"{path} already exists; export into an empty folder "
                "(nothing is mixed into existing logs)"
            )
    out = []
    for race, doc in reports:
        path = folder / "runs" / "races" / f"{race}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(path, jsonwire.dumps(doc, indent=1) + "\n", fsync=False)
        result = {"source": f"race_reports/{race}", "path": str(path), "records": 1}
        out.append(result)
        if report is not None:
            report(result)
    for name, (sql, rel) in targets.items():
        params = (name.partition("/")[2],) if name.startswith("races/") else ()
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        with db.session() as conn, db.reaching():
            with conn.transaction():
                with conn.cursor(name="export") as cur, open(path, "wb") as f:
                    cur.itersize = BATCH
                    cur.execute(sql, params)
                    for _, record in cur:
                        f.write(jsonl.dumps(record))
                        count += 1
        if not count:
            path.unlink()
            continue
        result = {"source": name, "path": str(path), "records": count}
        out.append(result)
        if report is not None:
            report(result)
    return out
