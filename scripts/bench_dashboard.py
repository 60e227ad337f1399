"""Time the dashboard's reads at 10,000 and at 1,000,000 panels.

    python scripts/bench_dashboard.py [--data DIR] [--panels-max N] [--quick] [--repeat R]
                                      [--replay] [--rebuild-index]

Fills a data folder (default ``runs/bench-dashboard`` of this checkout) with a roster of 500
models on one endpoint, 50 collections and panels written by ``scripts/fill_ledger.py`` (three
seats each, a ``"seated"`` line per panel, failures of several kinds, verdicts on about 10% of
panels). At each size (10,000, then topped up to ``--panels-max``, 1,000,000 unless ``--quick``)
a fresh process opens the ledger and times every query the dashboard makes (p50 / p95 over
``--repeat`` calls after one warm-up call), its open time and its RSS; ``--replay`` also times
an open without the snapshot (a full replay). Another fresh process brings the panels' search
index (``runs/gateway/search.sqlite``) up to date, timing the build (from nothing when the
index is missing, or with ``--rebuild-index``; otherwise the catch-up since the last run), its
size and RSS, then times the searches and filters a Panels page and a model page make. When
``serve.py`` offers
``make_dashboard(data_dir, host, port)``, another fresh process times the ``/api/`` routes over
HTTP on a kept-alive connection; otherwise those rows say they were skipped.

``--owed`` times only the queue of owed verdicts instead: in a fresh temporary folder per size
(1,000 and 100,000 seats, the recent map's bound), each seat its own panel, the oldest 90%
judged, it prints the p50 / p95 of ``GET /api/owed`` (the 50 oldest owed) over HTTP.

The folder is kept and topped up on the next run (delete it to start over). Figures, not
assertions: targets belong to the closing note of the work, not to this script.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import resource
import statistics
import subprocess
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import http.client

ROOT = Path(__file__).resolve().parent.parent
MODELS, COLLECTIONS = 500, 50
SMALL = 10_000
VERDICT_SHARE = 0.10
ROUTES = (
    "/api/models",
    "/api/panels",
    "/api/evidence",
    "/api/collections",
    "/api/info",
    "/api/usage?window=day",
    "/api/usage?window=week",
    # the time axis: the whole gateway, one model, the one endpoint of all 500 models (the
    # widest sum), a gateway key, and that endpoint's page
    "/api/series?all=1&window=day",
    "/api/series?model=sim-007&window=week",
    "/api/series?endpoint=sim&window=day",
    "/api/series?endpoint=sim&window=week",
    "/api/series?key=alice&window=hour",
    "/api/endpoints/sim/health",
)
# filtered lists and a model page (fill_ledger's prompts draw on a few dozen words, so "cache" is
# in every panel, the phrase in a few, and "zebra" in none)
SEARCH_ROUTES = (
    "/api/panels?q=cache",
    "/api/panels?q=%22cache+is+cold%22",
    "/api/panels?q=zebra",
    "/api/panels?q=cache&collection=bench%2Fc07",
    "/api/panels?q=stale+value&model=sim-007",
    "/api/panels?model=sim-007",
    "/api/panels?status=failed&since=24h",
    "/api/panels?key=alice&status=owed",
    "/api/models/sim-007",
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- filling


def prepare_roster(data: Path) -> None:
    """500 models and 50 collections (those fill_ledger's panels name), once per folder."""
    from panelist.metrics.roster.collection import Collections
    from panelist.metrics.home import open_home
    from panelist.metrics.roster.roster import Roster
    from panelist.scripts.fill_ledger import Busy

    home = open_home(data)
    roster = Roster(home)
    view = roster.view()
    busy = Busy(MODELS, COLLECTIONS)
    if len(view.models) >= MODELS and len(Collections(home).all()) >= COLLECTIONS:
        return
    log(f"writing a roster of {MODELS} models and {COLLECTIONS} collections ...")
    if "sim" not in view.endpoints:
        # nothing is asked in this benchmark: the address only has to be well formed
        roster.add_endpoint("sim", "http://127.0.0.1:9/v1", by="bench")
    for i, alias in enumerate(busy.aliases):
        if alias not in view.models:
            roster.add_model(
                alias,
                "sim",
                family=f"family-{i % 60}",
                grade=("a", "b", "c")[i % 3],
                context=32_000 * (1 + i % 4),
                by="bench",
            )
    view = roster.view()
    collections = Collections(home)
    for name, members, shape in busy.collections:
        collections.save(
            view,
            name,
            members,
            description=f"benchmark collection {name}",
            tags=["bench"],
            shape=shape,
            by="bench",
        )


def panels_in(data: Path) -> int:
    idx = data / "runs" / "gateway" / "panels.idx"
    return idx.stat().st_size // 8 if idx.exists() else 0


def top_up(data: Path, total: int) -> dict | None:
    have = panels_in(data)
    if have >= total:
        return None
    add = total - have
    log(f"filling {add:,} panels (fill_ledger.py) ...")
    t0 = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "fill_ledger.py"),
            str(data),
            "--panels",
            str(add),
            "--verdicts",
            str(int(add * VERDICT_SHARE)),
            "--models",
            str(MODELS),
            "--collections",
            str(COLLECTIONS),
            "--seed",
            str(have + 1),
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"fill_ledger failed: {out.stderr[-2000:]}")
    report = json.loads(out.stdout)
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    log(f"  {json.dumps(report)}")
    return report


# --------------------------------------------------------------------------- measuring


def rss_mb() -> float:
    """This process's resident set now, in MB (from /proc; the peak where /proc is absent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def timed(fn, repeat: int) -> dict:
    fn()  # warm-up: the first call also follows whatever the tail holds
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(times[min(len(times) - 1, int(len(times) * 0.95))], 3),
    }


def measure(data: Path, repeat: int, replay: bool) -> dict:
    """Run in a fresh process: open the ledger and time each query the dashboard makes."""
    from panelist.metrics.home import open_home
    from panelist.metrics.ledger.ids import panel_seq
    from panelist.metrics.ledger.ledger import Ledger

    runs = open_home(data).gateway_runs
    out: dict = {"panels": panels_in(data), "rss_before_mb": rss_mb()}
    if replay:
        (runs / "index.json").unlink(missing_ok=True)  # the replay writes a new one
        t0 = time.perf_counter()
        rebuilt = Ledger(runs)
        out["replay_open_s"] = round(time.perf_counter() - t0, 2)
        out["replayed_records"] = rebuilt.replayed
        rebuilt.close()
    t0 = time.perf_counter()
    ledger = Ledger(runs)
    out["open_s"] = round(time.perf_counter() - t0, 3)
    out["from_snapshot"] = ledger.from_snapshot
    out["rss_open_mb"] = rss_mb()

    latest = ledger.latest_panel()
    top = panel_seq(latest)
    if top is None:
        raise RuntimeError(f"the ledger's latest panel is {latest!r}, not a panel id")
    middle = top // 2
    judged = next(
        (
            s["call"]
            for p in ledger.panels_page(None, 200)[0]
            for s in p["seats"]
            if s["verdict"] is not None
        ),
        None,
    )
    some_call = ledger.panels_page(None, 1)[0][0]["seats"][0]["call"]
    queries = {
        "model_stats()": lambda: ledger.model_stats(),
        "model_stats('general')": lambda: ledger.model_stats("general"),
        "shapes()": ledger.shapes,
        "collection_stats()": ledger.collection_stats,
        "buckets(30)": lambda: ledger.buckets(30),
        "usage('hour')": lambda: ledger.usage("hour"),
        "usage('day')": lambda: ledger.usage("day"),
        "usage('week')": lambda: ledger.usage("week"),
        "failing(3, 5)": lambda: ledger.failing(3, 5),
        "probes()": ledger.probes,
        "panels_page(None, 50)": lambda: ledger.panels_page(None, 50),
        "panels_page(middle, 50)": lambda: ledger.panels_page(middle, 50),
        "panels_page(None, 200)": lambda: ledger.panels_page(None, 200),
        "panels_after(top-50, 50)": lambda: ledger.panels_after(top - 50, 50),
        "panels_after(top, 50)": lambda: ledger.panels_after(top, 50),
        "latest_panel()": ledger.latest_panel,
        "owed_count()": ledger.owed_count,
        "owed_count('alice')": lambda: ledger.owed_count("alice"),
        "verdict_of(judged)": lambda: ledger.verdict_of(judged or some_call),
        "verdict_of(unjudged)": lambda: ledger.verdict_of(some_call + "x"),
    }
    out["queries"] = {name: timed(fn, repeat) for name, fn in queries.items()}
    out["sizes"] = {
        "models": len(ledger.model_stats()),
        "shapes": len(ledger.shapes()),
        "collections": len(ledger.collection_stats()),
        "owed": ledger.owed_count(),
    }
    out["rss_after_mb"] = rss_mb()
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    ledger.close()
    return out


# --------------------------------------------------------------------------- the search index


def measure_search(data: Path, repeat: int, rebuild: bool) -> dict:
    """Run in a fresh process: build (or catch up) the search index, then time its queries."""
    from panelist.metrics.home import open_home
    from panelist.metrics.ledger.search import Filters, SearchIndex, text_query

    runs = open_home(data).gateway_runs
    existed = (runs / "search.sqlite").exists() and not rebuild
    if not existed:
        for name in ("search.sqlite", "search.sqlite-wal", "search.sqlite-shm"):
            (runs / name).unlink(missing_ok=True)
    index = SearchIndex(runs, inline_bytes=0)  # every backlog in the background, as at start
    held = index.state()["indexed"]  # 0 for no index, or one of another layout
    t0 = time.perf_counter()
    index.catch_up()
    while index.building:
        time.sleep(0.05)
    out: dict[str, Any] = {
        "built_from": f"an earlier run's index of {held:,} panels" if held else "nothing",
        "build_s": round(time.perf_counter() - t0, 1),
        "state": index.state(),
        "size_mb": round(
            sum(
                (runs / n).stat().st_size
                for n in ("search.sqlite", "search.sqlite-wal")
                if (runs / n).exists()
            )
            / 1e6,
            1,
        ),
        "build_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    now = time.time()
    filters = {
        "q=cache (every panel)": Filters(text=text_query("cache")),
        'q="cache is cold" (a phrase)': Filters(text=text_query('"cache is cold"')),
        "q=zebra (no panel)": Filters(text=text_query("zebra")),
        "q=cache + collection": Filters(text=text_query("cache"), collection="bench/c07"),
        "q=stale value + model": Filters(text=text_query("stale value"), model="sim-007"),
        "model": Filters(model="sim-007"),
        "model + failed": Filters(model="sim-007", status="failed"),
        "status=owed + key": Filters(status="owed", key="alice"),
        "since 24h + failed": Filters(since=now - 86400, status="failed"),
        "until 3 days ago": Filters(until=now - 3 * 86400),
        "every filter": Filters(
            text=text_query("cache"),
            collection="bench/c07",
            key="alice",
            status="owed",
            since=now - 30 * 86400,
        ),
    }
    out["queries"] = {
        name: timed(lambda f=f: index.find(f, limit=50), repeat) for name, f in filters.items()
    }
    out["queries"]["catch_up() (nothing new)"] = timed(index.catch_up, repeat)
    index.close()
    return out


# --------------------------------------------------------------------------- the /api/ routes


def connect(url: str) -> "http.client.HTTPConnection":
    """A connection to the dashboard that printed ``url``."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.hostname is None:
        raise ValueError(f"no host in the dashboard's URL {url!r}")
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)


def time_http_routes(data: Path, repeat: int) -> dict:
    """Time ``GET`` of each dashboard route over HTTP, in a fresh process, once ``serve.py``
    exposes ``make_dashboard(data_dir, host, port)``; until then, say they were skipped.

    The server is built on port 0, served on a thread, asked over one kept-alive connection,
    and closed. Returns ``{"skipped": reason}`` or ``{"routes": {path: timings}, "rss_mb"}``."""
    try:
        from panelist import serve
    except Exception as exc:  # an unfinished serve.py must not stop the ledger figures
        return {"skipped": f"serve.py does not import ({type(exc).__name__}: {exc})"}
    make_dashboard = getattr(serve, "make_dashboard", None)
    if make_dashboard is None:
        return {"skipped": "serve.py has no make_dashboard(data_dir, host, port) yet"}
    import threading

    t0 = time.perf_counter()
    server = make_dashboard(data, "127.0.0.1", 0)
    built_s = time.perf_counter() - t0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = getattr(server, "url", None) or "http://%s:%d" % server.server_address[:2]
        conn = connect(url)

        def get(path: str) -> dict:
            conn.request("GET", path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: {resp.status} {body[:300]!r}")
            return json.loads(body)

        paths = list(ROUTES) + list(SEARCH_ROUTES)
        first = get("/api/panels")
        if first.get("next"):  # a page deep in the log as well as the newest
            paths.append(f"/api/panels?before={first['next']}")
        if first.get("latest"):
            paths.append(f"/api/panels?after={first['latest']}")
        routes = {path: timed(lambda p=path: get(p), repeat) for path in paths}
        conn.close()
    finally:
        server.close()
    return {"routes": routes, "build_s": round(built_s, 3), "rss_mb": rss_mb()}


OWED_SIZES = (1_000, 100_000)
OWED_JUDGED = 0.9


def time_owed_queue(seats: int, repeat: int) -> dict:
    """Fill a temporary folder with ``seats`` one-seat panels, judge the oldest 90%, and time
    ``GET /api/owed`` over HTTP: the figure should not grow with the judged seats before the
    first owed one."""
    import tempfile
    import threading

    from panelist.metrics.ledger.ledger import Ledger
    from panelist.serve import make_dashboard

    with tempfile.TemporaryDirectory(prefix="bench-owed-") as tmp:
        data = Path(tmp)
        calls = []
        t0 = time.perf_counter()
        with Ledger(data / "runs" / "gateway") as ledger:
            start = time.time() - seats
            for first in range(0, seats, 5000):
                recs, seatings = [], []
                for i in range(first, min(seats, first + 5000)):
                    pid = ledger.new_panel(start + i)
                    seatings.append(
                        {
                            "panel": pid,
                            "shape": "general",
                            "aliases": ["sim-a"],
                            "seated": start + i,
                        }
                    )
                    calls.append(f"{pid}.member1")
                    recs.append(
                        {
                            "call": calls[-1],
                            "panel": pid,
                            "alias": "sim-a",
                            "seat": "member",
                            "shape": "general",
                            "seated": start + i,
                            "status": "ok",
                            "seconds": 1.0,
                            "tokens": {},
                            "error": "",
                            "key": "alice",
                        }
                    )
                ledger.record_seats(recs, seatings=seatings)
            for call in calls[: int(seats * OWED_JUDGED)]:
                ledger.record_verdict(call, useful=True, by="bench")
        fill_s = time.perf_counter() - t0
        server = make_dashboard(data, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            conn = connect(server.url)

            def get() -> dict:
                conn.request("GET", "/api/owed?limit=50", headers={"Accept": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"GET /api/owed: {resp.status} {body[:300]!r}")
                return json.loads(body)

            first = get()["data"][0]["call"]
            if first != calls[int(seats * OWED_JUDGED)]:
                raise RuntimeError(f"/api/owed led with {first}, not the oldest owed call")
            figures = timed(get, repeat)
            conn.close()
        finally:
            server.close()
            thread.join(timeout=10)
    return dict(figures, seats=seats, judged=int(seats * OWED_JUDGED), fill_s=round(fill_s, 1))


# --------------------------------------------------------------------------- report


def child(mode: str, data: Path, repeat: int, replay: bool, rebuild: bool = False) -> dict:
    args = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--data",
        str(data),
        "--repeat",
        str(repeat),
        f"--{mode}",
    ]
    if replay:
        args.append("--replay")
    if rebuild:
        args.append("--rebuild-index")
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout)


def search_table(searches: dict[int, dict]) -> list[str]:
    sizes = sorted(searches)
    rows = ["", "Search index (p50 / p95 ms):"]
    for n in sizes:
        r = searches[n]
        rows.append(
            f"  {n:>9,}  built from {r['built_from']} in {r['build_s']} s; "
            f"{r['size_mb']} MB; peak RSS {r['build_peak_rss_mb']} MB; "
            f"{r['state']['indexed']:,} panels indexed"
        )
        for name, t in r["queries"].items():
            rows.append(f"  {n:>9,}  {name:40} {t['p50_ms']:>9.3f} {t['p95_ms']:>9.3f}")
    return rows


def table(results: dict[int, dict], https: dict[int, dict]) -> str:
    sizes = sorted(results)
    head = f"{'':32}" + "".join(f"{f'{n:,} panels':>24}" for n in sizes)
    sub = f"{'(ms)':32}" + "".join(f"{'p50':>12}{'p95':>12}" for _ in sizes)
    rows = [head, sub]
    for name in results[sizes[0]]["queries"]:
        rows.append(
            f"{name:32}"
            + "".join(
                f"{results[n]['queries'][name]['p50_ms']:>12.3f}"
                f"{results[n]['queries'][name]['p95_ms']:>12.3f}"
                for n in sizes
            )
        )
    for label, key, unit in (
        ("open (from snapshot)", "open_s", "s"),
        ("open (full replay)", "replay_open_s", "s"),
        ("RSS after open", "rss_open_mb", "MB"),
        ("RSS after the queries", "rss_after_mb", "MB"),
        ("peak RSS", "peak_rss_mb", "MB"),
    ):
        if all(key in results[n] for n in sizes):
            rows.append(
                f"{label:32}" + "".join(f"{f'{results[n][key]} {unit}':>24}" for n in sizes)
            )
    rows.append("")
    rows.append("HTTP /api/ routes (p50 / p95 ms):")
    for n in sizes:
        h = https.get(n, {})
        if "skipped" in h:
            rows.append(f"  {n:,} panels: skipped: {h['skipped']}")
            continue
        for path, t in h.get("routes", {}).items():
            rows.append(f"  {n:>9,}  {path:40} {t['p50_ms']:>9.3f} {t['p95_ms']:>9.3f}")
        if "rss_mb" in h:
            rows.append(f"  {n:>9,}  server RSS {h['rss_mb']} MB")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "runs" / "bench-dashboard")
    ap.add_argument("--panels-max", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="stop at 10,000 panels")
    ap.add_argument("--repeat", type=int, default=200, help="timed calls per query")
    ap.add_argument("--replay", action="store_true", help="also time an open without snapshot")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--http", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--search", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--rebuild-index",
        action="store_true",
        help="build the search index from nothing, even where one exists",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument(
        "--owed",
        action="store_true",
        help="time only GET /api/owed, with the oldest 90%% of seats judged",
    )
    args = ap.parse_args(argv)
    if args.owed:
        print("GET /api/owed?limit=50 over HTTP, the oldest 90% of seats judged (ms):")
        print(f"  {'seats':>9}  {'judged':>9}  {'p50':>9}  {'p95':>9}")
        for n in OWED_SIZES:
            log(f"filling {n:,} seats and judging the oldest {OWED_JUDGED:.0%} ...")
            t = time_owed_queue(n, args.repeat)
            print(
                f"  {n:>9,}  {t['judged']:>9,}  {t['p50_ms']:>9.3f}  {t['p95_ms']:>9.3f}",
                flush=True,
            )
        return 0
    if args.measure:
        print(json.dumps(measure(args.data, args.repeat, args.replay)))
        return 0
    if args.http:
        print(json.dumps(time_http_routes(args.data, args.repeat)))
        return 0
    if args.search:
        print(json.dumps(measure_search(args.data, args.repeat, args.rebuild_index)))
        return 0
    if args.repeat < 1 or args.panels_max < SMALL:
        print(
            f"bench_dashboard: --repeat must be 1 or more and --panels-max at least {SMALL}",
            file=sys.stderr,
        )
        return 2

    prepare_roster(args.data)
    sizes = [SMALL] if args.quick else [SMALL, args.panels_max]
    results, https, fills, searches = {}, {}, {}, {}
    for size in sizes:
        if panels_in(args.data) > size:
            log(
                f"{args.data} already holds {panels_in(args.data):,} panels, more than {size:,}; "
                "delete it to measure the smaller size"
            )
            continue
        fills[size] = top_up(args.data, size)
        log(f"measuring the ledger at {panels_in(args.data):,} panels ...")
        results[size] = child("measure", args.data, args.repeat, args.replay)
        log(f"building the search index at {panels_in(args.data):,} panels ...")
        searches[size] = child("search", args.data, args.repeat, False, args.rebuild_index)
        https[size] = child("http", args.data, args.repeat, False)
    if not results:
        return 1
    if args.json:
        print(json.dumps({"fills": fills, "ledger": results, "search": searches, "http": https}))
    else:
        print(table(results, https))
        print("\n".join(search_table(searches)))
        for size, r in results.items():
            print(
                f"\n{size:,} panels: {json.dumps(r['sizes'])}; opened from snapshot: "
                f"{r['from_snapshot']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
