"""Benchmark ``--workers``: panels/s of one gateway process and of several on one port, in the same
run, against the simulated upstream at 0 ms. It prints figures; it asserts nothing.

    python scripts/bench_workers.py [--workers 1,2] [--concurrency 32] [--duration S]
                                    [--rounds N] [--json]

Every panel is three seats (one collection of three members, ``max_explorers: 0``). Three kinds
of process share this machine's cores: the simulated upstream (``scripts/sim_upstream.py``, one
process), the gateway (``gateway.py --workers N``: a parent and N workers) and this load
generator (``--concurrency`` threads, one keep-alive connection each, spread by the kernel over
the workers; the script says how many landed on each). Rounds alternate the worker counts
(1, 2, 1, 2, …) so that each sees the same machine; each count's figure is the mean of its
rounds.

Per run: panels/s (panels answered 200 with every seat ok, inside the measured window), failed
requests, the CPU each process used while it ran (% of one core), the gateway's CPU time per
panel (parent and workers, from ``/proc/<pid>/stat``) and panels/s per gateway core (panels per
CPU second of the gateway: the figure that carries to a machine with more cores, where the
upstream and the load generator are elsewhere). Then the ratio of each count's panels/s to one
worker's.

The data folder is made under the checkout's ``runs/`` (git-ignored) and deleted at the end
unless ``--keep``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

import argparse
import collections
import gc
import http.client
import json
import os
import platform
import re
import shutil
import tempfile
import threading
import time

from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.scripts.bench_gateway_rig import MEMBERS, outcome_of, request_body
from panelist.scripts.benchkit import (
    Child,
    Client,
    host_header,
    log,
    pct,
    proc_cpu,
    self_cpu,
    url_of,
)

PY = sys.executable
GATEWAY = ROOT / "gateway.py"
SIM = ROOT / "scripts" / "sim_upstream.py"


class Bench:
    def __init__(self, args):
        self.args = args
        ROOT.joinpath("runs").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="bench-workers-", dir=ROOT / "runs"))
        self.data = self.work / "data"
        self.home = open_home(self.data)
        self.body = request_body()
        self.sim: Child | None = None
        self.gateway: Child | None = None

    def setup(self) -> None:
        limits = self.home.file("gateway.json")
        doc = json.loads(limits.read_text())
        doc.update(max_explorers=0)
        limits.write_text(json.dumps(doc, indent=2) + "\n")
        models = self.work / "sim.json"
        models.write_text(json.dumps({m: {"latency": 0.0, "window": 128_000} for m in MEMBERS}))
        self.sim = Child("sim", [PY, str(SIM), "--port", "0", "--models", str(models)], self.work)
        roster = Roster(self.home)
        roster.add_endpoint("sim", self.sim.first_line, by="bench")
        for i, m in enumerate(MEMBERS, 1):
            roster.add_model(m, "sim", family=f"fam{i}", context=128_000, by="bench")
        Collections(self.home).save(
            roster.view(), "trio", list(MEMBERS), description="benchmark trio", by="bench"
        )

    def start(self, workers: int) -> tuple[str, int, list[int]]:
        """Start the gateway with ``workers`` processes; its address and every pid of it."""
        gc.collect()
        self.gateway = Child(
            f"gateway-{workers}",
            [PY, str(GATEWAY), "--data", str(self.data), "--port", "0", "--workers", str(workers)],
            self.work,
        )
        host, port = url_of(self.gateway.first_line)
        found = re.search(r"pids ([\d, ]+)", self.gateway.first_line)
        pids = [int(p) for p in found.group(1).split(", ")] if found else []
        # the parent (with one worker, the gateway itself) and every worker
        return host, port, [self.gateway.pid, *pids]

    def stop(self) -> None:
        gateway = self.gateway
        if gateway is None:
            raise RuntimeError("no gateway is running")
        rc = gateway.stop()
        if rc != 0:
            log(f"gateway exited {rc}; stderr:\n{gateway.stderr_tail()}")
        self.gateway = None

    def close(self) -> None:
        for child in (self.gateway, self.sim):
            if child is not None:
                child.stop()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")

    def run_one(self, workers: int) -> dict:
        host, port, pids = self.start(workers)
        try:
            return self.throughput(host, port, pids, workers)
        finally:
            self.stop()

    def throughput(self, host: str, port: int, pids: list[int], workers: int) -> dict:
        a = self.args
        clients = [Client(host, port, self.body) for _ in range(a.concurrency)]
        if self.sim is None:
            raise RuntimeError("setup() starts the simulated upstream first")
        sim = self.sim
        landed: collections.Counter[int] = collections.Counter()
        for c in clients:  # which worker each kept connection landed on
            c.conn = http.client.HTTPConnection(host, port, timeout=120)
            c.conn.request("GET", "/health", headers={"Host": host_header(host, port)})
            landed[json.loads(c.conn.getresponse().read())["pid"]] += 1
        for c in clients[:4]:  # every worker has answered a panel before the clock starts
            c.panel()
        start = threading.Event()
        window = [0.0, 0.0]
        done: list[list] = [[] for _ in clients]

        def work(client: Client, out: list) -> None:
            start.wait()
            while time.perf_counter() < window[1]:
                status, data, secs = client.panel()
                out.append((time.perf_counter(), secs, outcome_of(status, data)))
            client.close()

        threads = [
            threading.Thread(target=work, args=(c, o), daemon=True) for c, o in zip(clients, done)
        ]
        for t in threads:
            t.start()
        gc.collect()
        window[0] = time.perf_counter() + a.warmup
        window[1] = window[0] + a.duration
        start.set()
        time.sleep(max(0.0, window[0] - time.perf_counter()))
        gw0 = {p: proc_cpu(p) for p in pids}
        sim0, me0 = proc_cpu(sim.pid), self_cpu()
        time.sleep(max(0.0, window[1] - time.perf_counter()))
        gw1 = {p: proc_cpu(p) for p in pids}
        sim1, me1 = proc_cpu(sim.pid), self_cpu()
        for t in threads:
            t.join(timeout=180)
        rows = [r for out in done for r in out]
        measured = [r for r in rows if window[0] <= r[0] <= window[1]]
        ok = [r for r in measured if r[2] == "ok"]
        failures = collections.Counter(r[2] for r in rows if r[2] != "ok")
        gateway_cpu = sum(gw1[p] - gw0[p] for p in pids)
        lat = [r[1] * 1000 for r in ok]
        per_process = {
            ("parent" if workers > 1 and i == 0 else f"worker {i - (workers > 1)}"): round(
                (gw1[p] - gw0[p]) / a.duration * 100, 1
            )
            for i, p in enumerate(pids)
        }
        return {
            "workers": workers,
            "concurrency": a.concurrency,
            "duration_s": a.duration,
            "panels_per_s": round(len(ok) / a.duration, 1),
            "failed": sum(failures.values()),
            "failures": dict(failures),
            "connections_per_worker": sorted(landed.values(), reverse=True),
            "latency_ms": {"p50": round(pct(lat, 50) or 0, 2), "p95": round(pct(lat, 95) or 0, 2)},
            "cpu_pct_of_one_core": {
                "gateway": round(gateway_cpu / a.duration * 100, 1),
                **{f"gateway {k}": v for k, v in per_process.items()},
                "upstream": round((sim1 - sim0) / a.duration * 100, 1),
                "load generator": round((me1 - me0) / a.duration * 100, 1),
            },
            "gateway_cpu_ms_per_panel": round(gateway_cpu * 1000 / max(1, len(ok)), 3),
            "panels_per_s_per_gateway_core": round(len(ok) / gateway_cpu, 1)
            if gateway_cpu
            else None,
        }

    def run(self) -> dict:
        a = self.args
        self.setup()
        runs = []
        for r in range(a.rounds):
            for workers in a.workers:
                log(
                    f"round {r + 1}/{a.rounds}: {workers} worker(s), c={a.concurrency}, "
                    f"{a.duration:g} s"
                )
                runs.append(self.run_one(workers))
        by = collections.defaultdict(list)
        for run in runs:
            by[run["workers"]].append(run)
        mean = lambda xs: round(sum(xs) / len(xs), 3) if xs else None  # noqa: E731
        summary = {}
        for workers, rs in by.items():
            summary[workers] = {
                "panels_per_s": mean([x["panels_per_s"] for x in rs]),
                "gateway_cpu_ms_per_panel": mean([x["gateway_cpu_ms_per_panel"] for x in rs]),
                "panels_per_s_per_gateway_core": mean(
                    [
                        x["panels_per_s_per_gateway_core"]
                        for x in rs
                        if x["panels_per_s_per_gateway_core"] is not None
                    ]
                ),
                "failed": sum(x["failed"] for x in rs),
            }
        base = summary.get(a.workers[0], {}).get("panels_per_s")
        for s in summary.values():
            s["ratio"] = round(s["panels_per_s"] / base, 3) if base else None
        return {
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "runs": runs,
            "summary": summary,
        }


def report(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"machine: {m['cpus']} CPUs, Python {m['python']}, {m['platform']}",
        "every process (upstream, gateway, load generator) shares those CPUs",
        "",
    ]
    for run in result["runs"]:
        cpu = ", ".join(f"{k} {v:g}%" for k, v in run["cpu_pct_of_one_core"].items())
        lines.append(
            f"{run['workers']} worker(s), c={run['concurrency']}: "
            f"{run['panels_per_s']:.1f} panels/s, {run['failed']} failed, "
            f"p50 {run['latency_ms']['p50']:.2f} ms, p95 {run['latency_ms']['p95']:.2f} "
            f"ms; connections per worker {run['connections_per_worker']}"
        )
        lines.append(
            f"    gateway CPU {run['gateway_cpu_ms_per_panel']:.3f} ms/panel, "
            f"{run['panels_per_s_per_gateway_core']} panels/s per gateway core; "
            f"CPU (% of one core): {cpu}"
        )
    lines.append("")
    for workers, s in result["summary"].items():
        lines.append(
            f"{workers} worker(s), mean: {s['panels_per_s']:.1f} panels/s "
            f"({s['ratio']:.2f}x one worker), gateway CPU "
            f"{s['gateway_cpu_ms_per_panel']:.3f} ms/panel, "
            f"{s['panels_per_s_per_gateway_core']:.1f} panels/s per gateway core, "
            f"{s['failed']} failed"
        )
    return "\n".join(lines)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        counts = []
    if not counts or any(c < 1 for c in counts):
        raise argparse.ArgumentTypeError(f"give worker counts such as 1,2, not '{text}'")
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--workers",
        type=_counts,
        default=[1, 2],
        metavar="N,M",
        help="worker counts to compare; the first is the baseline (default 1,2)",
    )
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per measured run")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds before each window")
    ap.add_argument("--rounds", type=int, default=2, help="runs per worker count, alternating")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the data folder under runs/")
    args = ap.parse_args(argv)
    bench = Bench(args)
    try:
        result = bench.run()
    except KeyboardInterrupt:
        return 130
    finally:
        bench.close()
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
