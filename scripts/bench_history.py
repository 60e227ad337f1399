"""Time delivery, pending and multi-turn history at two ledger sizes.

    python scripts/bench_history.py [--data DIR] [--sizes 10000,100000] [--repeat R]

Fills a fresh folder (default ``runs/bench-history`` of this checkout, emptied first) with
three-seat panels as the gateway logs them once delivery is recorded: a ``"seated"`` line
awaiting delivery, seat lines (one seat in three answers with a tool call), a ``"delivered"``
line for nine panels in ten, an ``"abandoned"`` one for the rest, and each calls.jsonl line.
At each size it prints, for one process: the ledger's open from its snapshot and by replay (the
replay includes the one pass over calls.jsonl for old abandoned panels, also timed alone), the
per-request costs (``Conversation`` + ``for_seat`` for three seats over a conversation of ten
earlier Panelist turns, ``sticky_alias``, ``tool_call_owner``, ``delivered_panel``), the owed
and abandoned lists, and the peak RSS. p50 / p95 over ``--repeat`` calls after one warm-up.

Figures, not assertions.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import resource
import shutil
import statistics
import time
from typing import Any

from panelist.metrics.panel import history
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger.logs import abandoned_in

ROOT = Path(__file__).resolve().parent.parent
ALIASES = ("sim-a", "sim-b", "sim-c")
BATCH = 1000
PROSE = "the cache is cold so the caller sees a stale value; check the lock order. " * 8


def tool(tid: str) -> dict:
    return {
        "id": tid,
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"n": tid})},
    }


def fill(ledger: Ledger, start: int, count: int) -> list[tuple[str, list[dict]]]:
    """``count`` panels; returns (panel, delivered tool calls) of the last ten."""
    last: list[tuple[str, list[dict]]] = []
    now = time.time()
    for first in range(start, start + count, BATCH):
        n = min(BATCH, start + count - first)
        pids = ledger.new_panels(n, now)
        seatings, seats, panels, after = [], [], [], []
        for i, pid in zip(range(first, first + n), pids):
            seatings.append(
                {
                    "panel": pid,
                    "shape": "general",
                    "aliases": list(ALIASES),
                    "seated": now,
                    "collection": "bench/c",
                    "awaits_delivery": True,
                }
            )
            public = []
            for j, alias in enumerate(ALIASES):
                calls = [tool(f"call_{i}_{j}")] if j == 0 else []
                rec = {
                    "call": f"{pid}.member{j + 1}",
                    "panel": pid,
                    "alias": alias,
                    "seat": "member",
                    "shape": "general",
                    "seated": now,
                    "status": "tool_calls" if calls else "ok",
                    "seconds": 1.0 + j,
                    "tokens": {},
                    "error": "",
                    "key": "local",
                    "collection": "bench/c",
                }
                if calls:
                    rec["tool_calls"] = calls
                seats.append(rec)
                public.append(dict(rec, answer=f"{alias} on {i}: {PROSE}", served=alias))
            left = i % 10 == 9
            panels.append(
                {
                    "panel": pid,
                    "collection": "bench/c",
                    "shape": "general",
                    "key": "local",
                    "started": now,
                    "seconds": 3.0,
                    "estimate": 200,
                    "reply": "pick",
                    "prompt": "user: " + PROSE,
                    "seats": public,
                    "skipped": [],
                    "abandoned": left,
                }
            )
            if not left:
                after.append((pid, [f"call_{i}_0"]))
        ledger.record_seats(seats, now, seatings=seatings)
        for pid, ids in after:
            ledger.record_delivered(pid, None, ids)
        ledger.record_panels(panels, now)
        last = (last + [(pid, [tool(ids[0])]) for pid, ids in after])[-10:]
    return last


def conversation(turns: list[tuple[str, list[dict]]]) -> list[dict]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _, calls in turns:
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": "found"})
    return messages


def timed(fn, repeat: int) -> str:
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    p95 = sorted(runs)[max(0, int(len(runs) * 0.95) - 1)]
    return f"p50 {statistics.median(runs) * 1e6:9.1f} µs   p95 {p95 * 1e6:9.1f} µs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "runs" / "bench-history")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    shutil.rmtree(args.data, ignore_errors=True)
    runs = args.data / "runs" / "gateway"
    filled = 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        with Ledger(runs) as ledger:
            t0 = time.perf_counter()
            turns = fill(ledger, filled, size - filled)
            print(
                f"\n== {size:,} panels (filled {size - filled:,} in "
                f"{time.perf_counter() - t0:.1f} s)"
            )
            filled = size
        t0 = time.perf_counter()
        Ledger(runs).close()
        print(f"open from the snapshot          {(time.perf_counter() - t0) * 1e3:9.1f} ms")
        t0 = time.perf_counter()
        abandoned_in(runs / "calls.jsonl")
        scan = time.perf_counter() - t0
        (runs / "index.json").unlink()
        t0 = time.perf_counter()
        ledger = Ledger(runs)
        print(
            f"open by replay                  {(time.perf_counter() - t0) * 1e3:9.1f} ms "
            f"(of which the calls.jsonl scan {scan * 1e3:.1f} ms, "
            f"{(runs / 'calls.jsonl').stat().st_size / 1e6:.0f} MB)"
        )
        try:
            messages = conversation(turns)

            def three_seats():
                conv = history.Conversation(messages, ledger)
                for alias in ALIASES:
                    conv.for_seat(alias)

            print(f"history, 10 turns x 3 seats     {timed(three_seats, args.repeat)}")
            print(
                f"sticky_alias                    "
                f"{timed(lambda: history.sticky_alias(messages, ledger), args.repeat)}"
            )
            tid = turns[-1][1][0]["id"]
            print(
                f"tool_call_owner                 "
                f"{timed(lambda: ledger.tool_call_owner(tid), args.repeat)}"
            )
            print(
                f"delivered_panel                 "
                f"{timed(lambda: ledger.delivered_panel('nothing like it'), args.repeat)}"
            )
            print(
                f"pending(limit=50)               "
                f"{timed(lambda: ledger.pending(limit=50), args.repeat)}"
            )
            print(
                f"undelivered(limit=50)           "
                f"{timed(lambda: ledger.undelivered(limit=50), args.repeat)}"
            )
            print(
                f"owed_count                      "
                f"{timed(ledger.owed_count, args.repeat)}   (owed {ledger.owed_count():,})"
            )
        finally:
            ledger.close()
        print(
            f"peak RSS of this process        "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:9.1f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
