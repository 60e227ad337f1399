"""Benchmark the review suite. It prints figures; it asserts nothing.

    python scripts/bench_suite.py [--answers 100000] [--tasks 40] [--models 5] [--epochs 3]
                                  [--rpm 120] [--skip-run] [--json]

1. The strict scorer over ``--answers`` recorded answers (target: 100,000 in 2 s or less). The
   answers are those the demo's simulated models give to the starter pack, the parser's tricky
   cases, and long explanations after a verdict, in a fixed shuffle; each is parsed and scored
   against its task's key, as the runner does.
2. A run of ``--tasks`` × ``--models`` × ``--epochs`` samples on the simulated upstream, its
   endpoint capped at ``--rpm`` calls a minute through admission (target: the cap used at 90%
   or more, never exceeded). The calls' send times come from the simulated upstream; printed:
   the most calls in any 60 s window (half-open, as the cap counts them), the mean use of the
   cap over every 60 s window the run spans, the run's wall time; both as admission let the
   calls in (from the samples) and as they arrived at the upstream (what a provider counts). This part needs
   ``metrics/upstream/admission.py``; a build without it says so and prints the scorer's figure alone.
3. The dashboard's suite report while a run appends: a samples file of ``--samples`` lines
   (each with a 2 KB raw answer, as a review's is), then 10 more; the time to the new report by
   rebuilding from the whole file (``report.load``, what a single command does) and by the live
   report a server keeps (``LiveReport``, which reads only the 10).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

import argparse
import bisect
import importlib.util
import json
import os
import random
import shutil
import tempfile
import time
from datetime import datetime
from typing import Any

from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream
from panelist.suite import answers, demo, results
from panelist.suite.runner import SuiteRun
from panelist.suite.tasks import STARTER, load_task, scan

WINDOW = 60.0
EXTRA = [
    "VERDICT: TRUE or FALSE",
    "FAULT: lines 12-13",
    "Fault: Line 0153",
    "<think>Line 3 looks odd.</think>\n```\nFAULT: line 3\n```",
    "FAULT: line 41\nIt returns 503 where 429 is meant.",
    "Let me look.\nNO FAULT",
    "VERDICT: TRUE\nVERDICT: FALSE",
    "FAULT: line 12, 14 and line 20",
    "",
]
PROSE = (
    "The loop compares each item with the key and moves the bound; "
    "on equal items it stops early, which is what the caller expects.\n"
)


def recorded_answers(n: int) -> list[tuple]:
    """``n`` (kind, key, text) triples, as a run of the suite would record them."""
    tasks, _ = scan(STARTER)
    known = {t.id: t for t in tasks}
    pool = []
    for t in tasks:
        for model in demo.MODELS:
            pool.append((t.kind, t.answer, demo.answer(model, t, known)))
        for text in EXTRA:
            pool.append((t.kind, t.answer, text))
        long_text = demo.answer("sim-steady", t, known) + "\n" + PROSE * 30
        pool.append((t.kind, t.answer, long_text))
    rng = random.Random(7)
    return [pool[rng.randrange(len(pool))] for _ in range(n)]


def bench_scorer(n: int) -> dict:
    corpus = recorded_answers(n)
    t0 = time.perf_counter()
    right = sum(answers.score(kind, key, text).right for kind, key, text in corpus)
    seconds = time.perf_counter() - t0
    return {
        "answers": n,
        "seconds": round(seconds, 3),
        "per_answer_us": round(seconds / n * 1e6, 2),
        "right": right,
        "target_s": 2.0,
    }


def windows(times: list[float], rpm: int) -> dict:
    """The most calls in any half-open 60 s window, and the mean use of the cap over every
    window that fits in the run (one starting each second)."""
    times = sorted(times)
    most = max(bisect.bisect_left(times, t + WINDOW) - i for i, t in enumerate(times))
    first, last = times[0], times[-1]
    starts = [first + s for s in range(0, max(1, int(last - first - WINDOW) + 1))]
    used = [
        (bisect.bisect_left(times, s + WINDOW) - bisect.bisect_left(times, s)) / rpm for s in starts
    ]
    return {
        "most_in_60s": most,
        "mean_use": round(sum(used) / len(used), 4),
        "span_s": round(last - first, 1),
    }


def bench_run(n_tasks: int, n_models: int, epochs: int, rpm: int) -> dict:
    if importlib.util.find_spec("panelist.metrics.upstream.admission") is None or not hasattr(
        Roster, "set_limits"
    ):
        return {
            "skipped": "this build has no admission (metrics/upstream/admission.py), so nothing "
            "would hold the run to the cap; the run's figures need a build with it"
        }
    work = Path(tempfile.mkdtemp(prefix="bench-suite-"))
    try:
        home = open_home(work / "data")
        tasks, _ = scan(STARTER)
        extra = work / "tasks"
        for i in range(max(0, n_tasks - len(tasks))):  # more claims, to make up the count
            folder = extra / f"bench-claim-{i}"
            (folder / "fixtures").mkdir(parents=True)
            (folder / "fixtures" / "m.py").write_text(f"LIMIT = {i}\n")
            (folder / "task.json").write_text(
                json.dumps(
                    {
                        "id": folder.name,
                        "kind": "claim",
                        "prompt": f"Claim: LIMIT is {i}.",
                        "attach": ["m.py"],
                        "answer": True,
                    }
                )
            )
            tasks.append(load_task(folder))
        tasks = tasks[:n_tasks]
        names = [f"sim-b{i}" for i in range(n_models)]
        with SimUpstream(
            {n: {"latency": 0.05 + 0.05 * i, "answer": "NO FAULT"} for i, n in enumerate(names)}
        ) as sim:
            roster = Roster(home)
            roster.add_endpoint("sim", sim.url)
            for n in names:
                roster.add_model(n, "sim", family=n)
            roster.set_limits("endpoint", "sim", {"rpm": rpm})
            view = roster.view()
            run = SuiteRun(
                home,
                tasks,
                [view.models[n] for n in names],
                epochs=epochs,
                known={t.id: t for t in tasks},
            )
            t0 = time.monotonic()
            summary = run.run()
            wall = time.monotonic() - t0
            sent = [r["ts"] for r in sim.requests]
        lines = results.read(home.suite_samples)
        # when each call was let in: its end, less its time, plus its wait for admission
        admitted = [
            datetime.fromisoformat(s["ts"].replace("Z", "+00:00")).timestamp()
            - s["seconds"]
            + s["waited"]
            for s in lines
        ]
        return {
            "samples": len(tasks) * n_models * epochs,
            "scored": summary["scored"],
            "failed": summary["failed"],
            "calls": len(sent),
            "rpm": rpm,
            "wall_s": round(wall, 1),
            "arrived": windows(sent, rpm),
            "admitted": windows(admitted, rpm),
            "waited_p50_s": sorted(s["waited"] for s in lines)[len(lines) // 2],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_report(n: int) -> dict:
    from panelist.suite import report
    from panelist.suite.livereport import LiveReport

    rng = random.Random(3)

    def line() -> str:
        task = f"t{rng.randrange(40)}"
        # the sample's seat record (metrics/seats/record.py) in part, and the suite's fields
        return (
            json.dumps(
                {
                    "kind": "sample",
                    "call": f"{task}|m|1",
                    "role": "suite",
                    "task": task,
                    "task_hash": "h",
                    "task_kind": "claim",
                    "pair": task,
                    "alias": f"m{rng.randrange(5)}",
                    "epoch": rng.randint(1, 3),
                    "outcome": "scored",
                    "right": rng.random() < 0.6,
                    "verdict": "fault",
                    "flag": None,
                    "answer": "r" * 2000,
                    "tokens": {"total": 900},
                    "seconds": 1.0,
                    "waited": 0.0,
                }
            )
            + "\n"
        )

    tmp = Path(tempfile.mkdtemp(prefix="panelist-bench-report-"))
    try:
        home = open_home(tmp / "data")
        path = home.suite_samples
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            f.writelines(line() for _ in range(n))
        report.load(home)
        live = LiveReport(path)
        t0 = time.perf_counter()
        live.doc()
        first = time.perf_counter() - t0
        with open(path, "a") as f:
            f.writelines(line() for _ in range(10))
        t0 = time.perf_counter()
        report.load(home)
        whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        live.doc()
        tail = time.perf_counter() - t0
        return {
            "samples": n,
            "file_mb": round(path.stat().st_size / 2**20, 1),
            "rebuild_ms": round(whole * 1000, 1),
            "live_ms": round(tail * 1000, 2),
            "live_first_ms": round(first * 1000, 1),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rpm", type=int, default=120)
    parser.add_argument("--skip-run", action="store_true", help="no suite run (step 2)")
    parser.add_argument(
        "--samples", type=int, default=100_000, help="lines in the samples file of step 3"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "scorer": bench_scorer(args.answers)}
    s = figures["scorer"]
    if not args.json:
        print(
            f"scorer: {s['answers']:,} answers in {s['seconds']:.2f} s "
            f"({s['per_answer_us']:.1f} µs each; target ≤ {s['target_s']:.0f} s) "
            f"on {figures['cpus']} CPUs",
            flush=True,
        )
    if not args.skip_run:
        figures["run"] = r = bench_run(args.tasks, args.models, args.epochs, args.rpm)
        if args.json:
            pass
        elif "skipped" in r:
            print(f"run: skipped: {r['skipped']}")
        else:
            print(
                f"run: {r['samples']} samples ({args.tasks} tasks × {args.models} models × "
                f"{args.epochs} epochs), {r['calls']} calls in {r['wall_s']:.0f} s, "
                f"{r['failed']} failed"
            )
            for what in ("admitted", "arrived"):
                w = r[what]
                print(
                    f"cap {r['rpm']} rpm, calls as {what}: at most {w['most_in_60s']} in any "
                    f"60 s (over the cap: {max(0, w['most_in_60s'] - r['rpm'])}); mean use "
                    f"of the cap {w['mean_use'] * 100:.0f}% (target ≥ 90%)"
                )
            print(f"median wait for admission {r['waited_p50_s']:.1f} s")
    figures["report"] = rep = bench_report(args.samples)
    if not args.json:
        print(
            f"report after 10 new samples in {rep['samples']:,} ({rep['file_mb']} MB): "
            f"rebuilt from the whole file {rep['rebuild_ms']:.0f} ms; live report "
            f"{rep['live_ms']:.2f} ms (its first read of the file {rep['live_first_ms']:.0f} ms)"
        )
    if args.json:
        print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
