"""Time ``panelist ratings`` over a ledger of about a million verdicts, and check by simulation
that its intervals and suggestions mean what they say.

    python scripts/bench_ratings.py [--data DIR] [--verdicts N] [--models K] [--repeat R]
                                    [--trials T] [--suggest-trials S]
                                    [--fit-models K [--fit-panels P]]

``--fit-models 500 --verdicts 0 --trials 0 --suggest-trials 0`` times one fit of a 500-model
roster alone: the work a background thread does so that no reply waits for it.
``--verdicts 0`` skips the timing, ``--trials 0`` the simulated coverage of the 95% intervals
and ``--suggest-trials 0`` the simulated suggestions (swaps among equal models, power for a
better one); ``ratingsim``'s docstring says what each figure means. ``--trials 100 --suggest-trials 40`` is a quick run.

Fills a fresh folder (default ``runs/bench-ratings`` of this checkout, emptied first) with
three-seat panels of K models over four shapes, every seat judged, until N verdicts: each
answer useful at a rate set by its model's hidden strength (so the ratings have an order to
find). Only evidence.jsonl is written (seat and verdict lines, in batches, in the gateway's
record shapes): the ratings read nothing else, and ``scripts/fill_ledger.py``'s calls.jsonl
prompts would make a million-verdict fill take many minutes. One ledger then folds the log and
saves its snapshot, as a gateway's would at close.

It prints, as JSON: the fill's figures; ``panelist ratings --json`` run R times as a fresh
process (wall and CPU seconds: start-up, the ledger's open from its snapshot, the fit of every
shape);
in one process, the ledger's open, the first fit of every shape and a second look (unchanged
counts: no refit); how many models and comparisons each shape has; and whether the fitted order
matches the hidden one (Spearman's rho per shape). Target: ``panelist ratings`` <= 2 s.

Figures, not assertions.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import math
import random
import resource
import shutil
import statistics
import subprocess
import time
from typing import Any

from panelist.metrics.home import open_home
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.ratings import Ratings
from panelist.metrics.store.jsonl import SCHEMA, Appender, utc_iso
from panelist.scripts import ratingsim

ROOT = Path(__file__).resolve().parent.parent
BATCH = 6000
SHAPES = ("general", "review", "code", "vision")


def fill(runs: Path, verdicts: int, models: int, seed: int) -> tuple[dict, float]:
    """Three-seat panels, every seat answered and judged, until ``verdicts`` verdicts: seat and
    verdict lines in the record shapes the gateway writes (``seat_record``, ``record_verdict``),
    appended in batches. Returns the hidden strengths and the seconds taken."""
    rng = random.Random(seed)
    aliases = [f"sim-{i:03d}" for i in range(models)]
    strength = {a: rng.gauss(0.3, 0.8) for a in aliases}
    t0 = time.perf_counter()
    start = time.time() - verdicts  # as if one panel every three seconds until now
    out = Appender(runs / "evidence.jsonl")
    batch, written, n = [], 0, 0
    try:
        while written < verdicts:
            panel, shape = f"p20260101-{n + 1}", SHAPES[n % len(SHAPES)]
            seated = start + 3 * n
            ts = utc_iso(seated)
            n += 1
            for label, alias in zip(("member1", "member2", "explorer1"), rng.sample(aliases, 3)):
                call = f"{panel}.{label}"
                common = {"call": call, "panel": panel, "alias": alias, "shape": shape}
                batch.append(
                    {
                        "v": SCHEMA,
                        "kind": "seat",
                        "ts": ts,
                        **common,
                        "seat": label[:-1],
                        "status": "ok",
                        "seconds": round(rng.uniform(0.5, 9.0), 3),
                        "seated": seated,
                        "key": "bench",
                        "collection": "bench/c00",
                    }
                )
                useful = rng.random() < 1 / (1 + math.exp(-strength[alias]))
                batch.append(
                    {
                        "v": SCHEMA,
                        "kind": "verdict",
                        "ts": ts,
                        **common,
                        "collection": "bench/c00",
                        "useful": useful,
                        "note": "",
                        "real": [],
                        "false": [],
                        "by": "bench",
                    }
                )
                written += 1
            if len(batch) >= BATCH:
                out.append(*batch)
                batch = []
        if batch:
            out.append(*batch)
    finally:
        out.close()
    return strength, time.perf_counter() - t0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def spearman(fitted: list[str], strength: dict[str, float]) -> float | None:
    if len(fitted) < 3:
        return None
    truth = sorted(fitted, key=lambda a: -strength[a])
    n = len(fitted)
    d2 = sum((i - truth.index(a)) ** 2 for i, a in enumerate(fitted))
    return round(1 - 6 * d2 / (n * (n * n - 1)), 3)


def timing(args) -> dict:
    """The fill, the fold and ``panelist ratings`` timed (the module docstring)."""
    shutil.rmtree(args.data, ignore_errors=True)
    home = open_home(args.data)
    runs = home.gateway_runs
    runs.mkdir(parents=True, exist_ok=True)
    strength, fill_s = fill(runs, args.verdicts, args.models, args.seed)
    t0 = time.perf_counter()
    Ledger(runs).close()  # fold the verdicts once and save the snapshot
    fold_s = time.perf_counter() - t0

    cmd = [
        sys.executable,
        str(ROOT / "metrics" / "offload.py"),
        "ratings",
        "--json",
        "--data",
        str(args.data),
    ]
    walls, cpus = [], []
    shown: Any = None
    for _ in range(max(1, args.repeat)):
        t0, c0 = time.perf_counter(), children_cpu()
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - t0)
        cpus.append(children_cpu() - c0)
        shown = json.loads(done.stdout)

    t0 = time.perf_counter()
    ledger = Ledger(runs)
    open_s = time.perf_counter() - t0
    try:
        book = Ratings.of_home(home, ledger)
        t0 = time.perf_counter()
        fitted = book.all()
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        book.all()
        again_s = time.perf_counter() - t0
        verdict_count = ledger.verdict_count()
    finally:
        ledger.close()
    return {
        "verdicts": verdict_count,
        "fill_s": round(fill_s, 2),
        "evidence_mb": round((runs / "evidence.jsonl").stat().st_size / 2**20, 1),
        "fold_and_snapshot_s": round(fold_s, 2),
        "panelist_ratings_s": {
            "runs": [round(w, 3) for w in walls],
            "median": round(statistics.median(walls), 3),
            # CPU seconds of the process: what a loaded machine's wall
            # time hides
            "cpu_runs": [round(c, 3) for c in cpus],
            "target": 2.0,
        },
        "in_process": {
            "ledger_open_s": round(open_s, 3),
            "fit_all_shapes_s": round(first_s, 3),
            "look_again_s": round(again_s, 4),
        },
        "shapes": {
            r.shape: {
                "models": len(r.models),
                "comparisons": sum(r.sources.values()),
                "panels": sum(r.clusters.values()),
                "spearman_vs_hidden": spearman([m.alias for m in r.models], strength),
            }
            for r in fitted
        },
        "cli_shapes": [s["shape"] for s in shown["shapes"]],
    }


def large_fit(models: int, panels: int, seed: int) -> dict:
    """How long one fit of a large roster takes (what runs on a background thread, never on a
    reply's), against how long a reply's look at a stale fit takes: ``panels`` judged panels of
    three models drawn from ``models``, the first useful over one or both others."""
    from panelist.metrics.ledger.ratings import rate, slow_to_fit

    rng = random.Random(seed)
    names = [f"m{i:03d}" for i in range(models)]
    patterns: dict = {}
    for _ in range(panels):
        a, b, c = rng.sample(names, 3)
        key = ((a, b), (a, c)) if rng.random() < 0.5 else ((a, b),)
        patterns[key] = patterns.get(key, 0) + 1
    sources = {"verdicts": patterns}
    t0 = time.perf_counter()
    counted_slow = slow_to_fit(sources)
    t1 = time.perf_counter()
    rate("general", sources)
    t2 = time.perf_counter()
    return {
        "models": models,
        "panels": panels,
        "patterns": len(patterns),
        "counted_slow": counted_slow,
        "slow_to_fit_s": round(t1 - t0, 4),
        "fit_s": round(t2 - t1, 2),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "runs" / "bench-ratings")
    ap.add_argument(
        "--verdicts", type=int, default=1_000_000, help="verdicts to time over (0: no timing)"
    )
    ap.add_argument("--models", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--trials",
        type=int,
        default=500,
        help="simulated data sets per coverage scenario (0: no coverage check)",
    )
    ap.add_argument(
        "--suggest-trials",
        type=int,
        default=100,
        help="simulated collections per cell of the suggestion grid (0: none)",
    )
    ap.add_argument(
        "--fit-models",
        type=int,
        default=0,
        help="time one fit of this many models over --fit-panels judged panels (0: none)",
    )
    ap.add_argument("--fit-panels", type=int, default=100_000)
    args = ap.parse_args(argv)
    out = {}
    if args.fit_models > 0:
        out["large_fit"] = large_fit(args.fit_models, args.fit_panels, args.seed)
    if args.verdicts > 0:
        out["timing"] = timing(args)
    if args.trials > 0 or args.suggest_trials > 0:  # --trials 0: the suggestion grid alone
        out["simulation"] = ratingsim.run(args.trials, args.suggest_trials, args.seed)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
