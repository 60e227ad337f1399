"""Benchmark the race's own overhead on the simulated upstream. It prints figures; it asserts
nothing.

    python scripts/bench_race.py [--candidates 20] [--runs 5] [--inputs 1] [--latency 0.02]
                                 [--json]

A plain chat job (one model call a run) is raced on ``--candidates`` simulated models of one
grade, ``--runs`` times on each of ``--inputs`` inputs, and judged by a simulated ceiling model
whose marks vary by input (so the verdict's test has a spread to work on). The simulated
upstream runs in its own process, so it does not share this process's GIL. For every candidate
run the overhead is its wall time (as the report gives it) minus the time of its model calls
(from the race's call log): what the race itself adds to a run (seat, transcript, logging,
threads). Printed: the mean and p50 / p95 / max of that overhead (both times are kept to the
millisecond, so a single run's figure is ±1 ms; the mean is not), the race's wall time and its
calls, and what the verdict (the non-inferiority test over every candidate) costs, once.

``--sequential`` runs no race: it simulates jobs raced again and again on the verdict's own rule
(``verdict.decide``, the rows a race's report feeds it), with the judge's whole marks drawn
around 5.5 of 7 (spread 1 mark), and prints

* a candidate exactly at the margin (1 point of 10 worse on average) raced again until it is
  named, up to 5 looks of ``--look-runs`` runs: how often it is named by each look, under the
  sequential rule and, for contrast, testing every look at 5%; and under the rule when each
  look adds the high end of the advice instead (a user who follows the advice);
* a candidate 3 points worse: how often it is named by look 5;
* a clearly good candidate (as good as the pinned model): how often it is named by each look
  (the power), at ``--look-runs`` and at 10 runs a look and following the advice, and a first
  look's power were it tested at 5% alone (the rule's cost);
* the advice of reruns of one first race (``--look-runs`` runs, three candidates): the low and
  high ends' 10th, 50th and 90th percentiles across reruns, and how often it was assumed.

    python scripts/bench_race.py --sequential [--trials 2000] [--look-runs 3] [--seed 31]

Admission's own figures (calls per minute against ``rpm``, use of the cap) are printed by
``scripts/bench_admission.py``.
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
import os
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.home import open_home
from panelist.metrics.race import sequential, verdict
from panelist.metrics.race.benchmark import Benchmark, GradeBook
from panelist.metrics.roster.roster import Roster


class Chat:
    grade = "general"

    def run(self, prompt, seat):
        return seat.chat([{"role": "user", "content": prompt}])


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the sequential rule, simulated ---------------------------------------------------------------
REF_MEAN, REF_SD = 5.5, 1.0  # the pinned model's accuracy marks (of 7)
PRICED = [
    {"model": m, "cost": c, "currency": "USD"}
    for m, c in (("pinned", 1.0), ("cheap", 0.1), ("b", 0.2), ("c", 0.3))
]


def _mark(rng, mean=REF_MEAN, sd=REF_SD) -> int:
    return min(7, max(0, round(rng.gauss(mean, sd))))


def _rows(model: str, marks: list[int], first: int) -> list[dict]:
    return [
        {
            "model": model,
            "input": 1,
            "run": first + n,
            "succeeded": True,
            "accuracy": a,
            "shown_work": 2,
            "capped_from": None,
            "total": a + 2,
            "score": None,
            "score_error": None,
        }
        for n, a in enumerate(marks, 1)
    ]


CANDIDATE = {
    "margin": lambda rng: max(0, _mark(rng) - (rng.random() < 0.7)),  # 0.7 mark = 1 point
    "3 worse": lambda rng: _mark(rng, REF_MEAN - 3 * 7 / 10),
    "good": lambda rng: _mark(rng),
}


def _job(rng, kind: str, runs: int, rule: str, looks: int = 5) -> int | None:
    """One job raced again until ``cheap`` is named: the look that named it, or None. ``rule``:
    ``sequential`` (the verdict's), ``every5`` (each look at 5%), ``advised`` (the verdict's,
    each look adding the high end of the advice, at most 100 runs)."""
    race, done, add = [], 0, runs
    for look in range(1, looks + 1):
        race += _rows("pinned", [_mark(rng) for _ in range(add)], done) + _rows(
            "cheap", [CANDIDATE[kind](rng) for _ in range(add)], done
        )
        done += add
        if rule == "every5":
            diffs = verdict.differences(
                [r for r in race if r["model"] == "cheap"],
                [r for r in race if r["model"] == "pinned"],
                "accuracy",
                "run",
            )
            if verdict.measure_test(diffs, verdict.MARGIN, 0.05)["p"] <= 0.05:
                return look
            continue
        said = verdict.decide(race, PRICED[:2], "pinned", look=look)
        if said["model"] == "cheap":
            return look
        needed = said.get("needed")
        if rule == "advised" and needed:
            add = min(100, needed["high"])
    return None


def _by_look(rng, kind: str, runs: int, rule: str, trials: int) -> list[float]:
    named = [0] * 6
    for _ in range(trials):
        named[_job(rng, kind, runs, rule) or 0] += 1
    return [round(sum(named[1 : k + 1]) / trials, 4) for k in range(1, 6)]


def _first_look_power_at(rng, runs: int, level: float, trials: int) -> float:
    named = 0
    for _ in range(trials):
        race = _rows("pinned", [_mark(rng) for _ in range(runs)], 0) + _rows(
            "cheap", [CANDIDATE["good"](rng) for _ in range(runs)], 0
        )
        diffs = verdict.differences(
            [r for r in race if r["model"] == "cheap"],
            [r for r in race if r["model"] == "pinned"],
            "accuracy",
            "run",
        )
        named += verdict.measure_test(diffs, verdict.MARGIN, level)["p"] <= level
    return round(named / trials, 4)


def _advice_spread(rng, runs: int, reruns: int) -> dict:
    lows, highs, assumed = [], [], 0
    for _ in range(reruns):
        race = _rows("pinned", [_mark(rng) for _ in range(runs)], 0)
        for alias in ("cheap", "b", "c"):
            race += _rows(alias, [_mark(rng) for _ in range(runs)], 0)
        needed = verdict.decide(race, PRICED, "pinned").get("needed")
        if needed:
            lows.append(needed["low"])
            highs.append(needed["high"])
            assumed += needed["assumed"] is not None

    def spread(values):
        return [quantile(values, q) for q in (0.1, 0.5, 0.9)] if values else None

    return {
        "reruns": reruns,
        "advised": len(lows),
        "assumed": assumed,
        "low_p10_p50_p90": spread(lows),
        "high_p10_p50_p90": spread(highs),
    }


def sequential_main(args) -> int:
    import random

    t0 = time.monotonic()
    rng = random.Random(args.seed)
    trials, runs = args.trials, args.look_runs
    figures = {
        "trials": trials,
        "runs_a_look": runs,
        "looks": 5,
        "levels": [round(x, 5) for x in sequential.levels(verdict.ALPHA)],
        "margin_named_by_look": _by_look(rng, "margin", runs, "sequential", trials),
        "margin_named_by_look_every_look_at_5pct": _by_look(rng, "margin", runs, "every5", trials),
        "margin_named_by_look_following_the_advice": _by_look(
            rng, "margin", runs, "advised", trials
        ),
        "three_worse_named_by_look_5": _by_look(rng, "3 worse", runs, "sequential", trials)[-1],
        "good_named_by_look": _by_look(rng, "good", runs, "sequential", trials),
        "good_named_by_look_10_runs_a_look": _by_look(rng, "good", 10, "sequential", trials),
        "good_named_by_look_following_the_advice": _by_look(rng, "good", runs, "advised", trials),
        "good_first_look_10_runs_at_5pct": _first_look_power_at(rng, 10, 0.05, trials),
        "good_first_look_10_runs_at_rule": _first_look_power_at(
            rng, 10, sequential.level(1, verdict.ALPHA), trials
        ),
        "advice_across_reruns": _advice_spread(rng, runs, min(trials, 1000)),
    }
    figures["seconds"] = round(time.monotonic() - t0, 1)
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    pct = lambda xs: " → ".join(f"{x:.1%}" for x in xs)  # noqa: E731
    print(
        f"{trials} simulated jobs a line, {runs} runs a look, up to 5 looks (levels "
        + ", ".join(f"{x:.2%}" for x in figures["levels"])
        + ")"
    )
    print("a model exactly at the margin, raced again until named, named by look 1..5:")
    print(f"  the sequential rule:          {pct(figures['margin_named_by_look'])}")
    print(
        f"  every look tested at 5%:      {pct(figures['margin_named_by_look_every_look_at_5pct'])}"
    )
    print(
        f"  the rule, adding the advice:  "
        f"{pct(figures['margin_named_by_look_following_the_advice'])}"
    )
    print(f"a model 3 points worse, named by look 5: {figures['three_worse_named_by_look_5']:.2%}")
    print(
        f"a model as good as the pinned one (power), named by look 1..5: "
        f"{pct(figures['good_named_by_look'])}"
    )
    print(f"  with 10 runs a look: {pct(figures['good_named_by_look_10_runs_a_look'])}")
    print(
        f"  adding the advice's high end: {pct(figures['good_named_by_look_following_the_advice'])}"
    )
    print(
        f"  first look of 10 runs alone: {figures['good_first_look_10_runs_at_rule']:.1%} at "
        f"the rule's 1.48%, {figures['good_first_look_10_runs_at_5pct']:.1%} were it tested "
        "at 5%"
    )
    a = figures["advice_across_reruns"]
    print(
        f"advice across {a['reruns']} reruns of one first race ({runs} runs, 3 candidates): "
        f"advised in {a['advised']}, on an assumed spread in {a['assumed']}; more runs, low "
        f"end p10/p50/p90 {a['low_p10_p50_p90']}, high end {a['high_p10_p50_p90']}"
    )
    print(f"({figures['seconds']} s)")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds a model takes")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="simulate jobs raced again on the verdict's rule instead",
    )
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--look-runs", type=int, default=3, help="runs a look adds")
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args(argv)
    if args.sequential:
        return sequential_main(args)

    names = [f"sim-c{i:02d}" for i in range(args.candidates)]
    models = {n: {"latency": args.latency} for n in names}
    inputs = [
        f"Summarise the plot of short story {i + 1} about a lighthouse keeper."
        for i in range(args.inputs)
    ]
    models["sim-judge"] = {
        "latency": args.latency,
        "json": {"accuracy": 6, "shown_work": 2, "reason": "close"},
        "json_rules": [
            {
                "contains": f"short story {i + 1} ",
                "answer": {"accuracy": 4 + i % 4, "shown_work": 2, "reason": "close"},
            }
            for i in range(1, args.inputs, 2)
        ],
    }
    work = Path(tempfile.mkdtemp(prefix="bench-race-"))
    spec = work / "models.json"
    spec.write_text(json.dumps(models))
    sim = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "sim_upstream.py"), "--models", str(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert sim.stdout is not None  # stdout=PIPE above
    try:
        url = sim.stdout.readline().strip()
        home = open_home(work / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", url)
        for n in names:
            roster.add_model(n, "sim", grade="general", price_in=1.0, price_out=2.0)
        roster.add_model("sim-judge", "sim", grade="strong", price_in=3.0, price_out=9.0)
        grades = GradeBook.plain({"general": names[0], "strong": "sim-judge"}, "sim-judge", roster)
        bench = Benchmark(Chat, runs=args.runs, home=home, grades=grades, admission=None)
        bench.set_inputs(inputs) if args.inputs > 1 else bench.set_input(inputs[0])
        t0 = time.monotonic()
        bench.run()
        wall = time.monotonic() - t0
        report = bench.report()
        model_time: dict[str, float] = defaultdict(float)
        calls = 0
        with open(report.calls_log, encoding="utf-8") as f:
            for line in f:
                call = seatrecord.read(json.loads(line))
                calls += 1
                if call["role"] == "candidate":
                    model_time[call["call"].rsplit(".", 1)[0]] += call["seconds"]
        overhead = [
            max(0.0, row["wall"] - model_time[row["label"]]) * 1000
            for row in report.rows
            if row["succeeded"]
        ]
        t1 = time.perf_counter()
        verdict.decide(report.rows, report.models, report.pinned)
        decided_ms = (time.perf_counter() - t1) * 1000
        figures = {
            "candidates": args.candidates,
            "runs": args.runs,
            "inputs": args.inputs,
            "latency_s": args.latency,
            "rows": len(report.rows),
            "failed": sum(not r["succeeded"] for r in report.rows),
            "calls": calls,
            "race_wall_s": round(wall, 3),
            "overhead_ms": {
                "mean": round(sum(overhead) / len(overhead), 3),
                "p50": round(quantile(overhead, 0.5), 3),
                "p95": round(quantile(overhead, 0.95), 3),
                "max": round(max(overhead), 3),
            },
            "verdict_ms": round(decided_ms, 3),
            "verdict": report.verdict["state"],
            "cpus": os.cpu_count(),
        }
    finally:
        sim.terminate()
        sim.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        o = figures["overhead_ms"]
        print(
            f"race of {args.candidates} candidates × {args.inputs} input(s) × {args.runs} "
            f"runs ({figures['rows']} rows, "
            f"{figures['failed']} failed, {calls} calls) on {figures['cpus']} CPUs, "
            f"model latency {args.latency * 1000:.0f} ms"
        )
        print(f"race wall time: {figures['race_wall_s']:.2f} s")
        print(
            f"overhead per run (wall minus model time): mean {o['mean']:.2f} ms · p50 "
            f"{o['p50']:.2f} ms · p95 {o['p95']:.2f} ms · max {o['max']:.2f} ms"
        )
        print(
            f"the verdict ({figures['verdict']}, over {args.candidates - 1} candidates): "
            f"{figures['verdict_ms']:.1f} ms once"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
