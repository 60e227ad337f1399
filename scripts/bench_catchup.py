"""Time how soon, after a restart with no search index, the newest failure of a model shows,
when the backlog is read newest first (as the index does) and when it is read oldest first.

    python scripts/bench_catchup.py [--panels N] [--folder DIR]

Writes (once, kept in ``--folder``, default ``runs/bench-catchup`` of this checkout) a
calls.jsonl of N synthetic panels (default 100,000) and the panels.idx that points at them:
two seats each, ``sim-a`` failing in every 50th panel and in the newest one. Then, for each
order, it deletes the index, starts a build as a server's first filtered request would, and
prints the seconds until the model's newest failed seat is the newest one listed (what a model
page shows first), until the whole log is indexed, and the panels the index said it was behind
when the newest failure first showed. Figures, not assertions; run it on a quiet machine.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import time
from array import array

from panelist.metrics.ledger import search

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_750_000_000.0
LOOK = 0.01  # seconds between two looks at the index


def record(seq: int, newest: int) -> dict:
    pid = f"p20250615-{seq}"
    failed = seq % 50 == 0 or seq == newest
    return {
        "v": 1,
        "panel": pid,
        "collection": "bench/pair",
        "key": "alice",
        "started": T0 + seq,
        "prompt": f"user: review change {seq} of the parser",
        "seats": [
            {
                "call": f"{pid}.member1",
                "alias": "sim-a",
                "status": "error" if failed else "ok",
                "seconds": 0.4,
                "answer": "" if failed else f"looks right ({seq % 13})",
                "error": "server_error: boom" if failed else "",
            },
            {
                "call": f"{pid}.member2",
                "alias": "sim-b",
                "status": "ok",
                "seconds": 0.6,
                "answer": "the cache is fine",
            },
        ],
    }


def build(folder: Path, panels: int) -> None:
    calls, idx = folder / "calls.jsonl", folder / "panels.idx"
    if idx.exists() and idx.stat().st_size == panels * 8:
        return
    folder.mkdir(parents=True, exist_ok=True)
    slots = array("Q")
    with open(calls, "wb") as f:
        for seq in range(panels):
            slots.append(f.tell() + 1)
            f.write(json.dumps(record(seq, panels - 1), separators=(",", ":")).encode() + b"\n")
    if sys.byteorder != "little":
        slots.byteswap()
    idx.write_bytes(slots.tobytes())


def run(folder: Path, newest: str, tail_bytes: int) -> tuple[float, float, int | None]:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{folder / 'search.sqlite'}{suffix}").unlink(missing_ok=True)
    index = search.SearchIndex(folder, tail_bytes=tail_bytes)
    try:
        t0 = time.perf_counter()
        index.catch_up()
        shown, behind = None, None
        while True:
            if shown is None:
                seats = index.model_seats("sim-a", failed=True, limit=1)
                if seats and seats[0]["panel"] == newest:
                    shown = time.perf_counter() - t0
                    behind = index.state()["behind_panels"]
            if index.state()["complete"] and not index.building:
                break
            time.sleep(LOOK)
        whole = time.perf_counter() - t0
        return (shown if shown is not None else whole), whole, behind
    finally:
        index.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--panels", type=int, default=100_000)
    ap.add_argument("--folder", type=Path, default=ROOT / "runs" / "bench-catchup")
    args = ap.parse_args(argv)
    if args.panels < 2:
        ap.error("--panels must be at least 2")
    build(args.folder, args.panels)
    size = (args.folder / "calls.jsonl").stat().st_size
    newest = f"p20250615-{args.panels - 1}"
    print(
        f"{args.panels:,} panels, calls.jsonl {size / 1e6:.1f} MB; seconds from the first request"
    )
    print(f"{'order':14} {'newest failure shown':>21} {'whole log':>10} {'behind then':>12}")
    for name, tail in (("newest first", search.TAIL_BYTES), ("oldest first", size + 1)):
        shown, whole, behind = run(args.folder, newest, tail)
        said = "-" if behind is None else f"{behind:,}"
        print(f"{name:14} {shown:>21.2f} {whole:>10.2f} {said:>12}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
