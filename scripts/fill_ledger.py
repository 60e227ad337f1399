"""Fill a data folder's gateway ledger with synthetic panels, or probe a filled one.

    python scripts/fill_ledger.py DATA_DIR --panels N [--verdicts M] [--seed S]
                                  [--models K --collections C]
    python scripts/fill_ledger.py DATA_DIR --probe

Filling writes N three-seat panels (seat records in evidence.jsonl, panel lines of realistic size
in calls.jsonl) through the Ledger's own record builders, in batches, then M verdicts on random
calls through ``record_verdict``, then closes the ledger (which writes its snapshot). Models are
``sim-a`` .. ``sim-h``, shapes ``general`` and ``review``. It appends to whatever is there.

With ``--models K --collections C`` it writes what a busier gateway would: K models
(``sim-000`` ..), C collections of two members each (``bench/c00`` ..) with explorers from the
whole roster, four shapes, a ``"seated"`` line per panel as the gateway writes, seat failures of
several kinds, and verdicts that list false claims.

Probing opens the ledger in this fresh process and prints, as JSON, how long construction, the
first ``states()``, and ``call()`` / ``panel()`` for the oldest call took, and the peak RSS.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import os
import random
import resource
import time

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.home import open_home
from panelist.metrics.seats import SeatResult
from panelist.metrics.ledger.ledger import Ledger

ALIASES = [f"sim-{c}" for c in "abcdefgh"]
MEMBERS, EXPLORERS = ALIASES[:5], ALIASES[5:]
SHAPES = ("general", "review")
BATCH = 1000
WORDS = (
    "the function returns early when the cache is cold so the caller sees a stale value; "
    "check the lock ordering in the writer and the retry path in the client. "
).split()


def prompt_text(rng: random.Random) -> str:
    """About 600 bytes of review-like prose."""
    out, size = [], 0
    while size < 600:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


ANSWER = "Looks right; one nit in line 12."
FAILURES = (
    "server_error: upstream answered 503",
    "timeout: no answer within 120 s",
    "rate_limit: upstream answered 429",
    "connection: connection refused",
)
BUSY_SHAPES = ("general", "review", "code", "vision")


def seat_lines(
    call: str, seat: str, alias: str, status: str, seconds: float, tokens: dict, error: str
) -> tuple[dict, dict]:
    """``(evidence fields, calls.jsonl seat)`` of one seat: its seat record, as a gateway writes
    it (``error`` given as ``kind: message``)."""
    kind, _, message = (
        error.partition(": ")
        if status == "error"
        else ("empty" if status == "empty" else "", "", error)
    )
    result = SeatResult(
        call=call,
        seat=seat,
        alias=alias,
        served=f"served/{alias}",
        endpoint="sim",
        status=status,
        answer=ANSWER if status == "ok" else "",
        tokens=tokens,
        seconds=seconds,
        error_kind=kind,
        error=message,
        attempts=1,
        finish_reason="stop" if status == "ok" else "",
    )
    return seatrecord.fields(result, answer=False), dict(seatrecord.fields(result), seat=seat)


class Busy:
    """The roster and collections of ``--models`` / ``--collections`` mode: the same for every
    seed, so fills that top a folder up (and a benchmark's roster) agree on them."""

    def __init__(self, models: int, collections: int):
        rng = random.Random(f"roster {models} {collections}")
        self.aliases = [f"sim-{i:03d}" for i in range(models)]
        self.collections = [
            (f"bench/c{i:02d}", rng.sample(self.aliases, 2), rng.choice(BUSY_SHAPES))
            for i in range(collections)
        ]

    def panel(self, rng: random.Random, pid: str, t: float, key: str):
        """``(seated line args, seat records, calls.jsonl seats)`` of one panel."""
        name, members, shape = rng.choice(self.collections)
        explorer = rng.choice(self.aliases)
        while explorer in members:
            explorer = rng.choice(self.aliases)
        seats = [("member1", members[0]), ("member2", members[1]), ("explorer1", explorer)]
        seat_recs, public = [], []
        for label, alias in seats:
            roll = rng.random()
            status = "ok" if roll < 0.92 else "empty" if roll < 0.94 else "error"
            error = (
                rng.choice(FAILURES)
                if status == "error"
                else "upstream answered with no text"
                if status == "empty"
                else ""
            )
            secs = round(rng.lognormvariate(1.0, 0.8), 3)
            tokens = {"prompt": 180, "completion": rng.randint(20, 400)} if status == "ok" else {}
            call = f"{pid}.{label}"
            rec, shown = seat_lines(call, label[:-1], alias, status, secs, tokens, error)
            seat_recs.append(dict(rec, panel=pid, shape=shape, seated=t, key=key, collection=name))
            public.append(shown)
        seated = {
            "panel": pid,
            "shape": shape,
            "aliases": [a for _, a in seats],
            "seated": t,
            "collection": name,
        }
        return seated, seat_recs, public


def fill(
    runs: Path,
    panels: int,
    verdicts: int,
    seed: int,
    *,
    models: int = 0,
    collections: int = 0,
    every: float = 0.5,
) -> dict:
    """Write the panels as if one started every ``every`` seconds until now (a larger gap
    spreads a few panels over many days, as the per-day charts need)."""
    rng = random.Random(seed)
    busy = Busy(models, max(1, collections)) if models else None
    ledger = Ledger(runs)
    start_clock = time.time() - panels * every
    written_calls: list[str] = []
    # verdicts go to calls drawn from a pool about 4x their number, spread over the whole run,
    # so most are first verdicts on old calls and some repeat or replace an earlier one
    sample_every = max(1, panels * 3 // max(1, verdicts * 4))
    t0 = time.perf_counter()
    done = 0
    while done < panels:
        count = min(BATCH, panels - done)
        started = [start_clock + (done + i) * every for i in range(count)]
        ids = ledger.new_panels(count, started[0])
        seat_recs, panel_recs, seatings = [], [], []
        for pid, t in zip(ids, started):
            if busy is not None:
                key = rng.choice(("bench", "alice", "ci"))
                seated, recs, public = busy.panel(rng, pid, t, key)
                seatings.append(seated)
                seat_recs += recs
                written_calls += [
                    r["call"]
                    for r in recs
                    if r["status"] == "ok" and rng.randrange(sample_every) == 0
                ]
                panel_recs.append(
                    {
                        "panel": pid,
                        "collection": seated["collection"],
                        "shape": seated["shape"],
                        "key": key,
                        "started": t,
                        "seconds": max(p["seconds"] for p in public),
                        "estimate": 190,
                        "reply": "all",
                        "prompt": prompt_text(rng),
                        "seats": public,
                        "skipped": [],
                        "abandoned": False,
                    }
                )
                continue
            shape = rng.choice(SHAPES)
            key = rng.choice(("bench", "alice", "ci"))
            members = rng.sample(MEMBERS, 2)
            seats = [
                ("member1", members[0]),
                ("member2", members[1]),
                ("explorer1", rng.choice(EXPLORERS)),
            ]
            public = []
            for label, alias in seats:
                call = f"{pid}.{label}"
                status = "ok" if rng.random() < 0.95 else "error"
                secs = round(rng.uniform(0.5, 20.0), 3)
                tokens = {"prompt": 180, "completion": rng.randint(20, 400)}
                tokens["total"] = tokens["prompt"] + tokens["completion"]
                error = None if status == "ok" else "server_error: upstream answered 503"
                rec, shown = seat_lines(call, label[:-1], alias, status, secs, tokens, error or "")
                seat_recs.append(
                    dict(
                        rec, panel=pid, shape=shape, seated=t, key=key, collection="bench/reviewers"
                    )
                )
                public.append(shown)
                if rng.randrange(sample_every) == 0:
                    written_calls.append(call)
            panel_recs.append(
                {
                    "panel": pid,
                    "collection": "bench/reviewers",
                    "shape": shape,
                    "key": key,
                    "started": t,
                    "seconds": max(p["seconds"] for p in public),
                    "estimate": 190,
                    "prompt": prompt_text(rng),
                    "seats": public,
                    "skipped": [],
                }
            )
        ledger.record_seats(seat_recs, seatings=seatings)
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
            useful = rng.random() < 0.6
            false = (
                [] if busy is None or useful else [f"claim {i}" for i in range(rng.randint(0, 3))]
            )
            ledger.record_verdict(
                call,
                useful=useful,
                note=rng.choice(("", "caught the bug", "missed the point")),
                false=false,
                by="fill",
            )
    t_verdicts = time.perf_counter() - t2

    t3 = time.perf_counter()
    ledger.close()
    t_close = time.perf_counter() - t3
    sizes = {p.name: p.stat().st_size for p in sorted(runs.iterdir()) if p.is_file()}
    return {
        "panels": panels,
        "verdicts": verdicts,
        "write_s": round(t_write, 2),
        "panels_per_s": round(panels / max(t_write, 1e-9)),
        "fold_s": round(t_fold, 2),
        "verdicts_s": round(t_verdicts, 2),
        "close_s": round(t_close, 2),
        "bytes": sizes,
    }


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
    return {
        "open_s": round(t_open, 4),
        "from_snapshot": from_snapshot,
        "replayed": replayed,
        "first_states_ms": round(t_states * 1000, 3),
        "next_states_ms": round(t_states2 * 1000, 3),
        "old_call_ms": round(t_call * 1000, 3),
        "old_call_found": found is not None,
        "panel_ms": round(t_panel * 1000, 3),
        "recent_panels_and_pending_ms": round(t_lists * 1000, 3),
        # ru_maxrss is in KiB on Linux
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="data folder (its runs/gateway is filled)")
    ap.add_argument("--panels", type=int, default=0)
    ap.add_argument("--verdicts", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--models",
        type=int,
        default=0,
        help="a roster of this many models, with seatings, shapes and failures",
    )
    ap.add_argument(
        "--collections",
        type=int,
        default=0,
        help="with --models: this many collections (default 1)",
    )
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
    if args.collections and not args.models:
        print("fill_ledger: --collections needs --models", file=sys.stderr)
        return 2
    print(
        json.dumps(
            fill(
                runs,
                args.panels,
                args.verdicts,
                args.seed,
                models=args.models,
                collections=args.collections,
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
