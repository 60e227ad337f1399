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

Admission's own figures (calls per minute against ``rpm``, use of the cap) are printed by
``scripts/bench_admission.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT)); import _bootstrap  # noqa: E401,E702,F401

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

from panelist.metrics import seatrecord  # noqa: E402
from panelist.metrics.home import open_home  # noqa: E402
from panelist.metrics.race import verdict  # noqa: E402
from panelist.metrics.race.benchmark import Benchmark, GradeBook  # noqa: E402
from panelist.metrics.roster.roster import Roster  # noqa: E402


class Chat:
    grade = "general"

    def run(self, prompt, seat):
        return seat.chat([{"role": "user", "content": prompt}])


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds a model takes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    names = [f"sim-c{i:02d}" for i in range(args.candidates)]
    models = {n: {"latency": args.latency} for n in names}
    inputs = [f"Summarise the plot of short story {i + 1} about a lighthouse keeper."
              for i in range(args.inputs)]
    models["sim-judge"] = {"latency": args.latency,
                           "json": {"accuracy": 6, "shown_work": 2, "reason": "close"},
                           "json_rules": [{"contains": f"short story {i + 1} ", "answer": {
                               "accuracy": 4 + i % 4, "shown_work": 2, "reason": "close"}}
                               for i in range(1, args.inputs, 2)]}
    work = Path(tempfile.mkdtemp(prefix="bench-race-"))
    spec = work / "models.json"
    spec.write_text(json.dumps(models))
    sim = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "sim_upstream.py"),
                            "--models", str(spec)], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    try:
        url = sim.stdout.readline().strip()
        home = open_home(work / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", url)
        for n in names:
            roster.add_model(n, "sim", grade="general", price_in=1.0, price_out=2.0)
        roster.add_model("sim-judge", "sim", grade="strong", price_in=3.0, price_out=9.0)
        grades = GradeBook.plain({"general": names[0], "strong": "sim-judge"}, "sim-judge",
                                 roster)
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
        overhead = [max(0.0, row["wall"] - model_time[row["label"]]) * 1000
                    for row in report.rows if row["succeeded"]]
        t1 = time.perf_counter()
        verdict.decide(report.rows, report.models, report.pinned)
        decided_ms = (time.perf_counter() - t1) * 1000
        figures = {
            "candidates": args.candidates, "runs": args.runs, "inputs": args.inputs,
            "latency_s": args.latency,
            "rows": len(report.rows), "failed": sum(not r["succeeded"] for r in report.rows),
            "calls": calls, "race_wall_s": round(wall, 3),
            "overhead_ms": {"mean": round(sum(overhead) / len(overhead), 3),
                            "p50": round(quantile(overhead, 0.5), 3),
                            "p95": round(quantile(overhead, 0.95), 3),
                            "max": round(max(overhead), 3)},
            "verdict_ms": round(decided_ms, 3), "verdict": report.verdict["state"],
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
        print(f"race of {args.candidates} candidates × {args.inputs} input(s) × {args.runs} "
              f"runs ({figures['rows']} rows, "
              f"{figures['failed']} failed, {calls} calls) on {figures['cpus']} CPUs, "
              f"model latency {args.latency * 1000:.0f} ms")
        print(f"race wall time: {figures['race_wall_s']:.2f} s")
        print(f"overhead per run (wall minus model time): mean {o['mean']:.2f} ms · p50 "
              f"{o['p50']:.2f} ms · p95 {o['p95']:.2f} ms · max {o['max']:.2f} ms")
        print(f"the verdict ({figures['verdict']}, over {args.candidates - 1} candidates): "
              f"{figures['verdict_ms']:.1f} ms once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
