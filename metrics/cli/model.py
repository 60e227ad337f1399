"""``panelist model``: the models a seat can be (add, list, rm, decider, retire, restore,
limit, onboard). A retirement is a roster change with an alert; a restore ends both the
retirement and a cooldown (an evidence line), each logged.
"""

from __future__ import annotations

from panelist.metrics.cli import limit, onboard
from panelist.metrics.cli.main import Out
from panelist.metrics.errors import ConfigInvalid, PanelistError
from panelist.metrics.home import open_home
from panelist.metrics.plaintext import visible
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster


def register(nouns, common) -> None:
    mo = nouns.add_parser("model", help="models a seat can be").add_subparsers(
        dest="verb", metavar="VERB", required=True
    )
    a = mo.add_parser("add", parents=[common], help="register a model on an endpoint")
    a.add_argument("alias", help="the name panels and collections call it by")
    a.add_argument(
        "--endpoint",
        required=True,
        metavar="NAME",
        help="the endpoint that serves it (panelist endpoint list)",
    )
    a.add_argument("--served", metavar="ID", help="the id the endpoint knows (default: alias)")
    a.add_argument(
        "--family",
        metavar="F",
        help="the model's line (default: the one its served id names, e.g. gpt for gpt-4o-mini)",
    )
    a.add_argument("--grade", metavar="G", help="its quality tier (panelist grade list)")
    a.add_argument(
        "--context",
        type=int,
        metavar="N",
        help="its context window in tokens (default: the catalog's, if any)",
    )
    a.add_argument(
        "--max-output", type=int, metavar="N", help="the most tokens it may write in one answer"
    )
    a.add_argument("--vision", action="store_true", help="it takes images")
    a.add_argument("--tools", action="store_true", help="it calls tools")
    a.add_argument("--price-in", type=float, metavar="X", help="per million input tokens")
    a.add_argument("--price-out", type=float, metavar="Y", help="per million output tokens")
    a.add_argument("--currency", metavar="CUR", help="the currency of its prices (default USD)")
    a.add_argument(
        "--decider",
        action="store_true",
        help="this model labels the prompts of shape-auto collections (one at a time)",
    )
    mo.add_parser(
        "decider",
        parents=[common],
        help="make one model the decider (labels the prompts of shape-auto collections)",
    ).add_argument("alias", help="the model to mark")
    mo.add_parser("list", parents=[common], help="the models on the roster")
    mo.add_parser("rm", parents=[common], help="remove a model no collection uses").add_argument(
        "alias", help="the model to remove"
    )
    a = mo.add_parser(
        "retire", parents=[common], help="keep a model out of every panel until it is restored"
    )
    a.add_argument("alias", help="the model to retire")
    a.add_argument("--reason", default="", metavar="TEXT", help="why, for the alert")
    mo.add_parser(
        "restore", parents=[common], help="end a model's cooldown and retirement"
    ).add_argument("alias", help="the model to restore")
    limit.add_parser(mo, common, "alias", "model")
    onboard.add_parser(mo, common)


def cmd_model(args, out: Out) -> int:
    home = open_home(args.data)
    roster = Roster(home)
    if args.verb == "add":
        m = roster.add_model(
            args.alias,
            args.endpoint,
            served=args.served,
            family=args.family,
            grade=args.grade,
            context=args.context,
            max_output=args.max_output,
            vision=args.vision,
            tools=args.tools,
            price_in=args.price_in,
            price_out=args.price_out,
            currency=args.currency,
            decider=args.decider,
        )
        out.result(
            m.public(),
            f"model {m.alias} → {m.endpoint}:{m.served}" + (" (the decider)" if m.decider else ""),
        )
    elif args.verb == "decider":
        changed = roster.set_decider(args.alias)
        out.result(
            {"decider": args.alias, "changed": changed},
            f"{args.alias} is now the decider"
            if changed
            else f"{args.alias} was already the decider; nothing to do",
        )
    elif args.verb == "rm":
        users = Collections(home).using(args.alias)
        if users:
            raise ConfigInvalid(
                f"model '{args.alias}' is used by collection(s) "
                f"{', '.join(users)}; change them first"
            )
        roster.remove_model(args.alias)
        out.result({"removed": args.alias}, f"removed model {args.alias}")
    elif args.verb == "retire":
        from panelist.metrics.upkeep import retirement
        from panelist.metrics.alerts import Alerts

        alerts = Alerts(home)
        try:
            changed = retirement.retire(
                roster, alerts, args.alias, by="cli", reason=visible(args.reason.strip())[:500]
            )
        finally:
            alerts.close()
        out.result(
            {"alias": args.alias, "retired": changed},
            f"retired {args.alias}; `panelist model restore {args.alias}` puts it back"
            if changed
            else f"{args.alias} was retired already; nothing to do",
        )
    elif args.verb == "restore":
        return restore_model(home, roster, args.alias, out)
    elif args.verb == "limit":
        return limit.cmd_limit(args, out, home, "model", args.alias)
    elif args.verb == "onboard":
        return onboard.cmd_onboard(args, out, home)
    else:
        out.table(
            [m.public() for m in roster.view().models.values()],
            [
                "alias",
                "endpoint",
                "served",
                "family",
                "grade",
                "context",
                "vision",
                "tools",
                "price_in",
                "price_out",
                "currency",
            ],
        )
    return 0


def restore_model(home, roster: Roster, alias: str, out: Out) -> int:
    """Clear a cooldown (an evidence line) and a retirement (a roster change), both logged."""
    from panelist.metrics.upkeep import retirement
    from panelist.metrics.alerts import Alerts
    from panelist.metrics.ledger.ledger import Ledger

    if alias not in roster.view().models:
        raise PanelistError(f"unknown model '{alias}'; see `panelist model list`")
    alerts = Alerts(home)
    try:
        with Ledger.of_home(home) as ledger:
            unretired, left = retirement.restore(roster, ledger, alias, by="cli", alerts=alerts)
    finally:
        alerts.close()
    done = ([f"ended a cooldown that had {left:.0f} s to run"] if left else []) + (
        ["no longer retired"] if unretired else []
    )
    out.result(
        {"alias": alias, "cooldown_cleared": bool(left), "unretired": unretired},
        f"restored {alias}: {'; '.join(done)}"
        if done
        else f"{alias} was neither cooling down nor retired; nothing to do",
    )
    return 0


COMMANDS = {"model": cmd_model}
