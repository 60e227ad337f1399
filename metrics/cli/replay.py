"""``panelist replay``: how fast each explorer policy and verdict order learns, replayed on a
simulated roster whose true useful rates are known (``panel.replay``). It reads and writes no
data folder; it prints one line per policy with ``verdicts_to_decision``, ``regret``,
``bound_broken`` and ``false_swap`` (medians and counts over seeded trials), then the ratio of
the last policy's median verdicts to the first's (a bound when the first's is censored).
"""

from __future__ import annotations

from panelist.metrics.cli.main import Out
from panelist.metrics.errors import BadRequest


def register(nouns, common) -> None:
    r = nouns.add_parser(
        "replay", parents=[common], help="compare explorer policies on a simulated roster"
    )
    r.add_argument(
        "--trials",
        type=int,
        default=200,
        help="seeded trials per policy and scenario (default 200; 20 runs in "
        "well under two minutes)",
    )
    r.add_argument("--seed", type=int, default=1, help="the first trial's seed")
    r.add_argument("--candidates", type=int, default=20, help="explorer candidates (default 20)")
    r.add_argument(
        "--edge",
        type=float,
        default=0.15,
        help="how much better the one better candidate is (default 0.15)",
    )
    r.add_argument(
        "--budget",
        type=int,
        default=20_000,
        help="verdicts a trial may give before it counts as undecided (default 20000)",
    )
    r.add_argument(
        "--equal-budget",
        type=int,
        default=3_000,
        help="verdicts a trial among equal models may give, where any swap is false (default 3000)",
    )
    r.add_argument(
        "--per-panel", type=int, default=2, help="verdicts given after each panel (default 2)"
    )


def check(args) -> None:
    for name, low in (
        ("trials", 1),
        ("candidates", 2),
        ("budget", 1),
        ("equal_budget", 1),
        ("per_panel", 1),
    ):
        if getattr(args, name) < low:
            raise BadRequest(
                f"--{name.replace('_', '-')} must be at least {low}; got {getattr(args, name)}"
            )
    if not 0 < args.edge < 0.45:
        raise BadRequest(
            f"--edge must be above 0 and below 0.45 (the weakest member's rate is "
            f"0.55); got {args.edge}"
        )


def cmd_replay(args, out: Out) -> int:
    from panelist.metrics.panel import replay

    check(args)
    rows = replay.summary(
        args.trials,
        seed=args.seed,
        candidates=args.candidates,
        edge=args.edge,
        budget=args.budget,
        equal_budget=args.equal_budget,
        per_panel=args.per_panel,
    )
    out.result(rows, "\n".join([*(replay.line(r) for r in rows), replay.ratio(rows)]))
    return 0


COMMANDS = {"replay": cmd_replay}
