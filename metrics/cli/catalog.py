"""``panelist catalog``, ``panelist discover`` and ``panelist alerts``: what is known about
each model and from where (import, refresh, show), the models the endpoints serve that the
roster lacks, and the alerts a refresh raises (a model that went paid).
"""

from __future__ import annotations

import sys

from panelist.metrics.cli import webhook
from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.metrics.plaintext import visible


def register(nouns, common) -> None:
    ca = nouns.add_parser(
        "catalog", help="what is known about each model, and from where"
    ).add_subparsers(dest="verb", metavar="VERB", required=True)
    ca.add_parser(
        "import",
        parents=[common],
        help="fill missing facts of roster models from a models.dev-layout JSON file",
    ).add_argument("file", help="the file to read")
    ca.add_parser("refresh", parents=[common], help="read each endpoint's model list").add_argument(
        "--endpoint", metavar="NAME", help="only this endpoint"
    )
    ca.add_parser("show", parents=[common], help="a model's facts and their sources").add_argument(
        "alias", help="the model whose facts to show"
    )
    a = nouns.add_parser("alerts", parents=[common], help="recent roster alerts, newest first")
    a.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="at most this many, newest first (default 50)",
    )
    webhook.register(a, common)
    a = nouns.add_parser(
        "discover",
        parents=[common],
        help="models the endpoints serve that are not on the roster, free first",
    )
    a.add_argument("--endpoint", metavar="NAME", help="only this endpoint")
    a.add_argument("--free", action="store_true", help="only models known to be free")
    a.add_argument("--add", nargs="+", metavar="ID", help="register these (by served id)")


def cmd_catalog(args, out: Out) -> int:
    from panelist.metrics.roster.catalog import Catalog

    catalog = Catalog(open_home(args.data))
    if args.verb == "import":
        done = catalog.import_file(args.file)
        lines = [
            f"{m['alias']}: filled {', '.join(m['facts']) or 'nothing (all typed)'}"
            + (f"; kept as its endpoint states {', '.join(m['kept'])}" if m["kept"] else "")
            for m in done["matched"]
        ]
        if done["unmatched"]:
            lines.append(f"not in the file: {', '.join(done['unmatched'])}")
        out.result(done, "\n".join(lines) or "the roster has no models; add some first")
        return 0
    if args.verb == "show":
        facts = catalog.facts(args.alias)
        if out.as_json:
            out.result({"alias": args.alias, "facts": facts})
        else:
            rows = []
            for k, v in facts.items():
                rows.append(dict(v, fact=k))
                if "learned" in v:  # beside the fact that wins, not instead of it
                    rows.append(dict(v["learned"], fact=k, source="learned"))
            out.table(rows, ["fact", "value", "source", "at", "from"])
        return 0
    from panelist.metrics.upstream.client import Upstream

    upstream = Upstream()
    try:
        done = catalog.refresh(upstream, [args.endpoint] if args.endpoint else None)
    finally:
        upstream.close()
    lines = [
        f"{r['endpoint']}: {r['models']} model(s), {r['with_facts']} with facts"
        for r in done["refreshed"]
    ]
    lines += [f"{f['endpoint']}: not read: {f['error']}" for f in done["failed"]]
    lines += [f"alert: {a['message']}" for a in done["went_paid"]]
    out.result(
        done,
        "\n".join(visible(line) for line in lines)
        or "no endpoints; add one with `panelist endpoint add`",
    )
    return 1 if done["failed"] else 0


def cmd_alerts(args, out: Out) -> int:
    from panelist.metrics.alerts import Alerts

    if getattr(args, "hook_verb", None):
        return webhook.cmd_webhook(args, out)
    if args.limit < 1:
        raise BadRequest("--limit must be 1 or more")
    book = Alerts(open_home(args.data))
    out.table(book.recent(args.limit), ["ts", "kind", "subject", "message"])
    return 0


def cmd_discover(args, out: Out) -> int:
    from panelist.metrics.roster import discover
    from panelist.metrics.roster.catalog import Catalog
    from panelist.metrics.upstream.client import Upstream

    catalog, upstream = Catalog(open_home(args.data)), Upstream()
    try:
        if args.add:
            added = discover.add(catalog, upstream, args.add, args.endpoint)
            out.result(
                {"added": added},
                "\n".join(visible(f"added {a['alias']} → {a['endpoint']}") for a in added),
            )
            return 0
        found = discover.find(catalog, upstream, args.endpoint, free_only=args.free)
    finally:
        upstream.close()
    if out.as_json:
        out.result(found)
    else:
        out.table(
            [
                dict(
                    r["facts"],
                    endpoint=r["endpoint"],
                    id=r["id"],
                    free=r["free"],
                    also=", ".join(r["also_on_roster"]),
                )
                for r in found["models"]
            ],
            ["endpoint", "id", "free", "context", "price_in", "price_out", "vision", "also"],
        )
        for f in found["failed"]:
            print(f"panelist: {f['endpoint']} not read: {visible(f['error'])}", file=sys.stderr)
    return 1 if found["failed"] else 0


COMMANDS = {"catalog": cmd_catalog, "alerts": cmd_alerts, "discover": cmd_discover}
