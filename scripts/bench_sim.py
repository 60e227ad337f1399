"""Benchmark the simulated upstream the tests and the demo stand on. It prints figures; it
asserts nothing.

    python scripts/bench_sim.py [--requests N] [--json]

Figures, with the simulator in this process (as the tests run it) and http.client callers:

1. requests/s over one keep-alive connection, one request after another (``--requests``, 2000);
2. requests/s from 8 threads, each on its own keep-alive connection (the same total);
3. how late a 50 ms ``latency`` answers: median and max of the client-observed time minus 50 ms,
   over 40 sequential requests (the simulator never answers early; how late is the machine's).

Figures vary with the machine and its load, which is why they live here and not in the tests.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import http.client
import json
import os
import platform
import statistics
import threading
import time
from typing import Any

from panelist.metrics.upstream.sim import SimUpstream

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Review this diff."}]})
HEADERS = {"Content-Type": "application/json"}


def ask(conn: http.client.HTTPConnection) -> None:
    conn.request("POST", "/v1/chat/completions", BODY, HEADERS)
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"the simulator answered {response.status}")


def sequential(sim: SimUpstream, n: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=60)
    try:
        t = time.perf_counter()
        for _ in range(n):
            ask(conn)
        return n / (time.perf_counter() - t)
    finally:
        conn.close()


def concurrent(sim: SimUpstream, n: int, threads: int = 8) -> float:
    each = max(1, n // threads)
    failures: list[BaseException] = []

    def work():
        conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=60)
        try:
            for _ in range(each):
                ask(conn)
        except BaseException as exc:  # reported below, not lost with the thread
            failures.append(exc)
        finally:
            conn.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    t = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t
    if failures:
        raise RuntimeError(f"{len(failures)} client threads failed: {failures[0]!r}")
    return each * threads / elapsed


def lateness(sim: SimUpstream, latency: float = 0.05, n: int = 40) -> dict:
    sim.script("m", latency=latency)
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=60)
    late = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            ask(conn)
            late.append(time.perf_counter() - t - latency)
    finally:
        conn.close()
        sim.script("m")
    return {
        "median_ms": round(statistics.median(late) * 1e3, 2),
        "max_ms": round(max(late) * 1e3, 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_sim", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per figure (2000)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.requests < 8:
        parser.error("--requests must be at least 8")
    with SimUpstream({"m": {}}) as sim:
        figures: dict[str, Any] = {
            "sequential_rps": round(sequential(sim, args.requests)),
            "concurrent_8_rps": round(concurrent(sim, args.requests)),
            "latency_50ms_late": lateness(sim),
        }
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps({"machine": machine, "requests": args.requests, "figures": figures}))
        return 0
    print(f"python {machine['python']}, {machine['cpus']} CPUs, load {machine['load']}")
    print(f"  one keep-alive connection     {figures['sequential_rps']:>7} requests/s")
    print(f"  8 threads, 8 connections      {figures['concurrent_8_rps']:>7} requests/s")
    late = figures["latency_50ms_late"]
    print(f"  a 50 ms latency answers late  median {late['median_ms']} ms, max {late['max_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
