"""``panelist collection``: named panels (save, list, rm) and what their verdicts suggest
(suggest: a model rated clearly above a member, by the same rule as a reply's ``bench.suggest``).
"""

from __future__ import annotations

from panelist.metrics.cli import budget
from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import EXPLORER_POLICIES, REPLIES, Collections
from panelist.metrics.roster.roster import Roster


def register(nouns, common) -> None:
    co = nouns.add_parser("collection", help="named panels").add_subparsers(
        dest="verb", metavar="VERB", required=True
    )
    a = co.add_parser("save", parents=[common], help="make (or replace) a collection")
    a.add_argument("name", help="callers ask for it as the model bench/NAME")
    a.add_argument(
        "--members",
        required=True,
        metavar="a,b,c",
        help="the models that sit in every panel, by alias",
    )
    a.add_argument(
        "--description",
        default="",
        metavar="TEXT",
        help="what it is for (shown to callers who name no collection)",
    )
    a.add_argument("--tags", default="", metavar="a,b", help="words to find it by")
    a.add_argument(
        "--shape",
        default="",
        metavar="S",
        help="the kind of work its verdicts count for (auto: the decider labels "
        "each prompt; none: general, or vision for a request with images)",
    )
    a.add_argument(
        "--reply",
        default="all",
        choices=REPLIES,
        help="every answer (all, the default), one merged answer, or one picked "
        "seat's answer (pick: what agents and structured output want)",
    )
    a.add_argument(
        "--merger",
        default="",
        metavar="ALIAS",
        help="the model that writes merged replies (default: the best-judged member)",
    )
    a.add_argument(
        "--explorer-policy",
        default="staleness",
        choices=EXPLORER_POLICIES,
        help="how explorer seats are chosen: staleness (rotate by wait, the "
        "default) or thompson (the candidates likeliest to beat a member)",
    )
    budget.add_options(a)
    co.add_parser("list", parents=[common], help="the collections")
    co.add_parser("rm", parents=[common], help="remove a collection").add_argument(
        "name", help="the collection to remove"
    )
    a = co.add_parser(
        "suggest", parents=[common], help="models whose verdicts are clearly better than a member's"
    )
    a.add_argument("name", help="the collection to look at")
    a.add_argument(
        "--shape",
        metavar="S",
        help="the shape of work to compare on (default: the collection's, else general)",
    )


def cmd_collection(args, out: Out) -> int:
    home = open_home(args.data)
    collections = Collections(home)
    if args.verb == "save":
        budget.check(args)
        c = collections.save(
            Roster(home).view(),
            args.name,
            args.members,
            description=args.description,
            tags=args.tags,
            shape=args.shape,
            reply=args.reply,
            merger=args.merger,
            explorer_policy=args.explorer_policy,
        )
        n = c.explorers(collections.limits())
        caps = budget.apply(home, "collection", c.name, args)
        out.result(
            dict(c.public(), budget=caps or None),
            f"saved {c.model_id}: {', '.join(c.members)} + {n} explorer(s)"
            + (f"; budget {budget.said(caps)}" if caps else ""),
        )
    elif args.verb == "rm":
        collections.remove(args.name)
        out.result({"removed": args.name}, f"removed collection {args.name}")
    elif args.verb == "suggest":
        return cmd_collection_suggest(args, out, home, collections)
    else:
        limits = collections.limits()
        out.table(
            [
                dict(
                    c.public(),
                    id=c.model_id,
                    explorers=c.explorers(limits),
                    members=",".join(c.members),
                    tags=",".join(c.tags),
                )
                for c in collections.all().values()
            ],
            [
                "id",
                "members",
                "explorers",
                "explorer_policy",
                "shape",
                "reply",
                "tags",
                "description",
            ],
        )
    return 0


def cmd_collection_suggest(args, out: Out, home, collections: Collections) -> int:
    """Print the suggestions for one collection, or "no suggestion" with the evidence."""
    from panelist.metrics.panel import suggest
    from panelist.metrics.cli.ratings import book_of, check_shape

    name = args.name if args.name.startswith("bench/") else f"bench/{args.name}"
    collection, _ = collections.resolve(name)
    shape = check_shape(args.shape or collection.shape or "general")
    view = Roster(home).view()
    with book_of(home) as book:
        ratings = book.of(shape)
    report = suggest.report(collection, view, ratings, shape)
    if out.as_json:
        out.result(report)
        return 0
    for s in report["suggest"]:
        lo, hi = s["interval"]
        mlo, mhi = s["member_interval"]
        print(
            f"{s['alias']} instead of {s['instead_of']} on {shape}: rated {s['rating']:.2f} "
            f"({lo:.2f}-{hi:.2f}), the member {s['member_rating']:.2f} ({mlo:.2f}-{mhi:.2f}); "
            f"intervals corrected for {s['compared']} candidate(s)"
        )
    if report["suggest"]:
        print(
            f"to change {collection.model_id}: panelist collection save {collection.name} "
            "--members ..."
        )
        return 0
    print(
        f"no suggestion for {collection.model_id} on {shape}: no model is rated clearly "
        f"above a member (their intervals, corrected for {report['compared']} candidate(s), "
        "overlap, or comparisons are missing)"
    )
    out.table(
        [
            dict(r, interval="{:.2f}-{:.2f}".format(*r["interval"]), rating=f"{r['rating']:.2f}")
            for r in report["evidence"]
        ],
        ["seat", "alias", "rating", "interval", "wins", "losses"],
    )
    if report["members_without_verdicts"]:
        print(
            f"members without comparisons on {shape}: "
            + ", ".join(report["members_without_verdicts"])
        )
    return 0


COMMANDS = {"collection": cmd_collection}
