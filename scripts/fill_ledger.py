"""Fill a data folder's gateway ledger with synthetic panels, or probe a filled one.

    python scripts/fill_ledger.py DATA_DIR --panels N [--verdicts M] [--seed S]
    python scripts/fill_ledger.py DATA_DIR --probe

Filling writes N three-seat panels (seat records in evidence.jsonl, panel lines of realistic size
in calls.jsonl) through the Ledger's own record builders, in batches, then M verdicts on random
calls through ``record_verdict``, then closes the ledger (which writes its snapshot). Models are
``sim-a`` .. ``sim-h``, shapes ``general`` and ``review``. It appends to whatever is there.

Probing opens the ledger in this fresh process and prints, as JSON, how long construction, the
first ``states()``, and ``call()`` / ``panel()`` for the oldest call took, and the peak RSS.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent)); import _bootstrap  # noqa

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

from panelist.metrics.home import open_home  # noqa: E402
from panelist.metrics.ledger import Ledger  # noqa: E402

ALIASES = [f"sim-{c}" for c in "abcdefgh"]
MEMBERS, EXPLORERS = ALIASES[:5], ALIASES[5:]
SHAPES = ("general", "review")
BATCH = 1000
WORDS = ("the function returns early when the cache is cold so the caller sees a stale value; "
         "check the lock ordering in the writer and the retry path in the client. ").split()


def prompt_text(rng: random.Random) -> str:
    """About 600 bytes of review-like prose."""
    out, size = [], 0
    while size < 600:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def fill(runs: Path, panels: int, verdicts: int, seed: int) -> dict:
    rng = random.Random(seed)
    ledger = Ledger(runs)
    start_clock = time.time() - panels * 0.5  # as if one panel every half second until now
    written_calls: list[str] = []
    # verdicts go to calls drawn from a pool about 4x their number, spread over the whole run,
    # so most are first verdicts on old calls and some repeat or replace an earlier one
    sample_every = max(1, panels * 3 // max(1, verdicts * 4))
    t0 = time.perf_counter()
    done = 0
    while done < panels:
        count = min(BATCH, panels - done)
        started = [start_clock + (done + i) * 0.5 for i in range(count)]
        ids = ledger.new_panels(count, started[0])
        seat_recs, panel_recs = [], []
        for pid, t in zip(ids, started):
            shape = rng.choice(SHAPES)
            key = rng.choice(("bench", "alice", "ci"))
            members = rng.sample(MEMBERS, 2)
            seats = [("member1", members[0]), ("member2", members[1]),
                     ("explorer1", rng.choice(EXPLORERS))]
            public = []
            for label, alias in seats:
                call = f"{pid}.{label}"
                status = "ok" if rng.random() < 0.95 else "error"
                secs = round(rng.uniform(0.5, 20.0), 3)
                tokens = {"prompt": 180, "completion": rng.randint(20, 400)}
                tokens["total"] = tokens["prompt"] + tokens["completion"]
                error = None if status == "ok" else "server_error: upstream answered 503"
                seat_recs.append({"call": call, "panel": pid, "alias": alias,
                                  "seat": label[:-1], "shape": shape, "seated": t,
                                  "status": status, "seconds": secs, "tokens": tokens,
                                  "error": error, "key": key, "collection": "bench/reviewers"})
                public.append({"call": call, "seat": label[:-1], "alias": alias,
                               "status": status, "seconds": secs, "tokens": tokens,
                               "answer": "" if error else "Looks right; one nit in line 12.",
                               "error": error, "served": f"served/{alias}"})
                if rng.randrange(sample_every) == 0:
                    written_calls.append(call)
            panel_recs.append({"panel": pid, "collection": "bench/reviewers", "shape": shape,
                               "key": key, "started": t, "seconds": max(p["seconds"]
                                                                        for p in public),
                               "estimate": 190, "prompt": prompt_text(rng), "seats": public,
                               "skipped": []})
        ledger.record_seats(seat_recs)
        ledger.record_panels(panel_recs)
        done += count
    t_write = time.perf_counter() - t0

    t1 = time.perf_counter()
    ledger.refresh()  # fold what was written (the first verdict would do it anyway)
    t_fold = time.perf_counter() - t1

    t2 = time.perf_counter()
    if written_calls:
        for _ in range(verdicts):
            call = rng.choice(written_calls)
            ledger.record_verdict(call, useful=rng.random() < 0.6,
                                  note=rng.choice(("", "caught the bug", "missed the point")),
                                  by="fill")
    t_verdicts = time.perf_counter() - t2

    t3 = time.perf_counter()
    ledger.close()
    t_close = time.perf_counter() - t3
    sizes = {p.name: p.stat().st_size for p in sorted(runs.iterdir()) if p.is_file()}
    return {"panels": panels, "verdicts": verdicts,
            "write_s": round(t_write, 2), "panels_per_s": round(panels / max(t_write, 1e-9)),
            "fold_s": round(t_fold, 2), "verdicts_s": round(t_verdicts, 2),
            "close_s": round(t_close, 2), "bytes": sizes}


def probe(runs: Path) -> dict:
    t0 = time.perf_counter()
    ledger = Ledger(runs)
    t_open = time.perf_counter() - t0
    t1 = time.perf_counter()
    ledger.states(ALIASES, "general")
    t_states = time.perf_counter() - t1
    t1 = time.perf_counter()
    ledger.states(ALIASES, "review")
    t_states2 = time.perf_counter() - t1
    with open(runs / "calls.jsonl", "rb") as f:
        line = f.readline()  # the oldest panel: long gone from the recent map
    first = json.loads(line) if line.endswith(b"\n") else None
    t2 = time.perf_counter()
    found = ledger.call(first["seats"][0]["call"]) if first else None
    t_call = time.perf_counter() - t2
    t3 = time.perf_counter()
    ledger.panel(first["panel"]) if first else None
    t_panel = time.perf_counter() - t3
    t4 = time.perf_counter()
    ledger.recent_panels(20)
    ledger.pending(limit=50)
    t_lists = time.perf_counter() - t4
    from_snapshot, replayed = ledger.from_snapshot, ledger.replayed
    ledger.close()
    return {"open_s": round(t_open, 4), "from_snapshot": from_snapshot, "replayed": replayed,
            "first_states_ms": round(t_states * 1000, 3),
            "next_states_ms": round(t_states2 * 1000, 3),
            "old_call_ms": round(t_call * 1000, 3), "old_call_found": found is not None,
            "panel_ms": round(t_panel * 1000, 3),
            "recent_panels_and_pending_ms": round(t_lists * 1000, 3),
            # ru_maxrss is in KiB on Linux
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="data folder (its runs/gateway is filled)")
    ap.add_argument("--panels", type=int, default=0)
    ap.add_argument("--verdicts", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--probe", action="store_true", help="time opening and lookups instead")
    args = ap.parse_args(argv)
    runs = open_home(args.data).gateway_runs
    if args.probe:
        print(json.dumps(probe(runs)))
        return 0
    if args.panels <= 0:
        print("fill_ledger: give --panels N (N > 0), or --probe", file=sys.stderr)
        return 2
    os.makedirs(runs, exist_ok=True)
    print(json.dumps(fill(runs, args.panels, args.verdicts, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
