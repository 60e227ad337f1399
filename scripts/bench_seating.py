"""Benchmark seating: what ``Panels.seat`` costs per panel. It prints figures; it asserts nothing.

    python scripts/bench_seating.py [--panels N] [--threads T] [--json]

For rosters of 10, 100 and 1,000 models (three members, the rest explorer candidates of distinct
families, 10% of them with verdicts on the shape) it seats ``--panels`` panels in one thread and
prints the time per ``Panels.seat`` (p50, p99, mean): follow the evidence log, pick, reserve the
panel id, log the seating and hold its seats. Then ``--threads`` threads seat at once and it
prints seatings per second. No upstream is asked: each seating's hold is released at once, as a
panel whose seats answer instantly would. Each roster is measured twice: with no catalog, and
with a catalog that states every model's window, price and vision (seating reads the roster with
those filled in); the second also times the first seating after the catalog changed, when the
filled roster is rebuilt. The data folder is a temporary one, deleted at the end.
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
import statistics
import tempfile
import threading
import time

from panelist.metrics.roster.collection import Collections
from panelist.metrics.home import open_home
from panelist.metrics.panel.panel import Panels
from panelist.metrics.roster.roster import Roster

SIZES = (10, 100, 1000)
BODY = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review this diff."}]}


def write_catalog(home, size: int, window: int = 120_000) -> None:
    facts = {
        "context": window,
        "vision": True,
        "price_in": 0.5,
        "price_out": 1.5,
        "currency": "USD",
    }
    stamp = {"source": "endpoint", "at": "2026-11-30T00:00:00Z", "from": "GET /models"}
    doc = {
        "v": 1,
        "endpoints": {
            "sim": {
                f"m{i}": {k: dict(stamp, value=v) for k, v in facts.items()} for i in range(size)
            }
        },
    }
    home.file("catalog.json").write_text(json.dumps(doc))


def build(root: Path, size: int):
    home = open_home(root)
    roster = Roster(home)
    roster.add_endpoint("sim", "http://127.0.0.1:9/v1")
    roster.add_model("m0", "sim", family="m0", context=100_000)
    # one write for the whole roster: adding models one by one rewrites the file each time
    doc = json.loads(roster.path.read_text())
    template = doc["models"]["m0"]
    doc["models"] = {f"m{i}": dict(template, family=f"m{i}", served=f"m{i}") for i in range(size)}
    roster.path.write_text(json.dumps(doc))
    Collections(home).save(roster.view(), "trio", ["m0", "m1", "m2"])
    panels = Panels(home)
    ledger = panels.ledger
    for i in range(3, size, 10):  # verdicts on a tenth of the roster, so suggestions have work
        for j in range(5):
            panel = ledger.new_panel()
            call = f"{panel}.explorer1"
            ledger.record_seat(
                {
                    "call": call,
                    "panel": panel,
                    "alias": f"m{i}",
                    "shape": "general",
                    "status": "ok",
                    "key": "local",
                }
            )
            ledger.record_verdict(call, useful=j % 2 == 0)
    return panels


def seat_once(panels: Panels, req) -> float:
    t0 = time.perf_counter()
    seating = panels.seat(req)
    spent = time.perf_counter() - t0
    hold = getattr(seating, "hold", None)
    if hold is not None:
        hold.release_all()
    return spent


def measure(size: int, n: int, threads: int, catalog: bool) -> dict:
    rebuild = None
    with tempfile.TemporaryDirectory() as tmp:
        panels = build(Path(tmp) / "data", size)
        try:
            req = panels.parse(BODY)
            if catalog:
                write_catalog(panels.home, size)
            for _ in range(20):  # warm the caches and the evidence tail
                seat_once(panels, req)
            if catalog:  # an edit of the catalog: the next seating rebuilds the filled roster
                write_catalog(panels.home, size, window=110_000)
                rebuild = seat_once(panels, req)
            times = sorted(seat_once(panels, req) for _ in range(n))
            start = threading.Barrier(threads + 1)
            per_thread = max(1, n // threads)

            def work():
                start.wait()
                for _ in range(per_thread):
                    seat_once(panels, req)

            workers = [threading.Thread(target=work) for _ in range(threads)]
            for w in workers:
                w.start()
            start.wait()
            t0 = time.perf_counter()
            for w in workers:
                w.join()
            wall = time.perf_counter() - t0
        finally:
            panels.close()
    return {
        "roster": size,
        "catalog": catalog,
        "panels": n,
        "after_catalog_edit_us": round(rebuild * 1e6) if rebuild is not None else None,
        "p50_us": round(times[len(times) // 2] * 1e6),
        "p99_us": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1e6),
        "mean_us": round(statistics.fmean(times) * 1e6),
        "threads": threads,
        "seatings_per_s": round(per_thread * threads / wall),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--panels", type=int, default=2000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = [
        measure(size, args.panels, args.threads, catalog)
        for size in SIZES
        for catalog in (False, True)
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"Panels.seat per panel ({args.panels} panels, then {args.threads} threads at once)")
    print(
        f"{'roster':>7} {'catalog':>8} {'p50 µs':>8} {'p99 µs':>8} {'mean µs':>8} "
        f"{'seatings/s':>11} {'after edit µs':>14}"
    )
    for r in rows:
        edit = r["after_catalog_edit_us"]
        print(
            f"{r['roster']:>7} {'yes' if r['catalog'] else 'no':>8} {r['p50_us']:>8} "
            f"{r['p99_us']:>8} {r['mean_us']:>8} {r['seatings_per_s']:>11} "
            f"{'' if edit is None else edit:>14}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
