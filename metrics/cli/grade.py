"""``panelist grade``: quality tiers, weakest first, the model pinned per grade and the
ceiling (list, pin, ceiling, order).
"""

from __future__ import annotations

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.metrics.plaintext import visible


def register(nouns, common) -> None:
    gr = nouns.add_parser(
        "grade", help="quality tiers, weakest first, and their pinned models"
    ).add_subparsers(dest="verb", metavar="VERB", required=True)
    gr.add_parser("list", parents=[common], help="the grades, their pins and the ceiling")
    a = gr.add_parser("pin", parents=[common], help="the model the deployment uses for a grade")
    a.add_argument("grade", help="the grade to pin")
    a.add_argument("alias", nargs="?", help="the model of that grade to pin")
    a.add_argument("--clear", action="store_true", help="unpin the grade")
    a = gr.add_parser(
        "ceiling", parents=[common], help="the strongest model (default: the strongest grade's pin)"
    )
    a.add_argument("alias", nargs="?", help="the model to name the ceiling")
    a.add_argument("--clear", action="store_true", help="back to the strongest grade's pin")
    gr.add_parser("order", parents=[common], help="set the grades, weakest first").add_argument(
        "grades", metavar="a,b,c", help="every grade, weakest first"
    )


def cmd_grade(args, out: Out) -> int:
    from panelist.metrics.roster.grades import Grades

    grades = Grades(open_home(args.data))
    if args.verb == "pin":
        if args.clear == bool(args.alias):
            raise BadRequest("give the model to pin (grade pin GRADE ALIAS) or --clear, not both")
        old = grades.pin(args.grade, None if args.clear else args.alias, by="cli")
        new = None if args.clear else args.alias
        out.result(
            {"grade": args.grade, "pinned": new, "was": old},
            f"grade {args.grade}: "
            + (f"pinned {new}" if new else "no pin")
            + (f" (was {old})" if old and old != new else ""),
        )
    elif args.verb == "ceiling":
        if args.clear == bool(args.alias):
            raise BadRequest("give the ceiling model (grade ceiling ALIAS) or --clear, not both")
        grades.set_ceiling(None if args.clear else args.alias, by="cli")
        now = grades.ceiling()
        out.result(
            {"ceiling": now, "set": not args.clear},
            f"ceiling: {now or 'none (no grade is pinned)'}"
            + (" (the strongest grade's pin)" if args.clear and now else ""),
        )
    elif args.verb == "order":
        dropped = grades.set_order([g for g in args.grades.split(",") if g.strip()], by="cli")
        out.result(
            {"order": grades.order(), "unpinned": dropped},
            "grades, weakest first: "
            + ", ".join(grades.order())
            + (f"; dropped the pins of {', '.join(dropped)}" if dropped else ""),
        )
    else:
        listing = grades.listing()
        if out.as_json:
            out.result(listing)
            return 0
        out.table(
            [
                dict(
                    g,
                    pinned=(g["pinned"] or "(none)")
                    + (f" [{g['problem']}]" if g["problem"] else ""),
                    models=",".join(g["models"]),
                )
                for g in listing["grades"]
            ],
            ["rank", "grade", "pinned", "models"],
        )
        c = listing["ceiling"]
        how = "set" if c["set"] else "the strongest grade's pin"
        print(
            f"ceiling: {visible(c['alias'])} ({how})"
            if c["alias"]
            else "ceiling: none (pin a grade, or set one with `panelist grade ceiling ALIAS`)"
        )
        if listing["unordered"]:
            print(
                "grades models use that the order leaves out: "
                + visible(", ".join(listing["unordered"]))
                + " (add them with `panelist grade order a,b,c`)"
            )
    return 0


COMMANDS = {"grade": cmd_grade}
