"""Benchmark admission: whether a queue of work keeps an endpoint busy up to its limits, and never
past them, with two processes sharing one data folder. It prints figures; it asserts nothing.

    python scripts/bench_admission.py [--quick] [--window S] [--windows N] [--json]

Two worker processes (each with ``--workers`` threads, default 8) call one model on the simulated
upstream through ``Admission`` as fast as they are let in, and log every call's admission time and
end. From those logs:

1. **Calls a minute** (endpoint ``rpm`` 120, ``max_concurrent`` 4, latency 0.25 s, ``--windows``
   windows of ``--window`` seconds, default 2 × 60 s): the most calls admitted in any window
   (every window that starts at an admission), how many windows held more than rpm (should be 0),
   the fewest calls in a whole window while work was queued, as a share of rpm (the cap used),
   and the most calls running at once.
2. **Calls at once** (``max_concurrent`` 4, no rpm, latency 0.2 s, 20 s): the mean number of
   calls running over the run as a share of 4 (a slot freed in one process is found by the other
   by polling, 2 to 50 ms), the most at once, and how long a call waited for its slot.
3. **Cost** of one uncontended ``slot()`` (and ``has_room``) in µs, for an unlimited endpoint (no
   file touched), one with ``max_concurrent``, and one with both limits.

4. **Seats that time out** (``max_concurrent`` 2, one process): gateway-like panels of two
   seats from ``--clients`` threads, back to back, through the seats core, against a model that
   works through its whole time even when the caller has gone (the simulator's ``deaf``), with
   seat timeouts longer than the model's time (the panels queue for slots, so late seats run
   out of time) and shorter than it. The upstream counts the calls it works on itself: its
   peak against the cap, its calls, and the seats answered, timed out and refused at the limit.
   ``--only seats`` runs this step alone.

``--quick`` shortens the window to 10 s (rpm 60 a window, 3 windows) and the second run to 8 s, so
everything ends in about a minute. The window is a parameter of ``Admission`` for this and the
tests; every process on a folder must use the same. Figures vary with the machine and its load.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import platform
import statistics
import subprocess
import tempfile
import threading
import time
from typing import Any

from panelist.metrics.upstream.admission import Admission
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.errors import AtLimit
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

MODEL = "m"
PROCESSES = 2


# -- a worker process ---------------------------------------------------------------------------
def work(data: str, url: str, workers: int, until: float, window: float, out: str) -> None:
    """Call MODEL through admission from ``workers`` threads until ``until`` (epoch seconds);
    write one line per call: admitted, ended, waited."""
    admission = Admission(open_home(data), window=window)
    upstream = Upstream()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    lines, lock = [], threading.Lock()

    def loop() -> None:
        while time.time() < until:
            try:
                with admission.slot("sim", MODEL, wait=until - time.time()) as admitted:
                    upstream.chat(url, None, body, timeout=30)
                    ended = time.time()
            except AtLimit:
                return  # the run is over before a slot came
            with lock:
                lines.append(
                    json.dumps({"at": admitted.at, "end": ended, "waited": admitted.waited})
                )

    threads = [threading.Thread(target=loop) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    Path(out).write_text("\n".join(lines) + "\n")
    upstream.close()
    admission.close()


# -- the runs -------------------------------------------------------------------------------------
def run_processes(
    folder: Path, url: str, workers: int, seconds: float, window: float
) -> list[dict]:
    start = time.time() + 1.0  # both processes up before the first call
    until = start + seconds
    procs, outs = [], []
    for i in range(PROCESSES):
        out = folder / f"calls-{i}.jsonl"
        outs.append(out)
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    str(folder / "data"),
                    url,
                    str(workers),
                    repr(until),
                    repr(window),
                    str(out),
                    repr(start),
                ]
            )
        )
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("a worker process failed")
    calls = []
    for i, out in enumerate(outs):
        for line in out.read_text().splitlines():
            if line.strip():
                calls.append(dict(json.loads(line), process=i))
    return sorted(calls, key=lambda c: c["at"])


def most_at_once(calls: list[dict]) -> int:
    events = sorted(
        [(c["at"], 1) for c in calls] + [(c["end"], -1) for c in calls], key=lambda e: (e[0], e[1])
    )  # an end before a start at the same instant
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def window_counts(times: list[float], window: float) -> list[int]:
    """Calls admitted in the window starting at each admission."""
    counts, j = [], 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] < t + window:
            j += 1
        counts.append(j - i)
    return counts


def rate_run(
    folder: Path, sim: SimUpstream, *, rpm: int, window: float, windows: int, workers: int
) -> dict:
    home = open_home(folder / "data")
    Roster(home).set_limits("endpoint", "sim", {"rpm": rpm, "max_concurrent": 4})
    sim.script(MODEL, latency=0.25)
    calls = run_processes(folder, sim.url, workers, windows * window + 1.0, window)
    times = [c["at"] for c in calls]
    counts = window_counts(times, window)
    # whole windows while work was queued: those that start at an admission and end in the run
    full = [n for t, n in zip(times, counts) if t + window <= times[-1]]
    return {
        "rpm": rpm,
        "window_s": window,
        "max_concurrent": 4,
        "latency_s": 0.25,
        "processes": PROCESSES,
        "workers": workers,
        "calls": len(calls),
        "by_process": [sum(1 for c in calls if c["process"] == i) for i in range(PROCESSES)],
        "max_in_a_window": max(counts),
        "windows_over": sum(1 for n in counts if n > rpm),
        "calls_over": max(0, max(counts) - rpm),
        "min_in_a_full_window": min(full) if full else None,
        "cap_used": round(min(full) / rpm, 3) if full else None,
        "most_at_once": most_at_once(calls),
    }


def concurrency_run(folder: Path, sim: SimUpstream, *, seconds: float, workers: int) -> dict:
    home = open_home(folder / "data")
    Roster(home).set_limits("endpoint", "sim", {"max_concurrent": 4}, clear=True)
    sim.script(MODEL, latency=0.2)
    calls = run_processes(folder, sim.url, workers, seconds, 60.0)
    t0, t1 = calls[0]["at"], max(c["end"] for c in calls)
    busy = sum(c["end"] - c["at"] for c in calls) / (t1 - t0)
    waits = sorted(c["waited"] for c in calls)
    return {
        "max_concurrent": 4,
        "latency_s": 0.2,
        "seconds": round(t1 - t0, 1),
        "processes": PROCESSES,
        "workers": workers,
        "calls": len(calls),
        "by_process": [sum(1 for c in calls if c["process"] == i) for i in range(PROCESSES)],
        "mean_running": round(busy, 2),
        "cap_used": round(busy / 4, 3),
        "most_at_once": most_at_once(calls),
        "wait_p50_s": round(statistics.median(waits), 3),
        "wait_p99_s": round(waits[int(len(waits) * 0.99) - 1], 3),
    }


def cost_run(folder: Path, rounds: int) -> dict:
    home = open_home(folder / "cost")
    roster = Roster(home)
    for name in ("open", "slots", "both"):
        roster.add_endpoint(name, "http://127.0.0.1:9/v1")
        roster.add_model(f"m-{name}", name)
    roster.set_limits("endpoint", "slots", {"max_concurrent": 4})
    roster.set_limits("endpoint", "both", {"max_concurrent": 4, "rpm": 10**6})
    admission = Admission(home)
    out: dict[str, Any] = {}
    try:
        for name in ("open", "slots", "both"):
            model = f"m-{name}"
            times = []
            for _ in range(rounds):
                t = time.perf_counter()
                with admission.slot(name, model, wait=1):
                    pass
                times.append(time.perf_counter() - t)
            room = []
            for _ in range(rounds):
                t = time.perf_counter()
                admission.has_room(name, model)
                room.append(time.perf_counter() - t)
            out[name] = {
                "slot_median_us": round(statistics.median(times) * 1e6, 1),
                "has_room_median_us": round(statistics.median(room) * 1e6, 1),
            }
        untouched = home.root / "runs" / "admission" / "open"
        out["open"]["files"] = (
            sorted(f.name for f in untouched.rglob("*")) if untouched.exists() else []
        )
    finally:
        admission.close()
    return out


def seats_run(
    folder: Path, *, model_time: float, seat_timeout: float, clients: int, seconds: float
) -> dict:
    """Step 4: panels of two seats back to back from ``clients`` threads for ``seconds``."""
    from panelist.metrics.seats import SeatCall, Seats

    with SimUpstream({MODEL: {"latency": model_time, "deaf": True}}) as sim:
        home = open_home(folder / f"seats-{model_time:g}-{seat_timeout:g}")
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model(MODEL, "sim")
        roster.set_limits("endpoint", "sim", {"max_concurrent": 2})
        admission = Admission(home)
        seats = Seats(roster, admission=admission)
        model = roster.view().models[MODEL]
        outcomes: list[str] = []  # each seat's status, or its error's kind
        lock = threading.Lock()
        until = time.monotonic() + seconds

        def client(c: int) -> None:
            n = 0
            while time.monotonic() < until:
                calls = [
                    SeatCall(
                        label=f"{c}.{n}.{k}",
                        role="member",
                        model=model,
                        messages=[{"role": "user", "content": "review this"}],
                        timeout=seat_timeout,
                        wait_in_timeout=True,
                    )
                    for k in range(2)
                ]
                done = seats.start(calls, timeout=seat_timeout, poll=True).wait()
                with lock:
                    outcomes.extend(r.status if r.answered else r.error_kind for r in done)
                n += 1

        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        end = time.monotonic() + model_time + 5  # what the upstream still works on, to its end
        while sim.in_flight and time.monotonic() < end:
            time.sleep(0.05)
        seats.close()
        admission.close()
        return {
            "model_s": model_time,
            "seat_timeout_s": seat_timeout,
            "cap": 2,
            "clients": clients,
            "seconds": seconds,
            "upstream_peak": sim.peak_in_flight,
            "upstream_calls": len(sim.requests),
            "seats": len(outcomes),
            "answered": sum(o in ("ok", "tool_calls") for o in outcomes),
            "timed_out": outcomes.count("timeout"),
            "at_limit": outcomes.count("at_limit"),
        }


def report_seats(runs: list[dict]) -> None:
    print(
        "4. seats that time out: max_concurrent 2, a model that works to its end whoever "
        "waits, panels of two seats back to back"
    )
    for s in runs:
        print(
            f"   model {s['model_s']} s, seat timeout {s['seat_timeout_s']} s, {s['clients']} "
            f"clients, {s['seconds']:g} s: upstream peak {s['upstream_peak']} at once (cap "
            f"{s['cap']}); {s['upstream_calls']} upstream calls for {s['seats']} seats: "
            f"{s['answered']} answered, {s['timed_out']} timed out, {s['at_limit']} refused "
            "at the limit"
        )


def report(r: dict) -> None:
    a, b, c = r["rate"], r["concurrency"], r["cost"]
    print(
        f"python {r['python']} on {r['machine']}; {PROCESSES} processes on one data folder, "
        "simulated upstream\n"
    )
    print(
        f"1. calls a minute: rpm {a['rpm']} per {a['window_s']:g} s window, max_concurrent "
        f"{a['max_concurrent']}, latency {a['latency_s']} s, {a['workers']} workers each"
    )
    print(f"   calls admitted: {a['calls']} (by process: {a['by_process']})")
    print(
        f"   most in any window: {a['max_in_a_window']} of {a['rpm']}; windows over: "
        f"{a['windows_over']}; calls over: {a['calls_over']}"
    )
    if a["cap_used"] is not None:
        print(
            f"   fewest in a whole window with work queued: {a['min_in_a_full_window']} "
            f"({a['cap_used']:.0%} of the cap used)"
        )
    print(f"   most running at once: {a['most_at_once']} (cap {a['max_concurrent']})\n")
    print(
        f"2. calls at once: max_concurrent {b['max_concurrent']}, no rpm, latency "
        f"{b['latency_s']} s, {b['seconds']} s, {b['workers']} workers each"
    )
    print(
        f"   calls: {b['calls']} (by process: {b['by_process']}); mean running "
        f"{b['mean_running']} ({b['cap_used']:.0%} of the cap used); most at once "
        f"{b['most_at_once']}"
    )
    print(f"   wait for a slot: p50 {b['wait_p50_s']} s, p99 {b['wait_p99_s']} s\n")
    print("3. cost of one uncontended slot() / has_room() (median, µs)")
    for name, label in (
        ("open", "no limit"),
        ("slots", "max_concurrent"),
        ("both", "max_concurrent + rpm"),
    ):
        print(
            f"   {label:22} {c[name]['slot_median_us']:8.1f} / {c[name]['has_room_median_us']:.1f}"
        )
    print(f"   files an unlimited endpoint touched: {c['open']['files'] or 'none'}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        data, url, workers, until, window, out, start = argv[1:]
        time.sleep(max(0.0, float(start) - time.time()))
        work(data, url, int(workers), float(until), float(window), out)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a 10 s window: about a minute in all")
    p.add_argument("--window", type=float, help="seconds an rpm counts over (default 60)")
    p.add_argument("--windows", type=int, help="windows the rpm run lasts (default 2)")
    p.add_argument("--workers", type=int, default=8, help="threads per process (default 8)")
    p.add_argument("--rounds", type=int, default=5000, help="calls timed for the cost figures")
    p.add_argument("--clients", type=int, default=8, help="panel threads in step 4 (default 8)")
    p.add_argument("--only", choices=("seats",), help="run step 4 alone")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    seconds = 4.0 if args.quick else 10.0
    if args.only == "seats":
        with tempfile.TemporaryDirectory(prefix="panelist-bench-admission-") as tmp:
            runs = [
                seats_run(
                    Path(tmp), model_time=m, seat_timeout=t, clients=args.clients, seconds=seconds
                )
                for m, t in ((0.6, 1.0), (0.6, 0.3))
            ]
        print(json.dumps({"seats": runs}, indent=2)) if args.json else report_seats(runs)
        return 0
    window = args.window or (10.0 if args.quick else 60.0)
    windows = args.windows or (3 if args.quick else 2)
    rpm = 60 if args.quick else 120
    with (
        tempfile.TemporaryDirectory(prefix="panelist-bench-admission-") as tmp,
        SimUpstream({MODEL: {"latency": 0.25}}) as sim,
    ):
        folder = Path(tmp)
        home = open_home(folder / "data")
        roster = Roster(home)
        roster.add_endpoint("sim", sim.url)
        roster.add_model(MODEL, "sim")
        result: dict[str, Any] = {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "rate": rate_run(
                folder, sim, rpm=rpm, window=window, windows=windows, workers=args.workers
            ),
            "concurrency": concurrency_run(
                folder, sim, seconds=8.0 if args.quick else 20.0, workers=args.workers
            ),
            "cost": cost_run(folder, args.rounds),
            "seats": [
                seats_run(
                    folder, model_time=m, seat_timeout=t, clients=args.clients, seconds=seconds
                )
                for m, t in ((0.6, 1.0), (0.6, 0.3))
            ],
        }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)
        print()
        report_seats(result["seats"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
