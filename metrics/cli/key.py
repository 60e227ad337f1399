"""``panelist key``: the gateway keys callers present (create, list, revoke). A key is shown
once, when it is made; the data folder keeps only its digest.
"""

from __future__ import annotations

import sys

from panelist.metrics.cli import budget
from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections


def register(nouns, common) -> None:
    ke = nouns.add_parser("key", help="gateway keys callers present").add_subparsers(
        dest="verb", metavar="VERB", required=True
    )
    a = ke.add_parser("create", parents=[common], help="make a key (shown once)")
    a.add_argument("name", help="names the caller on every call it makes")
    a.add_argument("--collections", metavar="a,b", help="the only collections it may call")
    a.add_argument("--rpm", type=int, metavar="N", help="requests a minute it may make")
    a.add_argument(
        "--no-races",
        dest="races",
        action="store_false",
        help="it may not start races (each makes many upstream calls)",
    )
    budget.add_options(a)
    a = ke.add_parser("budget", parents=[common], help="change a key's spend caps")
    a.add_argument("name", help="the key whose caps to change")
    budget.add_options(a)
    ke.add_parser("list", parents=[common], help="the keys, never their secrets")
    ke.add_parser(
        "revoke", parents=[common], help="stop a key for good (its name is never reused)"
    ).add_argument("name", help="the key to revoke")


def cmd_key(args, out: Out) -> int:
    from panelist.metrics.server.keys import Keys

    home = open_home(args.data)
    keys = Keys(home)
    if args.verb == "create":
        budget.check(args)  # a bad amount is refused before a key is made
        secret, key = keys.create(
            args.name,
            collections=args.collections,
            rpm=args.rpm,
            known=Collections(home).all().keys(),
            races=args.races,
        )
        budget.apply(home, "key", key.name, args)
        # the one time the key exists outside the caller's hands: it is stored only as a digest.
        # Alone on stdout, so `KEY=$(panelist key create app)` captures just the key.
        out.result(dict(key.public(), key=secret), secret)
        if not out.as_json:
            print(
                f"key '{key.name}' made; copy it now, it is not shown again. Callers send it as "
                "'Authorization: Bearer <key>'",
                file=sys.stderr,
            )
    elif args.verb == "budget":
        if args.name not in {k.name for k in keys.all()}:
            from panelist.metrics.errors import NotFound

            raise NotFound(f"unknown key '{args.name}'; see `panelist key list`")
        budget.check(args)
        report = budget.apply(home, "key", args.name, args)
        out.result({"name": args.name, "budget": report}, f"key {args.name}: {budget.said(report)}")
    elif args.verb == "revoke":
        keys.revoke(args.name)
        out.result({"revoked": args.name}, f"revoked key {args.name}")
    else:
        from panelist.metrics.panel.budgets import Budgets

        caps = Budgets.of_home(home)
        rows = []
        try:
            for k in keys.all():
                row, spent = k.public(), caps.report("key", k.name)
                if spent:  # a key with no cap has no budget field, as before caps existed
                    row["budget"] = spent
                rows.append(row)
        finally:
            caps.close()
        if not out.as_json:
            rows = [
                dict(
                    r,
                    hint="…" + r["hint"],
                    collections=",".join(r["collections"] or ["(all)"]),
                    budget=budget.said(r.get("budget") or {}),
                )
                for r in rows
            ]
        out.table(rows, ["name", "hint", "collections", "rpm", "races", "budget", "created"])
    return 0


COMMANDS = {"key": cmd_key}
