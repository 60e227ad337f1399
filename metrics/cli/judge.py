"""``panelist judge check``: run a judge (the ceiling model, or the judges named) blind over a
sample of the panels people judged and report how far it agrees with them (``race.judgecheck``),
beside a constant and a length-only baseline. Its estimated cost is printed before anything is
sent; ``--budget`` refuses a check estimated over it and stops asking once it is spent. As
``panelist race`` does, a check without ``--budget`` runs on once the estimate is printed.
"""

from __future__ import annotations

import sys

from panelist.metrics.cli.main import Out
from panelist.metrics.home import open_home


def register(nouns, common) -> None:
    j = nouns.add_parser("judge", help="check a judge against the verdicts people gave")
    j = j.add_subparsers(dest="verb", metavar="VERB", required=True)
    c = j.add_parser(
        "check",
        parents=[common],
        help="run a judge blind over judged panels and score it against people",
    )
    c.add_argument(
        "--shape",
        metavar="S",
        help="only panels of this shape (default: every "
        "shape, each reported apart and all together)",
    )
    c.add_argument(
        "--judges",
        metavar="a,b",
        help="check these models, of distinct families (default: the ceiling "
        "model); with several, their majority is scored too, as a jury",
    )
    c.add_argument(
        "--sample", type=int, default=100, metavar="N", help="judged panels to sample (default 100)"
    )
    c.add_argument(
        "--budget",
        metavar="AMOUNT",
        help="most to spend, in the judges' currency: a check estimated above it "
        "is refused, and asking stops once it is spent",
    )
    c.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="the sample's and the intervals' seed (default 0)",
    )


def cmd_judge(args, out: Out) -> int:
    from panelist.metrics.cli.ratings import check_shape
    from panelist.metrics.race.judgecheck import JudgeCheck, parse_budget, table

    home = open_home(args.data)
    judges = (
        None if args.judges is None else [a.strip() for a in args.judges.split(",") if a.strip()]
    )
    check = JudgeCheck(
        home,
        judges=judges,
        shape=check_shape(args.shape) if args.shape else None,
        sample=args.sample,
        seed=args.seed,
        budget=None if args.budget is None else parse_budget(args.budget),
    )
    plan = check.plan()
    # before anything is sent; on stderr with --json, whose stdout is the report alone
    print(plan.said(), file=sys.stderr if out.as_json else sys.stdout, flush=True)
    shown = sys.stderr.isatty()

    def progress(done, of):
        if shown:
            print(f"\r  {done}/{of} panels judged", end="", file=sys.stderr, flush=True)

    report = check.run(plan, progress)
    if shown:
        print(file=sys.stderr)
    out.result(report, table(report))
    return 0


COMMANDS = {"judge": cmd_judge}
