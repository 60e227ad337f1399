"""``panelist schedule``: the work a server does on its own (probe, catalog_refresh): each
job's mode, interval and next run (show), and changing them (set).
"""

from __future__ import annotations

from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home
from panelist.metrics.store import jsonl


def register(nouns, common) -> None:
    sc = nouns.add_parser(
        "schedule", help="work the server does on its own: probe, catalog_refresh"
    ).add_subparsers(dest="verb", metavar="VERB", required=True)
    sc.add_parser("show", parents=[common], help="each job's mode, interval and next run")
    a = sc.add_parser(
        "set",
        parents=[common],
        help="a job's mode and/or interval (the server reads them when it starts)",
    )
    a.add_argument("job", metavar="JOB", help="probe or catalog_refresh")
    a.add_argument("--mode", metavar="M", help="off, log-only (say what would change) or run")
    a.add_argument("--every", type=int, metavar="SECONDS", help="seconds between runs")


def cmd_schedule(args, out: Out) -> int:
    from panelist.metrics.upkeep import schedule

    home = open_home(args.data)
    if args.verb == "set":
        done = schedule.set_job(home, args.job, mode=args.mode, every=args.every)
        out.result(
            dict(done, job=args.job),
            f"{args.job}: {done['mode']} every "
            f"{done['every']} s; a running server takes it up within "
            f"{schedule.SETTINGS_EVERY:g} s",
        )
        return 0
    db = None
    if home.database:  # the cluster's book, the one its leader claims from
        from panelist.metrics.store import pg, pgschema

        db = pg.Database(home.database, application="panelist-cli")
    try:
        if db is not None:
            pgschema.migrate(db)
        book = schedule.book_of(home, db)
        rows = []
        for job, s in schedule.settings(home).items():
            due = book.next_due(job, s["every"])
            rows.append(dict(s, job=job, next=jsonl.utc_second(due) if due else "due now"))
    finally:
        if db is not None:
            db.close()
    out.table(rows, ["job", "mode", "every", "next"])
    return 0


COMMANDS = {"schedule": cmd_schedule}
