"""Benchmark the race's own overhead on the simulated upstream. It prints figures; it asserts
nothing.

    python scripts/bench_race.py [--candidates 20] [--runs 5] [--latency 0.02] [--json]

A plain chat job (one model call a run) is raced on ``--candidates`` simulated models of one
grade, ``--runs`` times each, and judged by a simulated ceiling model. The simulated upstream
runs in its own process, so it does not share this process's GIL. For every candidate run the
overhead is its wall time (as the report gives it) minus the time of its model calls (from the
race's call log): what the race itself adds to a run (seat, transcript, logging, threads).
Printed: p50 / p95 / max of that overhead (both times are kept to the millisecond), the
race's wall time and its calls.

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
    parser.add_argument("--latency", type=float, default=0.02, help="seconds a model takes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    names = [f"sim-c{i:02d}" for i in range(args.candidates)]
    models = {n: {"latency": args.latency} for n in names}
    models["sim-judge"] = {"latency": args.latency,
                           "json": {"accuracy": 6, "shown_work": 2, "reason": "close"}}
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
        bench.set_input("Summarise the plot of a short story about a lighthouse keeper.")
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
        figures = {
            "candidates": args.candidates, "runs": args.runs, "latency_s": args.latency,
            "rows": len(report.rows), "failed": sum(not r["succeeded"] for r in report.rows),
            "calls": calls, "race_wall_s": round(wall, 3),
            "overhead_ms": {"p50": round(quantile(overhead, 0.5), 3),
                            "p95": round(quantile(overhead, 0.95), 3),
                            "max": round(max(overhead), 3)},
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
        print(f"race of {args.candidates} candidates × {args.runs} runs ({figures['rows']} rows, "
              f"{figures['failed']} failed, {calls} calls) on {figures['cpus']} CPUs, "
              f"model latency {args.latency * 1000:.0f} ms")
        print(f"race wall time: {figures['race_wall_s']:.2f} s")
        print(f"overhead per run (wall minus model time): p50 {o['p50']:.2f} ms · "
              f"p95 {o['p95']:.2f} ms · max {o['max']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
