"""Time the panels' searches that match nothing at 300,000 panels, with and without their
budget.

    python scripts/bench_search.py [--panels N] [--folder DIR] [--repeat R]

Builds (once, kept in ``--folder``, default ``runs/bench-search`` of this checkout) a search
index of N synthetic panels (default 300,000), folded straight into its tables as the index's
own writer folds log lines: collections ``bench/c00`` .. ``bench/c47`` (seq mod 48), the key
``carol`` on every panel whose seq is a multiple of 3 and ``alice`` / ``bob`` on the other odd /
even ones, and prompts that hold ``harbour`` where the key is ``carol`` and ``zanzibar``
elsewhere. So a text and a filter that each match a third or more of the panels, interleaved,
never match together (``q=harbour&key=alice``): the index either walks every candidate or
stops at its budget.

For each search it prints the median and the worst of R runs (default 3), in seconds, walked
whole (an unbounded budget: what every search cost before the budget) and under the default
budget (``PANELIST_SEARCH_ROWS`` / ``PANELIST_SEARCH_SECONDS``), and whether that answer was
partial. Also the time of ``PRAGMA quick_check`` on the index (run once per file and process,
when it is first opened). Figures, not assertions.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import sqlite3
import statistics
import time

from panelist.metrics.ledger import search, searchplan
from panelist.metrics.ledger.searchfold import Fold

ROOT = Path(__file__).resolve().parent.parent
BATCH = 5_000
T0 = 1_750_000_000.0
SEARCHES = {
    "q=harbour & key=alice (never together)": dict(text="harbour", key="alice"),
    "q=zanzibar & key=carol (never together)": dict(text="zanzibar", key="carol"),
    "q=harbour & collection=bench/c01 (never)": dict(text="harbour", collection="bench/c01"),
    "q=zanzibar & key=carol & collection=bench/c00": dict(
        text="zanzibar", key="carol", collection="bench/c00"
    ),
    "q=zanzibar harbour (never both)": dict(text="zanzibar harbour"),
    "q=harbour & key=carol (every third panel)": dict(text="harbour", key="carol"),
}


def record(seq: int) -> dict:
    pid = f"p00000000-{seq}"
    word = "harbour" if seq % 3 == 0 else "zanzibar"
    key = "carol" if seq % 3 == 0 else "alice" if seq % 2 else "bob"
    return {
        "panel": pid,
        "collection": f"bench/c{seq % 48:02d}",
        "key": key,
        "started": T0 + seq,
        "prompt": f"user: review the cache of the {word} module, part {seq % 97}",
        "seats": [
            {
                "call": f"{pid}.member1",
                "alias": f"sim-{seq % 7}",
                "status": "ok",
                "seconds": 0.5,
                "answer": f"the cache looks right ({seq % 13})",
            }
        ],
    }


def build(folder: Path, panels: int) -> None:
    """An index of ``panels`` synthetic panels in ``folder`` (kept if it holds them)."""
    index = search.SearchIndex(folder)
    try:
        if index.state()["indexed"] == panels:
            return
    finally:
        index.close()
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{folder / 'search.sqlite'}{suffix}").unlink(missing_ok=True)
    t0 = time.perf_counter()
    db = sqlite3.connect(folder / "search.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    search._reset(db)
    for start in range(0, panels, BATCH):
        db.execute("BEGIN")
        Fold(db).panel_records([(s, record(s)) for s in range(start, min(panels, start + BATCH))])
        db.execute("COMMIT")
    db.execute("INSERT INTO panel_text(panel_text) VALUES ('optimize')")
    db.execute("INSERT OR REPLACE INTO meta(name, value) VALUES ('panels', ?)", (panels,))
    db.close()
    print(
        f"built an index of {panels:,} panels in {time.perf_counter() - t0:.1f} s", file=sys.stderr
    )


def timed(index, f, repeat: int) -> tuple[float, float, bool, int]:
    times, found = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        found = index.find(f, limit=50)
        times.append(time.perf_counter() - t0)
    assert found is not None  # main() asks for at least one repeat
    return statistics.median(times), max(times), found.partial, len(found.seqs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--panels", type=int, default=300_000)
    ap.add_argument("--folder", type=Path, default=ROOT / "runs" / "bench-search")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    build(args.folder, args.panels)
    db = sqlite3.connect(args.folder / "search.sqlite")
    t0 = time.perf_counter()
    db.execute("PRAGMA quick_check").fetchall()
    print(f"PRAGMA quick_check at {args.panels:,} panels: {time.perf_counter() - t0:.2f} s")
    db.close()
    whole = search.SearchIndex(args.folder, budget_rows=1 << 62, budget_seconds=1e9)
    bounded = search.SearchIndex(args.folder)
    print(
        f"\n{'search (limit 50)':48} {'whole: p50 / max s':>20} "
        f"{'budget: p50 / max s':>21}  partial  found"
    )
    try:
        for name, spec in SEARCHES.items():
            spec = dict(spec)
            text = search.text_query(spec.pop("text"))
            f = search.Filters(text=text, key=spec.get("key"), collection=spec.get("collection"))
            w50, wmax, _, wn = timed(whole, f, args.repeat)
            b50, bmax, partial, bn = timed(bounded, f, args.repeat)
            print(
                f"{name:48} {w50:>9.3f} / {wmax:<8.3f} {b50:>10.3f} / {bmax:<8.3f} "
                f" {str(partial):7}  {wn} / {bn}",
                flush=True,
            )
    finally:
        whole.close()
        bounded.close()
    print(
        f"\nbudget: {searchplan.ROWS:,} rows or {searchplan.SECONDS:g} s a search "
        "(PANELIST_SEARCH_ROWS, PANELIST_SEARCH_SECONDS); 'whole' walks without one"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
