"""``panelist verdict`` and ``panelist pending``: judge one call (by its call id, or by panel
and alias), and list the calls that answered and still await a verdict. Both work on the data
folder, or (``--url``) on a running gateway; the verdict rules are the gateway's own
(``ledger.verdict``), so a verdict means the same whichever way it came.
"""

from __future__ import annotations

import os
import sys

from panelist.metrics.cli import remote
from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.metrics.ledger import verdict as verdict_rules


def register(nouns, common) -> None:
    v = nouns.add_parser(
        "verdict", parents=[common], help="judge one call (its call id, or --panel and --alias)"
    )
    v.add_argument("call", nargs="?", help="the call id, e.g. p20250101-7.member2")
    v.add_argument(
        "--panel",
        metavar="P",
        help="instead of a call id: the panel id (bench.panel, X-Panelist-Panel)",
    )
    v.add_argument(
        "--alias", metavar="A", help="with --panel: the model whose answer you judge, or 'merger'"
    )
    which = v.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--useful",
        dest="useful",
        action="store_true",
        default=None,
        help="the answer helped with the real work",
    )
    which.add_argument("--not-useful", dest="useful", action="store_false", help="it did not")
    v.add_argument(
        "--note", default="", metavar="TEXT", help="why, in a few words (up to 4,000 characters)"
    )
    v.add_argument(
        "--real",
        action="append",
        default=[],
        metavar="CLAIM",
        help="a claim of the answer that held up (repeatable)",
    )
    v.add_argument(
        "--false",
        action="append",
        default=[],
        metavar="CLAIM",
        help="a claim of the answer that was wrong (repeatable)",
    )
    v.add_argument(
        "--url",
        metavar="URL",
        help="send it to a running gateway instead (its key, if it needs one, from $PANELIST_KEY)",
    )

    pe = nouns.add_parser(
        "pending", parents=[common], help="calls that answered and await a verdict"
    )
    pe.add_argument(
        "--limit", type=int, default=50, metavar="N", help="at most this many (default 50)"
    )
    pe.add_argument(
        "--abandoned",
        action="store_true",
        help="list instead the panels whose reply never reached the caller "
        "(their answers are owed no verdict)",
    )
    pe.add_argument(
        "--order",
        choices=("newest", "oldest", "value"),
        default="newest",
        help="newest first (the default), oldest first, or by value: the "
        "verdicts that could most move a pending swap first, each with its reason",
    )
    pe.add_argument(
        "--url",
        metavar="URL",
        help="ask a running gateway instead (its key, if it needs one, from $PANELIST_KEY)",
    )


def cmd_verdict(args, out: Out) -> int:
    by_panel = args.panel is not None or args.alias is not None
    if args.call is not None and by_panel:
        raise BadRequest("give a call id, or --panel and --alias, not both")
    if args.call is None and (args.panel is None or args.alias is None):
        raise BadRequest(
            "name the answer you judge: its call id (p20250101-7.member2), or "
            "--panel P --alias A (the model, or 'merger' for the merged answer)"
        )
    target = {"panel": args.panel, "alias": args.alias} if by_panel else {"call": args.call}
    v = verdict_rules.check(
        {**target, "useful": args.useful, "note": args.note, "real": args.real, "false": args.false}
    )
    if args.url:
        gateway = remote.connect(args.url, remote.CLI, os.environ)
        result = gateway.post("/bench/verdict", {k: x for k, x in v.items() if x is not None})
    else:
        from panelist.metrics.ledger.ledger import Ledger

        with Ledger.of_home(open_home(args.data)) as ledger:
            result = ledger.record_verdict(
                verdict_rules.call_of(v, ledger),
                useful=v["useful"],
                note=v["note"],
                real=v["real"],
                false=v["false"],
                by="cli",
            )
    word = "useful" if v["useful"] else "not useful"
    said = (
        ("recorded" if not result.get("replaced") else "replaced the earlier verdict:")
        if result.get("written")
        else "unchanged (the same verdict was already recorded):"
    )
    out.result(result, f"{said} {result.get('call')} {word}")
    return 0


def cmd_pending(args, out: Out) -> int:
    if args.url:
        gateway = remote.connect(args.url, remote.CLI, os.environ)
        # the gateway's default order is newest: a query that names none works with any version
        asked = "" if args.order == "newest" else f"&order={args.order}"
        found = gateway.get(f"/bench/pending?limit={args.limit}{asked}")
        owed, left = found["data"], found.get("abandoned", [])
    else:
        from panelist.metrics.ledger.ledger import Ledger
        from panelist.metrics.panel import owedorder
        from panelist.metrics.roster.collection import Collections
        from panelist.metrics.roster.roster import Roster

        home = open_home(args.data)
        with Ledger.of_home(home) as ledger:
            owed = owedorder.ordered(
                ledger, Collections(home), Roster(home).view(), args.order, limit=args.limit
            )
            left = [verdict_rules.not_owed(p) for p in ledger.undelivered(limit=args.limit)]
    if args.abandoned:
        if out.as_json:
            out.result(left)
        else:
            out.table(
                [dict(c, reason=p["reason"]) for p in left for c in p["calls"]],
                ["panel", "reason", "call", "alias", "collection", "ts"],
            )
        return 0
    out.table(
        owed, ["call", "alias", "collection", "ts"] + (["reason"] if args.order == "value" else [])
    )
    if left and not out.as_json:
        print(
            f"not owed: {len(left)} panel(s) whose reply never reached the caller; "
            "'panelist pending --abandoned' lists them",
            file=sys.stderr,
        )
    return 0


COMMANDS = {"verdict": cmd_verdict, "pending": cmd_pending}
