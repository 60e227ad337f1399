"""``panelist alerts webhook``: the URLs alerts are POSTed to (add, list, rm, test). A URL is
shown masked everywhere but in the config file, as it usually carries its secret.
"""

from __future__ import annotations

from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home


def register(alerts_parser, common) -> None:
    verbs = alerts_parser.add_subparsers(dest="hook_noun", metavar="webhook")
    wh = verbs.add_parser("webhook", help="where alerts are sent").add_subparsers(
        dest="hook_verb", metavar="VERB", required=True
    )
    a = wh.add_parser("add", parents=[common], help="POST each alert to URL")
    a.add_argument("url", help="where alerts are POSTed (shown masked from then on)")
    a.add_argument(
        "--kind",
        action="append",
        metavar="KIND",
        dest="kinds",
        help="only alerts of this kind (repeat for more); default: every kind",
    )
    a.add_argument("--slack", action="store_true", help='send a Slack-compatible {"text"} body')
    wh.add_parser("list", parents=[common], help="the webhooks and their latest delivery")
    wh.add_parser("rm", parents=[common], help="stop sending to a webhook").add_argument(
        "id", help="the webhook's id, as `alerts webhook list` shows it"
    )
    wh.add_parser("test", parents=[common], help="send a test alert now and wait").add_argument(
        "id", nargs="?", help="one webhook; default: every webhook"
    )


def _last(row: dict) -> str:
    last = row.get("last")
    if not last:
        return "nothing sent yet"
    if last["ok"]:
        return f"sent {last['kind']} at {last['ts']}"
    return f"FAILED {last['kind']} at {last['ts']}: {last['error']}"


def cmd_webhook(args, out: Out) -> int:
    from panelist.metrics.upkeep import webhooks

    home = open_home(args.data)
    hooks = webhooks.Hooks(home)
    if args.hook_verb == "add":
        made = hooks.add(args.url, args.kinds, args.slack)
        out.result(
            {
                "id": made["id"],
                "url": webhooks.mask(made["url"]),
                "kinds": made["kinds"],
                "slack": made["slack"],
            },
            f"webhook {made['id']} added: {webhooks.mask(made['url'])} gets "
            + (
                f"the alerts of kind {', '.join(made['kinds'])}" if made["kinds"] else "every alert"
            ),
        )
    elif args.hook_verb == "rm":
        hooks.remove(args.id)
        out.result({"removed": args.id}, f"webhook {args.id} removed")
    elif args.hook_verb == "test":
        got = webhooks.send_test(home, args.id)
        out.table(got, ["id", "url", "ok", "error"] if not out.as_json else [])
        return 0 if all(g["ok"] for g in got) else 1
    else:
        rows = hooks.public()
        if not out.as_json:
            rows = [dict(r, kinds=",".join(r["kinds"]) or "(all)", last=_last(r)) for r in rows]
        out.table(rows, ["id", "url", "kinds", "slack", "last"])
    return 0
