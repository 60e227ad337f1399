"""``panelist db``: the PostgreSQL database several instances share (``--database URL``, else
``PANELIST_DATABASE_URL``). ``init`` creates or updates its schema (idempotent; prints the
version), ``import --from DIR`` copies a data folder's logs into it (resumable; prints the
counts it checked) and ``export --to DIR`` writes its records back as JSONL logs the embedded
backend reads.
"""

from __future__ import annotations

import os

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest, PanelistError
from panelist.metrics.store.pg import Database, check_argument, check_url
from panelist.metrics.store.pgbounds import Bounds


def register(nouns, common) -> None:
    d = nouns.add_parser(
        "db", parents=[common], help="the PostgreSQL database instances share: init, import, export"
    )
    verbs = d.add_subparsers(dest="verb", metavar="VERB", required=True)
    url = dict(
        metavar="URL",
        default=None,
        help="postgresql://USER@HOST:PORT/DATABASE (default: $PANELIST_DATABASE_URL)",
    )
    i = verbs.add_parser("init", parents=[common], help="create or update the schema")
    i.add_argument("--database", **url)
    im = verbs.add_parser(
        "import", parents=[common], help="copy a data folder's logs into the database (resumable)"
    )
    im.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        required=True,
        help="the data folder (or its runs/gateway folder)",
    )
    im.add_argument("--database", **url)
    ex = verbs.add_parser(
        "export", parents=[common], help="write the database's records as JSONL logs"
    )
    ex.add_argument(
        "--to",
        dest="target",
        metavar="DIR",
        required=True,
        help="an empty data folder to write runs/ and config/changes.jsonl into",
    )
    ex.add_argument("--database", **url)


def _database(args):
    if args.database:
        check_argument(check_url(args.database))
    url = args.database or os.environ.get("PANELIST_DATABASE_URL")
    if not url:
        raise BadRequest(
            "no database named: give --database postgresql://USER@HOST:PORT/DB "
            "or set PANELIST_DATABASE_URL"
        )
    # an import or export moves whole logs in batches: its statements may take minutes, where
    # a server's must not (an environment's own bound still wins)
    return Database(url, application="panelist-db", bounds=Bounds.of_env(statement=600.0))


def cmd_db(args, out: Out) -> int:
    db = _database(args)
    try:
        return VERBS[args.verb](db, args, out)
    finally:
        db.close()


def _init(db, args, out: Out) -> int:
    from panelist.metrics.store import pgschema

    version, applied = pgschema.migrate(db)
    done = f"applied {', '.join(map(str, applied))}" if applied else "already up to date"
    out.result(
        {"database": db.shown, "version": version, "applied": applied},
        f"schema version {version} in {db.shown} ({done})",
    )
    return 0


def _import(db, args, out: Out) -> int:
    from panelist.metrics.ledger.pgcopy import import_folder

    def say(r):
        if not out.as_json:
            mark = "ok" if r["ok"] else "MISMATCH"
            skipped = f", {r['skipped']} unreadable line(s) skipped" if r["skipped"] else ""
            print(
                f"{r['source']}: {r['in_file']} record(s) in the file, {r['imported']} "
                f"imported{skipped}: {mark}",
                flush=True,
            )

    results = import_folder(db, args.source, report=say)
    out.result({"database": db.shown, "sources": results})
    bad = [r["source"] for r in results if not r["ok"]]
    if bad:
        raise PanelistError(
            f"the counts disagree for {', '.join(bad)}: a file was replaced or "
            "edited since an earlier import; import it into a fresh database"
        )
    return 0


def _export(db, args, out: Out) -> int:
    from panelist.metrics.ledger.pgcopy import export_folder

    def say(r):
        if not out.as_json:
            print(f"{r['source']}: {r['records']} record(s) to {r['path']}", flush=True)

    results = export_folder(db, args.target, report=say)
    out.result(
        {"database": db.shown, "logs": results},
        None if results else "(the database holds no records)",
    )
    return 0


VERBS = {"init": _init, "import": _import, "export": _export}
COMMANDS = {"db": cmd_db}
