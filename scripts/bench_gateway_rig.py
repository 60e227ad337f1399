"""What ``bench_gateway.py`` measures the gateway on: the workload every panel asks (a
collection of three members, ``trio``, and the same one with a merger that is not a member, asked
one ~600-character code review), and the ``Rig``: a data folder under the checkout's ``runs/``,
one simulated upstream process per latency profile (``PROFILES``), and the gateway process,
started, pointed at a profile, and stopped.

Invariants: every member seat of a profile answers after that profile's latency, the merger
at once; a started gateway has answered one panel before any figure is taken; ``close`` stops
every process the rig started and deletes its data folder unless ``--keep``.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.scripts.bench_gateway_report import MERGER
from panelist.scripts.benchkit import Child, Client, log, proc_mem, url_of

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GATEWAY = ROOT / "gateway.py"
SIM = ROOT / "scripts" / "sim_upstream.py"  # the thin entry point of metrics/upstream/sim.py

MEMBERS = ("m1", "m2", "m3")
COLLECTION = "trio"
MERGED = "trio-merged"  # the same three members with MERGER as the collection's merger
# seat latencies (seconds) per member, one simulated upstream process per profile
PROFILES = {
    "spread": (0.05, 0.1, 0.2),
    "zero": (0.0, 0.0, 0.0),
    "fifty": (0.05, 0.05, 0.05),
    "stream": (0.05, 0.5, 2.0),
    "pick": (0.0, 0.25, 0.5),
}

SYSTEM = "You are a careful code reviewer. Report real bugs only, each with the line it is on."
PROMPT = (
    "Review this change to the cache layer. The writer now takes the shard lock before the index "
    "lock, and the reader retries once when it sees a stale generation.\n\n"
    "--- a/cache.py\n+++ b/cache.py\n@@ -41,9 +41,12 @@ def put(self, key, value):\n"
    "-        with self._index_lock, self._shard_lock(key):\n"
    "+        with self._shard_lock(key), self._index_lock:\n"
    "             gen = self._gen + 1\n"
    "             self._data[key] = (gen, value)\n"
    "+            self._gen = gen\n"
    "@@ -77,6 +80,9 @@ def get(self, key):\n"
    "         gen, value = self._data.get(key, (None, None))\n"
    "+        if gen is not None and gen < self._gen - 1:\n"
    "+            return self.get(key)  # one retry\n"
    "         return value\n\n"
    "Is the lock order safe against evict()? Can get() recurse forever?"
)


def request_body(collection: str = COLLECTION, **extra) -> bytes:
    return json.dumps(
        {
            "model": f"bench/{collection}",
            "temperature": 0.2,
            "max_tokens": 800,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": PROMPT},
            ],
            **extra,
        }
    ).encode()


def request_body_for_model(model: str) -> bytes:
    """The same request for one upstream model, as a caller asking it directly sends it."""
    body = json.loads(request_body())
    return json.dumps(dict(body, model=model)).encode()


def seats_of(data: bytes) -> tuple[list[dict], float]:
    reply = json.loads(data)
    return reply["bench"]["seats"], reply["bench"]["seconds"]


def outcome_of(status: int, data: bytes) -> str:
    """How one panel request ended, as the throughput runs count it: ``ok``, ``seat`` (a seat
    did not answer), ``http N`` or ``connection``."""
    if status != 200:
        return f"http {status}" if status else "connection"
    return "seat" if any(s["status"] != "ok" for s in seats_of(data)[0]) else "ok"


class Rig:
    """The processes a run measures and the data folder they share; see the module docstring."""

    def __init__(self, args):
        self.args = args
        ROOT.joinpath("runs").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / "runs"))
        self.data = self.work / "data"
        self.database = getattr(args, "database_url", None)
        self.home = (
            open_home(self.data, database=self.database) if self.database else open_home(self.data)
        )
        self.body = request_body()
        self.merged_body = request_body(MERGED, bench={"reply": "merged"})
        self.pick_body = request_body(f"{COLLECTION}:pick")
        self.stream_body = request_body(stream=True)
        self.sims: dict[str, Child] = {}
        self.gateway: Child | None = None
        self.addr: tuple[str, int] | None = None
        self.upstream_profile = ""  # the sims profile use() last pointed the roster at
        self.results: dict = {
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "prompt_chars": len(SYSTEM) + len(PROMPT),
            "request_bytes": len(self.body),
        }

    # -- setup -----------------------------------------------------------------------------------
    def setup(self) -> None:
        limits = self.home.file("gateway.json")
        doc = json.loads(limits.read_text())
        doc.update(max_explorers=0)
        limits.write_text(json.dumps(doc, indent=2) + "\n")
        for name, latencies in PROFILES.items():
            models = self.work / f"sim-{name}.json"
            sim_models = {m: {"latency": s, "window": 128_000} for m, s in zip(MEMBERS, latencies)}
            sim_models[MERGER] = {"latency": 0.0, "window": 128_000}
            models.write_text(json.dumps(sim_models))
            self.sims[name] = Child(
                f"sim-{name}", [PY, str(SIM), "--port", "0", "--models", str(models)], self.work
            )
        roster = Roster(self.home)
        roster.add_endpoint("sim", self.sims["zero"].first_line, by="bench")
        for i, m in enumerate(MEMBERS, 1):
            roster.add_model(m, "sim", family=f"fam{i}", context=128_000, by="bench")
        roster.add_model(MERGER, "sim", family="fam-merger", context=128_000, by="bench")
        Collections(self.home).save(
            roster.view(), COLLECTION, list(MEMBERS), description="benchmark trio", by="bench"
        )
        Collections(self.home).save(
            roster.view(),
            MERGED,
            list(MEMBERS),
            merger=MERGER,
            description="benchmark trio, merged by a non-member",
            by="bench",
        )

    def use(self, profile: str) -> None:
        """Point the roster's endpoint at the upstream with these seat latencies (the gateway
        sees the edit on its next request: the roster is re-read when the file changes)."""
        Roster(self.home).add_endpoint("sim", self.sims[profile].first_line, by="bench")
        self.upstream_profile = profile

    def start_gateway(self) -> dict:
        """Spawn the gateway, ask one panel; the times to its URL line and to that answer."""
        gc.collect()
        db = ["--database", self.database] if self.database else []
        gateway = self.gateway = Child(
            "gateway",
            [PY, str(self.args.gateway), "--data", str(self.data), "--port", "0", *db],
            self.work,
        )
        addr = self.addr = url_of(gateway.first_line)
        client = Client(*addr, self.body)
        deadline = time.perf_counter() + 120
        while True:
            status, data, _ = client.panel()
            if status == 200:
                break
            if time.perf_counter() > deadline or gateway.proc.poll() is not None:
                raise RuntimeError(
                    f"the gateway gave no panel ({status}: {data[:300]!r}); "
                    f"stderr:\n{gateway.stderr_tail()}"
                )
            time.sleep(0.01)
        t_ok = time.perf_counter()
        client.close()
        return {
            "to_url_s": round(gateway.t_line - gateway.t_spawn, 3),
            "to_first_panel_s": round(t_ok - gateway.t_spawn, 3),
        }

    @property
    def running(self) -> Child:
        """The gateway between start_gateway and stop_gateway (measuring outside that is a
        mistake in the steps' order)."""
        if self.gateway is None:
            raise RuntimeError("no gateway is running")
        return self.gateway

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the running gateway listens on."""
        if self.addr is None:
            raise RuntimeError("no gateway has been started")
        return self.addr

    def stop_gateway(self) -> dict:
        gateway = self.running
        mem = proc_mem(gateway.pid)
        t0 = time.perf_counter()
        rc = gateway.stop()
        if rc not in (0, -signal.SIGTERM):
            log(f"gateway exited {rc}; stderr:\n{gateway.stderr_tail()}")
        self.gateway = None
        return dict(mem, stop_s=round(time.perf_counter() - t0, 2))

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
        for sim in self.sims.values():
            sim.stop()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")

    def log_panels(self) -> int:
        try:
            return (self.home.gateway_runs / "panels.idx").stat().st_size // 8
        except FileNotFoundError:
            return 0

    def log_bytes(self) -> dict:
        runs = self.home.gateway_runs
        return {p.name: p.stat().st_size for p in sorted(runs.iterdir()) if p.is_file()}
