"""Benchmark the checks every gateway request pays: key lookup, the rate check, the whole guard.
It prints figures; it asserts nothing.

    python scripts/bench_keys.py [--rounds N] [--json]

Figures, each the median and 99th percentile of ``--rounds`` calls (default 20,000) in µs:

1. ``Keys.find`` for a valid key, an unknown key of the right shape, and a malformed string
   (``find`` hashes whatever it is given; the guard refuses a malformed key before any lookup);
2. ``RateCounter.admit`` for one key far under its limit (one flock, pread and pwrite);
3. the guard's whole pass for a keyed POST (host and origin, caller, body headers) with a valid,
   an unknown and a malformed key, as ``gateway.py`` runs it before reading a body.

The data folder is a temporary one, deleted at the end. Figures vary with the machine and its
load, which is why they live here and not in the tests.
"""

import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import _bootstrap  # noqa

import argparse
import json
import os
import platform
import statistics
import tempfile
import time

from panelist.metrics.errors import PanelistError
from panelist.metrics.server.guard import Guard, Settings
from panelist.metrics.home import open_home
from panelist.metrics.server.keys import Keys
from panelist.metrics.server.ratelimit import RateCounter

PORT = 8123


def timed(call, rounds: int) -> dict:
    """Median and p99 of ``call()`` in microseconds; a refusal (PanelistError) counts as done."""
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        try:
            call()
        except PanelistError:
            pass
        times.append(time.perf_counter() - t)
    times.sort()
    return {
        "median_us": round(statistics.median(times) * 1e6, 2),
        "p99_us": round(times[int(len(times) * 0.99) - 1] * 1e6, 2),
    }


def measure(rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="panelist-bench-keys-") as folder:
        home = open_home(Path(folder) / "data")
        keys = Keys(home)
        secret, _ = keys.create("bench", rpm=10**6)
        unknown = secret[:-1] + ("A" if secret[-1] != "A" else "B")
        malformed = "sk-not-a-panelist-key"
        figures = {
            "find valid": timed(lambda: keys.find(secret), rounds),
            "find unknown": timed(lambda: keys.find(unknown), rounds),
            "find malformed": timed(lambda: keys.find(malformed), rounds),
        }
        rates = RateCounter(Path(folder) / "rate")
        try:
            figures["rate admit"] = timed(lambda: rates.admit("bench", 10**6), rounds)
        finally:
            rates.close()
        guard = Guard.for_server(
            Settings(require_keys=True), home, port=PORT, bound="127.0.0.1", max_body=20 * 2**20
        )
        try:
            for label, key in (("valid", secret), ("unknown", unknown), ("malformed", malformed)):
                headers = {
                    "Host": f"127.0.0.1:{PORT}",
                    "Authorization": f"Bearer {key}",
                    "Content-Type": "application/json",
                    "Content-Length": "100",
                }

                def check(headers=headers):
                    guard.screen("POST", "/v1/chat/completions", headers)
                    guard.identify("/v1/chat/completions", headers)
                    guard.check_body("POST", headers)

                figures[f"guard {label}"] = timed(check, rounds)
        finally:
            guard.close()
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_keys", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20_000, help="calls per figure (20000)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.rounds < 100:
        parser.error("--rounds must be at least 100, for a p99 to mean anything")
    figures = measure(args.rounds)
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps({"machine": machine, "rounds": args.rounds, "figures": figures}))
        return 0
    print(
        f"python {machine['python']}, {machine['cpus']} CPUs, load {machine['load']}, "
        f"{args.rounds} calls each"
    )
    for name, f in figures.items():
        print(f"  {name:<16} median {f['median_us']:8.2f} µs   p99 {f['p99_us']:8.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
