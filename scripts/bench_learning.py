"""Benchmark learning: how many verdicts each explorer policy and verdict order needs before the
right swap is suggested, on a simulated roster with known true useful rates. It prints figures;
it asserts nothing.

    python scripts/bench_learning.py [--trials N] [--seed S] [--budget V] [--equal-budget V]
                                     [--json]

One line per policy (``panel.replay`` says what each figure means and assumes):
``verdicts_to_decision`` (median over the trials; ``>`` when the median trial never got there),
``regret`` (median useful answers lost against the five truly best models), ``bound_broken``
(trials in which any candidate waited past the staleness bound) and ``false_swap`` (share of
trials among equal models that suggested a swap). Then the ratio of thompson+value's median to
staleness+oldest's (a bound when the baseline's median is censored), and the run's seconds. The
default 200 trials take about a quarter of an hour on a small machine; ``--trials 20`` about
two minutes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

import argparse
import json
import time

from panelist.metrics.panel import replay


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--candidates", type=int, default=20)
    p.add_argument("--edge", type=float, default=0.15)
    p.add_argument("--budget", type=int, default=replay.BUDGET)
    p.add_argument("--equal-budget", type=int, default=replay.EQUAL_BUDGET)
    p.add_argument("--per-panel", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    options = dict(
        seed=args.seed,
        candidates=args.candidates,
        edge=args.edge,
        budget=args.budget,
        equal_budget=args.equal_budget,
        per_panel=args.per_panel,
    )
    if not args.json:
        print(
            f"{args.trials} trials per policy and scenario, {args.candidates} candidates, "
            f"one better by {args.edge}, up to {args.budget} verdicts ({args.equal_budget} "
            f"among equal models), {args.per_panel} a panel",
            flush=True,
        )
    # the two ends of the ratio first, each line printed as soon as it is known
    rows = []
    for policy, order in (replay.POLICIES[0], replay.POLICIES[-1], *replay.POLICIES[1:-1]):
        rows.append(replay.row(policy, order, args.trials, **options))
        if not args.json:
            print(replay.line(rows[-1]), flush=True)
    seconds = time.perf_counter() - t0
    if args.json:
        print(
            json.dumps(
                {"rows": rows, "ratio": replay.ratio(rows), "seconds": round(seconds, 1)}, indent=2
            )
        )
    else:
        print(replay.ratio(rows))
        print(f"{seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
