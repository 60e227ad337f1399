"""Benchmark the gateway against the simulated upstream. It prints figures; it asserts nothing.

    python scripts/bench_gateway.py [--quick] [--panels-max N] [--json] [--duration S]
    python scripts/bench_gateway.py --profile DIR      (py-spy on the gateway; needs py-spy)

Every panel is three seats: one collection of three members with ``max_explorers: 0``. Three
processes take part, so none shares a GIL with another: the simulated upstream
(``scripts/sim_upstream.py``, one process per latency profile), the gateway (``gateway.py``) and
this load generator (threads, one persistent keep-alive ``http.client`` connection each, a
~600-character prompt). All of them share this machine's CPUs, which the figures say.

Steps:

1. seats of 50 / 100 / 200 ms run in parallel: panel wall time (client-observed), p50 and max;
2. added latency = client-observed panel time minus the slowest seat's ``seconds`` from
   ``bench.seats``, at concurrency 1, with 0 ms and with 50 ms seats;
3. panels/s at concurrency 1, 8, 32 and 64 with 0 ms seats, failed requests, and each process's
   CPU use while it ran;
4. the added latency of step 2 (0 ms seats) after the logs hold 100,000 and N earlier panels
   (``scripts/fill_ledger.py``; N is ``--panels-max``, 1,000,000 unless ``--quick``);
5. start-up: from spawning the gateway to its first successful panel reply, per log size;
6. the gateway's peak RSS (VmHWM) per log size;
7. time to the first seat's text in a stream (``stream: true``, seats of 50 / 500 / 2000 ms):
   from sending the request to receiving the first SSE chunk whose ``delta.content`` holds a seat
   section (not the role-only chunk), read incrementally; p50/p95 over ``--streams`` streams, and
   the gap to the fastest seat's own ``seconds`` (from ``bench.seats`` on the final chunk);
8. merged-mode added latency at concurrency 1, 0 ms seats: three members plus a 0 ms merger that
   is not a member (the collection's ``merger``): client time minus (slowest seat's ``seconds`` +
   ``bench.merger.seconds``), beside step 2's all-mode figure;
9. pick mode (``bench/trio:pick``) at concurrency 1, seats of 0 / 250 / 500 ms: the reply is the
   first member's (0 ms) answer, sent while the other two still run; client time minus the
   picked seat's own ``seconds`` (``bench.picked`` in ``bench.seats``), and how many seats were
   still ``running`` in each reply (slower seats of earlier panels run on behind it too).

``--only pick`` runs step 9 alone (with step 2's 0 ms all-mode figure beside it).

Requests carry ``Host: 127.0.0.1:PORT`` (a loopback name with the port) and, on POST,
``Content-Type: application/json``, as the gateway's guard requires.

The data folder is made under the checkout's ``runs/`` (git-ignored) and deleted at the end
unless ``--keep``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT)); import _bootstrap  # noqa: E401,E702,F401

import argparse  # noqa: E402
import collections  # noqa: E402
import gc  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from panelist.metrics.roster.collection import Collections  # noqa: E402
from panelist.metrics.home import open_home  # noqa: E402
from panelist.metrics.roster.roster import Roster  # noqa: E402

PY = sys.executable
GATEWAY = ROOT / "gateway.py"
SIM = ROOT / "scripts" / "sim_upstream.py"   # the thin entry point of metrics/upstream/sim.py
FILL = ROOT / "scripts" / "fill_ledger.py"
TICKS = os.sysconf("SC_CLK_TCK")

MEMBERS = ("m1", "m2", "m3")
COLLECTION = "trio"
MERGED = "trio-merged"   # the same three members with MERGER as the collection's merger
MERGER = "mx"            # not a member; 0 ms in every profile
# seat latencies (seconds) per member, one simulated upstream process per profile
PROFILES = {"spread": (0.05, 0.1, 0.2), "zero": (0.0, 0.0, 0.0), "fifty": (0.05, 0.05, 0.05),
            "stream": (0.05, 0.5, 2.0), "pick": (0.0, 0.25, 0.5)}

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
    "Is the lock order safe against evict()? Can get() recurse forever?")

TARGETS = {  # what the figures are held against (printed beside them, never asserted)
    "parallel_ms": 205, "added_p50_ms": 2.0, "added_p95_ms": 5.0, "throughput_c8": 300,
    "failed_c64": 0, "log_growth": 0.10, "rss_mb": 200,
    # step 7: the first seat's text within 5 ms of the fastest (50 ms) seat's own time, at p95
    "first_text_ms": 55, "first_text_gap_ms": 5.0,
    # step 8: merging adds no more gateway time than a plain panel does (step 2's targets)
    "merged_added_p50_ms": 2.0, "merged_added_p95_ms": 5.0,
    # step 9: the picked answer within 2 ms of the picked seat's own time, slower seats running
    "pick_added_p50_ms": 2.0,
}


# -- small helpers ---------------------------------------------------------------------------------
def pct(values, q: float):
    """Nearest-rank percentile (q in 0..100) of a list; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    return xs[max(0, min(len(xs) - 1, math.ceil(q / 100 * len(xs)) - 1))]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def proc_mem(pid: int) -> dict:
    """VmHWM (peak RSS) and VmRSS of a process, in MB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                name, kb = line.split()[:2]
                out[name[:-1]] = round(int(kb) / 1024, 1)
    return out


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Child:
    """A process of ours whose first stdout line says where it listens."""

    def __init__(self, name: str, argv: list[str], workdir: Path):
        self.name = name
        self.stderr_path = workdir / f"{name}.stderr"
        self.t_spawn = time.perf_counter()
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=ROOT)
        self.pid = self.proc.pid
        self.first_line = self._first_line(timeout=300)
        self.t_line = time.perf_counter()

    def _first_line(self, timeout: float) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line:
            self.stop()
            raise RuntimeError(f"{self.name} printed nothing; its stderr ({self.stderr_path}):\n"
                               + self.stderr_tail())
        return line.strip()

    def stderr_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        return self.proc.returncode


def url_of(line: str) -> tuple[str, int]:
    m = re.search(r"http://([^/:\s]+):(\d+)", line)
    if not m:
        raise RuntimeError(f"no URL in {line!r}")
    return m.group(1), int(m.group(2))


# -- the load generator -----------------------------------------------------------------------------
class Client:
    """One keep-alive connection that asks the gateway for panels."""

    def __init__(self, host: str, port: int, body: bytes):
        self.host, self.port = host, port
        # the guard answers only a loopback Host that names the port, and JSON-typed POSTs
        self.headers = {"Host": host_header(host, port), "Content-Type": "application/json",
                        "Content-Length": str(len(body))}
        self.body = body
        self.conn: http.client.HTTPConnection | None = None

    def _post(self) -> http.client.HTTPResponse:
        """Send the panel request on the kept connection (opened on first use); its response."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        self.conn.request("POST", "/v1/chat/completions", self.body, self.headers)
        return self.conn.getresponse()

    def panel(self) -> tuple[int, bytes, float]:
        """(status, body, seconds) of one panel; status 0 when the connection failed."""
        t0 = time.perf_counter()
        try:
            resp = self._post()
            data = resp.read()
            status = resp.status
            if resp.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return 0, repr(exc).encode(), time.perf_counter() - t0
        return status, data, time.perf_counter() - t0

    def stream(self) -> dict:
        """One ``stream: true`` panel, read as it arrives (``read1``: at most one socket read,
        never waiting for the whole body). Times in seconds from just before the request is
        sent: ``head`` (status line and headers), ``role`` (the role-only first chunk),
        ``first_text`` (the first chunk whose delta.content holds a seat section), ``end``
        (``[DONE]``); ``bench`` from the final chunk; ``error`` when something went wrong."""
        out = {"status": 0, "head": None, "role": None, "first_text": None, "end": None,
               "texts": 0, "bench": None, "error": ""}
        t0 = time.perf_counter()
        try:
            resp = self._post()
            out["head"] = time.perf_counter() - t0
            out["status"] = resp.status
            if resp.status != 200:
                out["error"] = resp.read()[:300].decode(errors="replace")
                self.close()
                return out
            buf = b""
            while out["end"] is None:
                data = resp.read1(65536)
                now = time.perf_counter() - t0
                if not data:
                    out["error"] = "the stream ended before [DONE]"
                    break
                buf += data
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    self._event(event.decode(), now, out)
            resp.read()  # the terminating zero-length chunk, so the connection can be reused
            if resp.will_close:
                self.close()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.close()
            out["error"] = repr(exc)
        return out

    @staticmethod
    def _event(event: str, now: float, out: dict) -> None:
        data = "".join(line[6:] for line in event.split("\n") if line.startswith("data: "))
        if not data:  # a ': seats still working' comment
            return
        if data == "[DONE]":
            out["end"] = now
            return
        chunk = json.loads(data)
        if "error" in chunk:
            out["error"] = json.dumps(chunk["error"])[:300]
            return
        delta = chunk["choices"][0]["delta"]
        if "role" in delta and out["role"] is None:
            out["role"] = now
        if "## Seat" in (delta.get("content") or ""):
            out["texts"] += 1
            if out["first_text"] is None:
                out["first_text"] = now
        if "bench" in chunk:
            out["bench"] = chunk["bench"]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def request_body(collection: str = COLLECTION, **extra) -> bytes:
    return json.dumps({"model": f"bench/{collection}", "temperature": 0.2, "max_tokens": 800,
                       "messages": [{"role": "system", "content": SYSTEM},
                                    {"role": "user", "content": PROMPT}], **extra}).encode()


def seats_of(data: bytes) -> tuple[list[dict], float]:
    reply = json.loads(data)
    return reply["bench"]["seats"], reply["bench"]["seconds"]


class Bench:
    def __init__(self, args):
        self.args = args
        ROOT.joinpath("runs").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="bench-", dir=ROOT / "runs"))
        self.data = self.work / "data"
        self.home = open_home(self.data)
        self.body = request_body()
        self.merged_body = request_body(MERGED, bench={"reply": "merged"})
        self.pick_body = request_body(f"{COLLECTION}:pick")
        self.stream_body = request_body(stream=True)
        self.sims: dict[str, Child] = {}
        self.gateway: Child | None = None
        self.addr: tuple[str, int] | None = None
        self.results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                          "platform": platform.platform()},
                              "prompt_chars": len(SYSTEM) + len(PROMPT),
                              "request_bytes": len(self.body)}

    # -- setup ----------------------------------------------------------------------------------
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
            self.sims[name] = Child(f"sim-{name}", [PY, str(SIM), "--port", "0",
                                                    "--models", str(models)], self.work)
        roster = Roster(self.home)
        roster.add_endpoint("sim", self.sims["zero"].first_line, by="bench")
        for i, m in enumerate(MEMBERS, 1):
            roster.add_model(m, "sim", family=f"fam{i}", context=128_000, by="bench")
        roster.add_model(MERGER, "sim", family="fam-merger", context=128_000, by="bench")
        Collections(self.home).save(roster.view(), COLLECTION, list(MEMBERS),
                                    description="benchmark trio", by="bench")
        Collections(self.home).save(roster.view(), MERGED, list(MEMBERS), merger=MERGER,
                                    description="benchmark trio, merged by a non-member",
                                    by="bench")

    def use(self, profile: str) -> None:
        """Point the roster's endpoint at the upstream with these seat latencies (the gateway
        sees the edit on its next request: the roster is re-read when the file changes)."""
        Roster(self.home).add_endpoint("sim", self.sims[profile].first_line, by="bench")
        self.profile = profile

    def start_gateway(self) -> dict:
        """Spawn the gateway, ask one panel; the times to its URL line and to that answer."""
        gc.collect()
        self.gateway = Child("gateway", [PY, str(self.args.gateway), "--data", str(self.data),
                                         "--port", "0"], self.work)
        self.addr = url_of(self.gateway.first_line)
        client = Client(*self.addr, self.body)
        deadline = time.perf_counter() + 120
        while True:
            status, data, _ = client.panel()
            if status == 200:
                break
            if time.perf_counter() > deadline or self.gateway.proc.poll() is not None:
                raise RuntimeError(f"the gateway gave no panel ({status}: {data[:300]!r}); "
                                   f"stderr:\n{self.gateway.stderr_tail()}")
            time.sleep(0.01)
        t_ok = time.perf_counter()
        client.close()
        return {"to_url_s": round(self.gateway.t_line - self.gateway.t_spawn, 3),
                "to_first_panel_s": round(t_ok - self.gateway.t_spawn, 3)}

    def stop_gateway(self) -> dict:
        mem = proc_mem(self.gateway.pid)
        t0 = time.perf_counter()
        rc = self.gateway.stop()
        if rc not in (0, -signal.SIGTERM):
            log(f"gateway exited {rc}; stderr:\n{self.gateway.stderr_tail()}")
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

    # -- measurements ------------------------------------------------------------------------------
    def sequential(self, n: int, warmup: int, *, merged: bool = False) -> dict:
        """n panels one after another on one connection; wall time and added latency. Merged
        (step 8): the merged collection, and the merger's own seconds count as upstream time
        too (it runs after the seats); a reply without a merger that answered is a failure."""
        client = Client(*self.addr, self.merged_body if merged else self.body)
        for _ in range(warmup):
            client.panel()
        gc.collect()
        wall, added, inside, outside, slowest, failed = [], [], [], [], [], 0
        merger_s, notes = [], collections.Counter()
        cpu0, gw0 = self_cpu(), proc_cpu(self.gateway.pid)
        t0 = time.perf_counter()
        for _ in range(n):
            status, data, secs = client.panel()
            if status != 200:
                failed += 1
                continue
            seats, gw_secs = seats_of(data)
            worst = max(s["seconds"] for s in seats)
            if any(s["status"] != "ok" for s in seats):
                failed += 1
            if merged:
                bench = json.loads(data)["bench"]
                merger = bench.get("merger") or {}
                if merger.get("status") != "ok" or merger.get("alias") != MERGER:
                    failed += 1
                    notes[bench.get("note") or f"merger {merger.get('alias')}: "
                          f"{merger.get('status')}"] += 1
                    continue
                worst += merger["seconds"]
                merger_s.append(merger["seconds"] * 1000)
            wall.append(secs * 1000)
            slowest.append(worst * 1000)
            added.append((secs - worst) * 1000)
            inside.append((gw_secs - worst) * 1000)
            outside.append((secs - gw_secs) * 1000)
        elapsed = time.perf_counter() - t0
        client.close()
        ms = lambda v: None if v is None else round(v, 3)  # noqa: E731
        top = lambda v: ms(max(v, default=None))  # noqa: E731
        done = max(1, len(wall))
        out = {
            "panels": len(wall), "failed": failed,
            "wall_ms": {"p50": ms(pct(wall, 50)), "p95": ms(pct(wall, 95)), "max": top(wall)},
            # merged: the slowest seat plus the merger
            "slowest_seat_ms": {"p50": ms(pct(slowest, 50)), "max": top(slowest)},
            "added_ms": {"p50": ms(pct(added, 50)), "p95": ms(pct(added, 95)),
                         "p99": ms(pct(added, 99)), "max": top(added)},
            # bench.seconds (the gateway's own clock, from seating to the reply being built)
            # minus the slowest seat, and the client's time minus bench.seconds (HTTP in and
            # out, parsing, seating, writing the panel line, encoding the reply)
            "inside_ms_p50": ms(pct(inside, 50)), "outside_ms_p50": ms(pct(outside, 50)),
            "gateway_cpu_ms_per_panel": ms((proc_cpu(self.gateway.pid) - gw0) * 1000 / done),
            "client_cpu_ms_per_panel": ms((self_cpu() - cpu0) * 1000 / done),
            "elapsed_s": round(elapsed, 2),
        }
        if merged:
            out.update(merger_ms={"p50": ms(pct(merger_s, 50)), "max": top(merger_s)},
                       failures=dict(notes))
        return out

    def picks(self, n: int, warmup: int) -> dict:
        """Step 9: n pick-mode panels one after another on one connection; the client's time
        minus the picked seat's own ``seconds``, and the seats still running behind each reply.
        A reply that picked another seat than the first member, or with no seat running behind
        it, counts as failed (the figure would not be what it says)."""
        client = Client(*self.addr, self.pick_body)
        for _ in range(warmup):
            client.panel()
        gc.collect()
        added, inside, picked_s, behind, failures = [], [], [], [], collections.Counter()
        gw0 = proc_cpu(self.gateway.pid)
        for _ in range(n):
            status, data, secs = client.panel()
            if status != 200:
                failures[f"http {status}"] += 1
                continue
            bench = json.loads(data)["bench"]
            picked = bench.get("picked") or {}
            seat = next((x for x in bench["seats"] if x["call"] == picked.get("call")), None)
            running = sum(x["status"] == "running" for x in bench["seats"])
            if seat is None or picked.get("alias") != MEMBERS[0] or seat["status"] != "ok":
                failures[f"picked {picked.get('alias')}: {bench.get('note', '')[:80]}"] += 1
                continue
            if not running:
                failures["no seat running behind the reply"] += 1
                continue
            added.append((secs - seat["seconds"]) * 1000)
            inside.append((bench["seconds"] - seat["seconds"]) * 1000)
            picked_s.append(seat["seconds"] * 1000)
            behind.append(running)
        client.close()
        done = max(1, len(added))
        ms = lambda v: None if v is None else round(v, 3)  # noqa: E731
        return {
            "panels": len(added), "failed": sum(failures.values()), "failures": dict(failures),
            "seat_latencies_ms": [round(x * 1000) for x in PROFILES["pick"]],
            "added_ms": {"p50": ms(pct(added, 50)), "p95": ms(pct(added, 95)),
                         "p99": ms(pct(added, 99)), "max": ms(max(added, default=None))},
            "inside_ms_p50": ms(pct(inside, 50)),
            "picked_seat_ms_p50": ms(pct(picked_s, 50)),
            "running_behind_p50": pct(behind, 50),
            # includes the slower seats finishing behind earlier replies and their logging
            "gateway_cpu_ms_per_panel": ms((proc_cpu(self.gateway.pid) - gw0) * 1000 / done),
        }

    def streams(self, n: int, warmup: int) -> dict:
        """Step 7: n streams one after another on one keep-alive connection (each runs to
        [DONE], so ~2 s apiece); when the first seat's text arrives, against that seat's own
        ``seconds``."""
        client = Client(*self.addr, self.stream_body)
        for _ in range(warmup):
            client.stream()
        gc.collect()
        first, gap, head, role, after_role, fastest, end, failures = [], [], [], [], [], [], [], []
        for _ in range(n):
            s = client.stream()
            seats = (s["bench"] or {}).get("seats") or []
            if s["error"] or s["first_text"] is None or s["role"] is None or len(seats) != 3 \
                    or s["texts"] != 3 or any(x["status"] != "ok" for x in seats):
                failures.append(s["error"] or f"status {s['status']}, {s['texts']} seat chunks, "
                                f"seats {[x.get('status') for x in seats]}")
                continue
            quick = min(x["seconds"] for x in seats)
            first.append(s["first_text"] * 1000)
            gap.append((s["first_text"] - quick) * 1000)
            fastest.append(quick * 1000)
            head.append(s["head"] * 1000)
            role.append(s["role"] * 1000)
            after_role.append((s["first_text"] - s["role"]) * 1000)
            end.append((s["end"] - max(x["seconds"] for x in seats)) * 1000)
        client.close()
        ms = lambda v: None if v is None else round(v, 3)  # noqa: E731
        stat = lambda v: {"p50": ms(pct(v, 50)), "p95": ms(pct(v, 95)),  # noqa: E731
                          "max": ms(max(v, default=None))}
        return {
            "streams": len(first), "failed": len(failures), "failures": failures[:5],
            "seat_latencies_ms": [round(x * 1000) for x in PROFILES["stream"]],
            "first_text_ms": stat(first),
            # the first text's time minus the fastest seat's own seconds (bench.seats)
            "gap_ms": stat(gap),
            "fastest_seat_ms": stat(fastest),
            # the head and the role chunk wait for the first seat that answered (a panel that
            # fails whole is an error status, not a stream), so they arrive with its text;
            # role_to_text is the time between the role chunk and that first text
            "head_ms": stat(head), "role_ms": stat(role), "role_to_text_ms": stat(after_role),
            # [DONE] minus the slowest seat's seconds (recording the panel, the final chunk)
            "done_after_slowest_ms": stat(end),
        }

    def throughput(self, concurrency: int, duration: float, warmup: float) -> dict:
        """``concurrency`` threads asking back to back for warmup + duration seconds; only the
        panels finished inside the measured window count."""
        clients = [Client(*self.addr, self.body) for _ in range(concurrency)]
        start = threading.Event()
        t_begin = [0.0]
        t_stop = [0.0]
        done: list[list] = [[] for _ in clients]   # (t_finished, seconds, outcome) per thread

        def work(client: Client, out: list) -> None:
            start.wait()
            end = t_stop[0]
            while time.perf_counter() < end:
                status, data, secs = client.panel()
                outcome = "ok"
                if status != 200:
                    outcome = f"http {status}" if status else "connection"
                elif any(s["status"] != "ok" for s in seats_of(data)[0]):
                    outcome = "seat"
                out.append((time.perf_counter(), secs, outcome))
            client.close()

        threads = [threading.Thread(target=work, args=(c, o), daemon=True)
                   for c, o in zip(clients, done)]
        for t in threads:
            t.start()
        gc.collect()
        now = time.perf_counter()
        t_begin[0] = now + warmup
        t_stop[0] = t_begin[0] + duration
        start.set()
        time.sleep(max(0.0, t_begin[0] - time.perf_counter()))
        pids = {"gateway": self.gateway.pid, "upstream": self.sims[self.profile].pid}
        cpu0 = {k: proc_cpu(p) for k, p in pids.items()}
        me0 = self_cpu()
        time.sleep(max(0.0, t_stop[0] - time.perf_counter()))
        cpu1 = {k: proc_cpu(p) for k, p in pids.items()}
        me1 = self_cpu()
        for t in threads:
            t.join(timeout=180)
        measured = [r for rows in done for r in rows if t_begin[0] <= r[0] <= t_stop[0]]
        every = [r for rows in done for r in rows]
        ok = [r for r in measured if r[2] == "ok"]
        lat = [r[1] * 1000 for r in ok]
        failures = collections.Counter(r[2] for r in every if r[2] != "ok")
        n = max(1, len(measured))
        cpu = {k: round((cpu1[k] - cpu0[k]) / duration * 100, 1) for k in pids}
        cpu["load generator"] = round((me1 - me0) / duration * 100, 1)
        return {
            "concurrency": concurrency, "duration_s": duration,
            "panels_per_s": round(len(ok) / duration, 1),
            "failed": sum(v for k, v in failures.items() if k != "seat"),
            "seat_errors": failures.get("seat", 0), "failures": dict(failures),
            "requests": len(every),
            "latency_ms": {"p50": round(pct(lat, 50) or 0, 2), "p95": round(pct(lat, 95) or 0, 2),
                           "max": round(max(lat) if lat else 0, 2)},
            "cpu_pct_of_one_core": cpu,
            "gateway_cpu_ms_per_panel": round((cpu1["gateway"] - cpu0["gateway"]) * 1000 / n, 3),
            "upstream_cpu_ms_per_panel": round((cpu1["upstream"] - cpu0["upstream"]) * 1000 / n,
                                               3),
        }

    def fill(self, total: int) -> dict:
        """Top the logs up to ``total`` panels with fill_ledger.py (no gateway running)."""
        have = self.log_panels()
        if total <= have:
            return {"added": 0}
        log(f"filling the logs with {total - have:,} panels (fill_ledger.py) ...")
        t0 = time.perf_counter()
        out = subprocess.run([PY, str(FILL), str(self.data), "--panels", str(total - have)],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            raise RuntimeError(f"fill_ledger failed: {out.stderr[-2000:]}")
        return dict(json.loads(out.stdout.strip().splitlines()[-1]), added=total - have,
                    wall_s=round(time.perf_counter() - t0, 1))

    # -- the run -------------------------------------------------------------------------------------
    def run(self) -> dict:
        a, r = self.args, self.results
        self.setup()
        self.use("zero")
        log("gateway on an empty log")
        start = self.start_gateway()
        r["startup"] = [dict(start, log_panels=0)]

        self.use("spread")
        log("step 1: seats of 50/100/200 ms in parallel")
        r["parallel"] = self.sequential(a.parallel_panels, warmup=3)

        self.use("zero")
        log(f"step 2: added latency, 0 ms seats ({a.panels} panels)")
        r["added_zero"] = self.sequential(a.panels, warmup=a.warmup)
        self.use("fifty")
        log(f"step 2: added latency, 50 ms seats ({a.panels} panels)")
        r["added_fifty"] = self.sequential(a.panels, warmup=20)

        self.use("zero")
        log(f"step 8: merged-mode added latency, 0 ms seats and merger ({a.merged_panels} panels)")
        r["added_merged"] = self.sequential(a.merged_panels, warmup=a.warmup, merged=True)

        self.use("pick")
        log(f"step 9: pick mode, seats 0/250/500 ms ({a.pick_panels} panels)")
        r["pick"] = self.picks(a.pick_panels, warmup=a.warmup)

        if a.streams:
            self.use("stream")
            log(f"step 7: first seat's text in a stream, seats 50/500/2000 ms ({a.streams} "
                f"streams, ~{2 * (a.streams + 1)} s)")
            r["stream_first_text"] = self.streams(a.streams, warmup=1)

        self.use("zero")
        r["throughput"] = []
        for c in (1, 8, 32, 64):
            log(f"step 3: throughput at concurrency {c} ({a.duration:g} s)")
            r["throughput"].append(self.throughput(c, a.duration, a.tp_warmup))
        r["sizes"] = [{"log_panels": self.log_panels(), "added": r["added_zero"],
                       "memory": self.stop_gateway(), "bytes": self.log_bytes()}]

        for size in a.sizes:
            fill = self.fill(size)
            self.use("zero")
            log(f"gateway on {self.log_panels():,} panels")
            start = self.start_gateway()
            r["startup"].append(dict(start, log_panels=self.log_panels()))
            log(f"step 4: added latency, 0 ms seats ({a.panels} panels)")
            added = self.sequential(a.panels, warmup=a.warmup)
            r["sizes"].append({"log_panels": self.log_panels(), "fill": fill, "added": added,
                               "memory": self.stop_gateway(), "bytes": self.log_bytes()})
        return r

    def run_pick(self) -> dict:
        """``--only pick``: step 9, with step 2's 0 ms all-mode figure to compare."""
        a, r = self.args, self.results
        self.setup()
        self.use("zero")
        self.start_gateway()
        log(f"step 2: added latency, 0 ms seats ({a.panels} panels)")
        r["added_zero"] = self.sequential(a.panels, warmup=a.warmup)
        self.use("pick")
        log(f"step 9: pick mode, seats 0/250/500 ms ({a.pick_panels} panels)")
        r["pick"] = self.picks(a.pick_panels, warmup=a.warmup)
        r["memory"] = self.stop_gateway()
        return r

    def profile(self, out_dir: Path) -> dict:
        """py-spy on the gateway during a 0 ms, concurrency-1 run; collapsed stacks to out_dir."""
        spy = shutil.which("py-spy")
        if spy is None:
            raise RuntimeError("--profile needs py-spy: python -m pip install py-spy")
        out_dir.mkdir(parents=True, exist_ok=True)
        self.setup()
        self.use("zero")
        self.start_gateway()
        self.sequential(200, warmup=50)
        files = {}
        for mode, extra in (("wall", ["--idle"]), ("cpu", []), ("gil", ["--gil"])):
            path = out_dir / f"gateway-{mode}.txt"
            spy_proc = subprocess.Popen(
                [spy, "record", "--format", "raw", "--rate", "1000", "--threads",
                 "--duration", str(int(self.args.duration)), "--pid", str(self.gateway.pid),
                 "--output", str(path), *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.0)   # py-spy attaches
            t_end = time.perf_counter() + self.args.duration - 1.5
            client = Client(*self.addr, self.body)
            n = 0
            while time.perf_counter() < t_end:
                client.panel()
                n += 1
            client.close()
            err = spy_proc.communicate(timeout=120)[1]
            if spy_proc.returncode:
                raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-1000:]}")
            files[mode] = {"file": str(path), "panels": n, "top": top_frames(path)}
        self.stop_gateway()
        return files


def top_frames(path: Path, n: int = 25) -> dict:
    """Self and inclusive sample counts per function from py-spy's collapsed stacks."""
    own, incl, total = collections.Counter(), collections.Counter(), 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        count = int(count)
        total += count
        frames = [re.sub(r" \((.*/)?([^/]+):\d+\)$", r" (\2)", f) for f in stack.split(";")]
        own[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    share = lambda c: round(100 * c / max(1, total), 1)  # noqa: E731
    return {"samples": total,
            "self_pct": [(f, share(c)) for f, c in own.most_common(n)],
            "inclusive_pct": [(f, share(c)) for f, c in incl.most_common(n)]}


# -- the report -----------------------------------------------------------------------------------
def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("meets" if ok else "MISSES")


def report(r: dict, args) -> str:
    T = TARGETS
    rows: list[tuple[str, str, str, str]] = []
    p = r["parallel"]
    rows.append((f"1 panel wall, seats 50/100/200 ms ({p['panels']} panels, c=1)",
                 f"p50 {p['wall_ms']['p50']:.1f} ms, max {p['wall_ms']['max']:.1f} ms",
                 f"<= {T['parallel_ms']} ms", verdict(p["wall_ms"]["max"] <= T["parallel_ms"])))
    for key, label in (("added_zero", "0 ms"), ("added_fifty", "50 ms")):
        s = r[key]["added_ms"]
        rows.append((f"2 added latency, {label} seats ({r[key]['panels']} panels, c=1)",
                     f"p50 {s['p50']:.2f} ms, p95 {s['p95']:.2f} ms",
                     f"<= {T['added_p50_ms']:g} / <= {T['added_p95_ms']:g} ms",
                     verdict(s["p50"] <= T["added_p50_ms"] and s["p95"] <= T["added_p95_ms"])))
    for t in r["throughput"]:
        c = t["concurrency"]
        target, ok = "", None
        if c == 8:
            target, ok = f">= {T['throughput_c8']}/s", t["panels_per_s"] >= T["throughput_c8"]
        if c == 64:
            target, ok = "0 failed", t["failed"] == T["failed_c64"]
        rows.append((f"3 panels/s, 0 ms seats, c={c} ({t['duration_s']:g} s)",
                     f"{t['panels_per_s']:.0f}/s, {t['failed']} failed"
                     + (f", {t['seat_errors']} with a failed seat" if t["seat_errors"] else ""),
                     target, verdict(ok)))
    base = r["sizes"][0]["added"]["added_ms"]["p50"]
    base_cpu = r["sizes"][0]["added"]["gateway_cpu_ms_per_panel"]
    for s in r["sizes"][1:]:
        a = s["added"]["added_ms"]
        growth = (a["p50"] - base) / base if base else 0.0
        cpu = s["added"]["gateway_cpu_ms_per_panel"] / base_cpu - 1 if base_cpu else 0.0
        rows.append((f"4 added latency, 0 ms seats, log {s['log_panels']:,} panels",
                     f"p50 {a['p50']:.2f} ms ({growth:+.0%}), p95 {a['p95']:.2f} ms; "
                     f"gateway CPU/panel {cpu:+.0%}",
                     f"within {T['log_growth']:.0%} of {base:.2f}",
                     verdict(growth <= T["log_growth"])))
    for s in r["startup"]:
        rows.append((f"5 start-up to first panel, log {s['log_panels']:,} panels",
                     f"{s['to_first_panel_s']:.2f} s (URL line {s['to_url_s']:.2f} s)", "", ""))
    for s in r["sizes"]:
        big = s is r["sizes"][-1] and len(r["sizes"]) > 1
        name = (f"log {s['log_panels']:,} panels" if s is not r["sizes"][0] else
                f"first gateway (log 0 -> {s['log_panels']:,})")
        rows.append((f"6 peak RSS (VmHWM), {name}",
                     f"{s['memory']['VmHWM']:.1f} MB",
                     f"<= {T['rss_mb']} MB" if big else "",
                     verdict(s["memory"]["VmHWM"] <= T["rss_mb"]) if big else ""))
    st = r.get("stream_first_text")
    if st and st["streams"]:
        f, g = st["first_text_ms"], st["gap_ms"]
        lat = "/".join(str(x) for x in st["seat_latencies_ms"])
        rows.append((f"7 first seat's text, stream, seats {lat} ms ({st['streams']} streams)",
                     f"p50 {f['p50']:.1f} ms, p95 {f['p95']:.1f} ms; gap to fastest seat p50 "
                     f"{g['p50']:.2f} ms, p95 {g['p95']:.2f} ms"
                     + (f"; {st['failed']} failed" if st["failed"] else ""),
                     f"p95 <= {T['first_text_ms']} ms, gap <= {T['first_text_gap_ms']:g} ms",
                     verdict(f["p95"] <= T["first_text_ms"] and g["p95"] <= T["first_text_gap_ms"]
                             and not st["failed"])))
    elif st:
        rows.append((f"7 first seat's text, stream ({st['failed']} failed)", "no stream completed",
                     f"<= {T['first_text_ms']} ms", verdict(False)))
    m = r["added_merged"]
    ma, za = m["added_ms"], r["added_zero"]["added_ms"]
    rows.append((f"8 added latency, merged, 0 ms seats + merger ({m['panels']} panels, c=1)",
                 (f"p50 {ma['p50']:.2f} ms, p95 {ma['p95']:.2f} ms (all mode: p50 "
                  f"{za['p50']:.2f}, p95 {za['p95']:.2f} ms)" if m["panels"] else "no panel merged")
                 + (f"; {m['failed']} failed" if m["failed"] else ""),
                 f"<= {T['merged_added_p50_ms']:g} / <= {T['merged_added_p95_ms']:g} ms",
                 verdict(bool(m["panels"]) and not m["failed"]
                         and ma["p50"] <= T["merged_added_p50_ms"]
                         and ma["p95"] <= T["merged_added_p95_ms"])))
    rows.extend(pick_rows(r))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    head = ("measure".ljust(widths[0]), "value".ljust(widths[1]), "target".ljust(widths[2]))
    lines = [
        f"Panelist gateway benchmark · {time.strftime('%Y-%m-%d %H:%M')} · "
        f"{r['machine']['cpus']} CPUs · Python {r['machine']['python']}",
        f"3-seat panels (3 members, max_explorers 0) on the simulated upstream; request "
        f"{r['request_bytes']} bytes ({r['prompt_chars']} prompt chars); gateway, upstream and "
        "this load generator are separate processes sharing the CPUs.",
        "",
        "  ".join(head) + "  ",
        "  ".join("-" * w for w in widths) + "  -------",
    ]
    for row in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)) + "  " + row[3])
    lines += ["", "Details"]
    p = r["parallel"]
    lines.append(f"  seats 50/100/200 ms: slowest seat p50 {p['slowest_seat_ms']['p50']:.1f} ms, "
                 f"max {p['slowest_seat_ms']['max']:.1f} ms (the seat's own time, as the gateway "
                 f"reports it); added p50 {p['added_ms']['p50']:.2f} ms")
    for key, label in (("added_zero", "0 ms seats"), ("added_fifty", "50 ms seats")):
        d = r[key]
        lines.append(f"  added latency, {label}: p99 {d['added_ms']['p99']:.2f} ms, max "
                     f"{d['added_ms']['max']:.2f} ms; inside the gateway's clock (bench.seconds - "
                     f"slowest seat) p50 {d['inside_ms_p50']:.2f} ms, outside it p50 "
                     f"{d['outside_ms_p50']:.2f} ms; gateway CPU {d['gateway_cpu_ms_per_panel']:.2f}"
                     f" ms/panel, load generator CPU {d['client_cpu_ms_per_panel']:.2f} ms/panel")
    if m["panels"]:
        lines.append(f"  added latency, merged (0 ms seats, 0 ms merger {MERGER}, not a member): p99 "
                     f"{ma['p99']:.2f} ms, max {ma['max']:.2f} ms; merger's own seconds p50 "
                     f"{m['merger_ms']['p50']:.1f} ms; inside the gateway's clock p50 "
                     f"{m['inside_ms_p50']:.2f} ms (all mode {r['added_zero']['inside_ms_p50']:.2f}),"
                     f" outside it p50 {m['outside_ms_p50']:.2f} ms; gateway CPU "
                     f"{m['gateway_cpu_ms_per_panel']:.2f} ms/panel (all mode "
                     f"{r['added_zero']['gateway_cpu_ms_per_panel']:.2f})"
                     + (f"; failures {m['failures']}" if m.get("failures") else ""))
    if st and st["streams"]:
        lines.append(f"  stream: fastest seat's own time p50 {st['fastest_seat_ms']['p50']:.1f} ms; "
                     f"response head p50 {st['head_ms']['p50']:.2f} ms, role chunk p50 "
                     f"{st['role_ms']['p50']:.2f} ms (both wait for the first answer); first "
                     f"text after the role chunk p50 {st['role_to_text_ms']['p50']:.2f} ms, p95 "
                     f"{st['role_to_text_ms']['p95']:.2f} ms; gap max {st['gap_ms']['max']:.2f}"
                     f" ms; [DONE] after the slowest seat p50 "
                     f"{st['done_after_slowest_ms']['p50']:.2f} ms")
    if st and st["failures"]:
        lines.append(f"  stream failures: {st['failures']}")
    lines.append("  throughput (0 ms seats): CPU as % of one core over the measured window")
    for t in r["throughput"]:
        cpu = t["cpu_pct_of_one_core"]
        lines.append(f"    c={t['concurrency']:<3} {t['panels_per_s']:6.0f}/s  latency p50 "
                     f"{t['latency_ms']['p50']:.1f} ms p95 {t['latency_ms']['p95']:.1f} ms  "
                     f"CPU gateway {cpu['gateway']:.0f}% upstream {cpu['upstream']:.0f}% "
                     f"load generator {cpu['load generator']:.0f}%  gateway "
                     f"{t['gateway_cpu_ms_per_panel']:.2f} ms CPU/panel"
                     + (f"  failures {t['failures']}" if t["failures"] else ""))
    for s in r["sizes"]:
        d, b = s["added"], s["bytes"]
        fill = s.get("fill") or {}
        mb = lambda name: b.get(name, 0) / 2**20  # noqa: E731
        lines.append(f"  log {s['log_panels']:,} panels: calls.jsonl {mb('calls.jsonl'):.0f} MB, "
                     f"evidence.jsonl {mb('evidence.jsonl'):.0f} MB, index.json "
                     f"{mb('index.json'):.1f} MB; added p50 {d['added_ms']['p50']:.2f} p95 "
                     f"{d['added_ms']['p95']:.2f} ms (inside the gateway's clock p50 "
                     f"{d['inside_ms_p50']:.2f} ms); gateway CPU "
                     f"{d['gateway_cpu_ms_per_panel']:.2f} ms/panel; VmHWM "
                     f"{s['memory']['VmHWM']:.1f} MB, VmRSS at stop {s['memory']['VmRSS']:.1f} MB"
                     + (f"; fill {fill['wall_s']:.0f} s" if fill.get("wall_s") else ""))
    lines += [
        "",
        "Notes: times are client-observed (http.client, loopback, keep-alive) and include the load "
        "generator's own HTTP work;",
        "seat seconds come from bench.seats[].seconds, which the gateway rounds to 1 ms, so added "
        "latency carries up to +/-0.5 ms of rounding (+/-1 ms in merged mode: seat and merger);",
        "step 7 reads each stream as it arrives and times the first chunk with a seat section; "
        "steps 7 and 8 run on the first gateway (small log).",
        "Log sizes count every panel id reserved (fill_ledger.py's synthetic panels plus this "
        "run's own); the 'first gateway' starts on an empty log and is the baseline of step 4.",
    ]
    if r["added_zero"]["outside_ms_p50"] > 20:
        lines.append(
            f"Most of the added latency lies outside the gateway's own clock (p50 "
            f"{r['added_zero']['outside_ms_p50']:.1f} ms between bench.seconds and the client): "
            "a steady ~40 ms is the signature of Nagle's algorithm meeting the client's delayed "
            "ACK, when a reply's head and body leave in two small writes.")
    if args.quick:
        lines.append(f"--quick: log steps limited to {max(args.sizes or [0]):,} panels.")
    return "\n".join(lines)


def pick_rows(r: dict) -> list[tuple[str, str, str, str]]:
    k = r.get("pick")
    if not k:
        return []
    a, lat = k["added_ms"], "/".join(str(x) for x in k["seat_latencies_ms"])
    value = (f"p50 {a['p50']:.2f} ms, p95 {a['p95']:.2f} ms, max {a['max']:.2f} ms; "
             f"{k['running_behind_p50']} seats running behind at p50" if k["panels"]
             else "no panel picked")
    if k["failed"]:
        value += f"; {k['failed']} failed {k['failures']}"
    return [(f"9 pick: reply minus picked seat, seats {lat} ms ({k['panels']} panels, c=1)",
             value, f"p50 <= {TARGETS['pick_added_p50_ms']:g} ms",
             verdict(bool(k["panels"]) and not k["failed"]
                     and a["p50"] <= TARGETS["pick_added_p50_ms"]))]


def pick_report(r: dict) -> str:
    z, k = r["added_zero"], r["pick"]
    lines = [f"Panelist gateway benchmark, pick mode · {time.strftime('%Y-%m-%d %H:%M')} · "
             f"{r['machine']['cpus']} CPUs · Python {r['machine']['python']}", ""]
    for row in pick_rows(r):
        lines.append("  ".join(row))
    za = z["added_ms"]
    lines.append(f"2 all mode, 0 ms seats ({z['panels']} panels): added p50 {za['p50']:.2f} ms, "
                 f"p95 {za['p95']:.2f} ms")
    if k["panels"]:
        lines.append(f"  pick: picked seat's own time p50 {k['picked_seat_ms_p50']:.2f} ms; inside "
                     f"the gateway's clock (bench.seconds - picked seat) p50 "
                     f"{k['inside_ms_p50']:.2f} ms; gateway CPU {k['gateway_cpu_ms_per_panel']:.2f}"
                     " ms/panel (the seats behind each reply included); peak RSS "
                     f"{r['memory']['VmHWM']:.1f} MB")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip log steps above 100,000 panels")
    ap.add_argument("--panels-max", type=int, default=1_000_000, metavar="N",
                    help="largest log for steps 4-6 (default 1,000,000; 0 skips them)")
    ap.add_argument("--panels", type=int, default=500, help="panels per added-latency run")
    ap.add_argument("--parallel-panels", type=int, default=20)
    ap.add_argument("--merged-panels", type=int, default=300,
                    help="panels in the merged-mode added-latency run (step 8)")
    ap.add_argument("--pick-panels", type=int, default=300,
                    help="panels in the pick-mode run (step 9)")
    ap.add_argument("--only", choices=("pick",),
                    help="run one step alone: pick (step 9, beside step 2's 0 ms figure)")
    ap.add_argument("--streams", type=int, default=20,
                    help="streams for step 7 (each ~2 s: its slowest seat takes 2000 ms); 0 skips")
    ap.add_argument("--warmup", type=int, default=50, help="warm-up panels before each run")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per throughput run")
    ap.add_argument("--tp-warmup", type=float, default=1.0, help="warm-up seconds per run")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--gateway", type=Path, default=GATEWAY, metavar="SCRIPT",
                    help="gateway entry point to run (default: the checkout's gateway.py); "
                    "for A/B runs of a patched copy")
    ap.add_argument("--keep", action="store_true", help="keep the data folder under runs/")
    ap.add_argument("--profile", type=Path, metavar="DIR",
                    help="only profile the gateway with py-spy (0 ms seats, c=1)")
    args = ap.parse_args(argv)
    top = min(args.panels_max, 100_000) if args.quick else args.panels_max
    args.sizes = sorted({s for s in (100_000, top) if 0 < s <= top})

    bench = Bench(args)
    interrupted = False
    try:
        if args.profile:
            result = bench.profile(args.profile)
            print(json.dumps(result, indent=1))
            return 0
        result = bench.run_pick() if args.only == "pick" else bench.run()
    except KeyboardInterrupt:
        interrupted = True
        return 130
    finally:
        bench.close()
        if interrupted:
            log("interrupted; processes stopped")
    if args.json:
        print(json.dumps(result, indent=1))
    elif args.only == "pick":
        print(pick_report(result))
    else:
        print(report(result, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
