"""Benchmark the gateway under a slowloris attack. It prints figures; it asserts nothing.

    python scripts/bench_slowloris.py [--connections 2000] [--interval 2] [--seconds 10]
                                      [--line-bytes N] [--gateway SCRIPT] [--json] [--keep]

Three processes, as in ``bench_gateway.py``: the simulated upstream (three members of 0 ms), the
gateway (``gateway.py``) and this script, which measures. A fourth, the attacker (this script with
``--attack``), holds ``--connections`` sockets open: each sends a request line, then one byte of an
endless run of header lines every ``--interval`` seconds (with ``--line-bytes N``, a whole header
line of N bytes: a head that grows fast, to weigh on memory), and opens a fresh connection on its
next tick when the gateway closes it (as slowloris tools do).

Figures, without the attack, during it, and just after it (every socket of the attacker closed at
once): panels one after another on one kept connection (p50 / p95 / max, client-observed), panels
each on a fresh connection, ``GET /health`` on a fresh connection, and the gateway's memory
(``VmHWM`` / ``VmRSS`` from ``/proc/<pid>/status``) and thread count; during the attack also how
many of the attacker's connections the gateway closed. The file-descriptor limit is raised for
this process and its children (the gateway inherits it) and printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT)); import _bootstrap  # noqa: E401,E702,F401

import argparse  # noqa: E402
import errno  # noqa: E402
import heapq  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import selectors  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from panelist.metrics.roster.collection import Collections  # noqa: E402
from panelist.metrics.home import open_home  # noqa: E402
from panelist.metrics.roster.roster import Roster  # noqa: E402
from panelist.scripts.bench_gateway import (COLLECTION, GATEWAY, MEMBERS, PY, SIM,  # noqa: E402
                                            request_body)
from panelist.scripts.benchkit import (Child, Client, host_header, log, pct,  # noqa: E402
                                       proc_cpu, proc_mem, url_of)


# -- the attacker (its own process, so its work never shares a GIL with the measuring) ------------
def attack(host: str, port: int, n: int, interval: float, ramp: float, line: int) -> int:
    """Hold ``n`` slowloris connections until SIGTERM; a JSON status line on stdout each second.
    Each tick sends one byte of a run of short header lines or, with ``line`` > 1, one whole
    header line of ``line`` bytes (a head that grows fast, to weigh on memory)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sel = selectors.DefaultSelector()
    start = (f"GET /health HTTP/1.1\r\nHost: {host_header(host, port)}\r\n").encode()
    trickle = b"".join(b"X-Slow-%d: z\r\n" % i for i in range(100_000))
    fat = b"X-Fat: " + b"z" * max(0, line - 9) + b"\r\n"
    socks: list[socket.socket | None] = [None] * n
    sent = [0] * n          # bytes of ``trickle`` sent on the current connection; -1: none yet
    stats = {"opened": 0, "closed_by_gateway": 0, "replies": {}, "connect_failed": 0,
             "send_failed": 0}
    t0 = time.monotonic()
    # (when, slot): each slot's next act; opening spread over ``ramp`` seconds
    due = [(t0 + ramp * i / n, i) for i in range(n)]
    heapq.heapify(due)

    def close(i: int) -> None:
        s = socks[i]
        if s is not None:
            sel.unregister(s)
            s.close()
            socks[i] = None

    def act(i: int, now: float) -> float:
        """Open slot i's connection, or send its next byte; when it acts next."""
        s = socks[i]
        if s is None:
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            s.setblocking(False)
            if s.connect_ex((host, port)) not in (0, errno.EINPROGRESS):
                s.close()
                stats["connect_failed"] += 1
                return now + interval
            socks[i], sent[i] = s, -1
            sel.register(s, selectors.EVENT_READ, i)
            stats["opened"] += 1
            return now + 0.01   # the request line, once the connection is up
        try:
            if sent[i] < 0:
                s.send(start)
                sent[i] = 0
            else:
                if line > 1:
                    sent[i] += s.send(fat)
                else:
                    s.send(trickle[sent[i]:sent[i] + 1])
                    sent[i] += 1
        except BlockingIOError:   # still connecting (a full listen queue): try again soon
            return now + 0.05
        except OSError:
            stats["send_failed"] += 1
            close(i)
        return now + interval

    next_report = t0 + 1
    while not stop.is_set():
        wait = max(0.0, min(due[0][0] - time.monotonic(), 0.1))
        now = time.monotonic()
        for key, _ in sel.select(timeout=wait):   # the gateway answered (408) or closed
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b""
            if data.startswith(b"HTTP/1."):   # what the gateway said before it closed
                status = data[9:12].decode("latin-1")
                stats["replies"][status] = stats["replies"].get(status, 0) + 1
            stats["closed_by_gateway"] += 1
            close(key.data)   # a fresh connection on this slot's next tick
        now = time.monotonic()
        while due[0][0] <= now:
            _, i = heapq.heappop(due)
            heapq.heappush(due, (act(i, now), i))
        if now >= next_report:
            held = sum(s is not None for s in socks)
            print(json.dumps(dict(stats, held=held, t=round(now - t0, 1))), flush=True)
            next_report = now + 1
    for i in range(n):
        close(i)
    print(json.dumps(dict(stats, held=0, closed=True)), flush=True)
    return 0


class Attacker:
    """The attack process, and the last status line it printed (read by a thread)."""

    def __init__(self, addr, n: int, interval: float, ramp: float, line: int, workdir: Path):
        self.proc = subprocess.Popen(
            [PY, str(Path(__file__).resolve()), "--attack", f"{addr[0]}:{addr[1]}",
             "--connections", str(n), "--interval", str(interval), "--ramp", str(ramp),
             "--line-bytes", str(line)],
            stdout=subprocess.PIPE, stderr=open(workdir / "attacker.stderr", "ab"),
            stdin=subprocess.DEVNULL, text=True)
        self.status: dict = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.status = json.loads(line)
            except ValueError:
                pass

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        return self.status


# -- the measuring ---------------------------------------------------------------------------------
def proc_threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def listen_overflows() -> int:
    """TcpExt ListenOverflows: connections the kernel refused because a listen queue was full
    (for this network namespace, so other listeners on the machine count too)."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split())).get("ListenOverflows", 0))
    return 0


def stat(values: list[float]) -> dict:
    r = lambda v: None if v is None else round(v, 2)  # noqa: E731
    return {"n": len(values), "p50": r(pct(values, 50)), "p95": r(pct(values, 95)),
            "max": r(max(values, default=None))}


class Sampler:
    """The gateway's VmRSS and thread count every 0.25 s while it runs; their peaks."""

    def __init__(self, pid: int):
        self.pid, self.rss, self.threads = pid, 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self.rss = max(self.rss, proc_mem(self.pid).get("VmRSS", 0.0))
                self.threads = max(self.threads, proc_threads(self.pid))
            except OSError:
                return

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {"peak_VmRSS_mb": self.rss, "peak_threads": self.threads}


class Bench:
    def __init__(self, args):
        self.args = args
        ROOT.joinpath("runs").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="bench-slowloris-", dir=ROOT / "runs"))
        self.data = self.work / "data"
        self.home = open_home(self.data)
        self.body = request_body()
        self.sim: Child | None = None
        self.gateway: Child | None = None
        self.attacker: Attacker | None = None

    def setup(self) -> None:
        limits = self.home.file("gateway.json")
        doc = json.loads(limits.read_text())
        limits.write_text(json.dumps(dict(doc, max_explorers=0), indent=2) + "\n")
        models = self.work / "sim.json"
        models.write_text(json.dumps({m: {"latency": 0.0, "window": 128_000} for m in MEMBERS}))
        self.sim = Child("sim", [PY, str(SIM), "--port", "0", "--models", str(models)], self.work)
        roster = Roster(self.home)
        roster.add_endpoint("sim", self.sim.first_line, by="bench")
        for i, m in enumerate(MEMBERS, 1):
            roster.add_model(m, "sim", family=f"fam{i}", context=128_000, by="bench")
        Collections(self.home).save(roster.view(), COLLECTION, list(MEMBERS),
                                    description="benchmark trio", by="bench")
        self.gateway = Child("gateway", [PY, str(self.args.gateway), "--data", str(self.data),
                                         "--port", "0"], self.work)
        self.addr = url_of(self.gateway.first_line)
        client = Client(*self.addr, self.body)
        end = time.monotonic() + 120
        while client.panel()[0] != 200:
            if time.monotonic() > end or self.gateway.proc.poll() is not None:
                raise RuntimeError(f"the gateway gave no panel; stderr:\n"
                                   f"{self.gateway.stderr_tail()}")
            time.sleep(0.05)
        client.close()

    def close(self) -> None:
        if self.attacker is not None:
            self.attacker.stop()
        for child in (self.gateway, self.sim):
            if child is not None:
                child.stop()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")

    # one measure each: (milliseconds, failures)
    def kept(self, seconds: float) -> tuple[list[float], int]:
        client, ms, failed = Client(*self.addr, self.body), [], 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            status, _, secs = client.panel()
            if status == 200:
                ms.append(secs * 1000)
            else:
                failed += 1
        client.close()
        return ms, failed

    def fresh(self, seconds: float, path: str = "/v1/chat/completions",
              limit: int = 10_000) -> tuple[list[float], int]:
        """Requests each on a new connection (connect included in the time)."""
        ms, failed = [], 0
        body = self.body if path != "/health" else None
        headers = {"Host": host_header(*self.addr)}
        if body is not None:
            headers["Content-Type"] = "application/json"
        end = time.perf_counter() + seconds
        while time.perf_counter() < end and len(ms) + failed < limit:
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection(*self.addr, timeout=120)
            try:
                conn.request("POST" if body else "GET", path, body, headers)
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            finally:
                conn.close()
            if ok:
                ms.append((time.perf_counter() - t0) * 1000)
            else:
                failed += 1
        return ms, failed

    def phase(self, name: str, seconds: float) -> dict:
        pid = self.gateway.pid
        sampler = Sampler(pid)
        overflows = listen_overflows()
        cpu0, t0 = proc_cpu(pid), time.perf_counter()
        out = {}
        for label, (ms, failed) in (("panels_kept_ms", self.kept(seconds)),
                                    ("panels_fresh_ms", self.fresh(seconds)),
                                    ("health_fresh_ms", self.fresh(seconds / 2, "/health"))):
            out[label] = dict(stat(ms), failed=failed)
        out.update(sampler.stop(), listen_overflows=listen_overflows() - overflows,
                   gateway_cpu_pct=round((proc_cpu(pid) - cpu0) / (time.perf_counter() - t0) * 100))
        out.update(proc_mem(pid), threads_now=proc_threads(pid))
        log(f"{name}: {json.dumps(out)}")
        return out

    def run(self) -> dict:
        a = self.args
        self.setup()
        result = {"connections": a.connections, "interval_s": a.interval,
                  "line_bytes": a.line_bytes,
                  "nofile": a.nofile, "cpus": os.cpu_count()}
        result["before"] = self.phase("before", a.seconds)
        self.attacker = Attacker(self.addr, a.connections, a.interval, a.ramp, a.line_bytes,
                                 self.work)
        end = time.monotonic() + a.ramp + 120
        while (self.attacker.status.get("t", 0) < a.ramp + a.interval
               and time.monotonic() < end and self.attacker.proc.poll() is None):
            time.sleep(0.2)   # every connection opened and has trickled at least once
        log(f"attack under way: {self.attacker.status}")
        result["during"] = self.phase("during", a.seconds)
        result["attacker"] = dict(self.attacker.status)
        self.attacker.stop()
        self.attacker = None
        t0 = time.perf_counter()   # the first /health after 2,000 sockets closed at once
        first, failed = self.fresh(60, "/health", limit=1)
        result["first_health_after_ms"] = round(first[0], 2) if first else None
        result["first_health_failed"] = failed
        result["after"] = self.phase("after", a.seconds)
        result["after"]["first_health_wait_s"] = round(time.perf_counter() - t0, 2)
        return result


def report(r: dict) -> str:
    def fig(d: dict) -> str:
        return (f"p50 {d['p50']} ms, p95 {d['p95']} ms, max {d['max']} ms ({d['n']} ok"
                + (f", {d['failed']} failed)" if d["failed"] else ")"))

    att = r.get("attacker", {})
    what = ("a header byte" if r["line_bytes"] <= 1 else
            f"a {r['line_bytes']:,}-byte header line")
    lines = [f"Slowloris against the gateway: {r['connections']:,} connections, each trickling "
             f"{what} every {r['interval_s']:g} s; {r['cpus']} CPUs shared by gateway, "
             f"upstream, attacker and this client; RLIMIT_NOFILE {r['nofile']}.", ""]
    for name in ("before", "during", "after"):
        p = r[name]
        lines += [f"{name}:",
                  f"  panels, one kept connection   {fig(p['panels_kept_ms'])}",
                  f"  panels, a connection each     {fig(p['panels_fresh_ms'])}",
                  f"  /health, a connection each    {fig(p['health_fresh_ms'])}",
                  f"  gateway memory                VmHWM {p['VmHWM']} MB, VmRSS {p['VmRSS']} MB "
                  f"(peak in this phase {p['peak_VmRSS_mb']} MB); threads peak "
                  f"{p['peak_threads']}, now {p['threads_now']}; CPU {p['gateway_cpu_pct']}% "
                  "of one core",
                  f"  listen queue overflows        {p['listen_overflows']:,} (SYNs the kernel "
                  "dropped: the client retries after 1 s)"]
        if name == "during":
            lines.append(f"  attacker                      {att.get('held', 0):,} sockets held "
                         f"(accepted or in the listen queue) at the end; over the attack's "
                         f"{att.get('t', 0)} s, {att.get('opened', 0):,} opened, "
                         f"{att.get('closed_by_gateway', 0):,} closed by the gateway ("
                         + (", ".join(f"{n:,} after a {code}" for code, n in
                                      sorted(att.get("replies", {}).items())) or "no reply")
                         + ")")
        if name == "after":
            lines.append(f"  first /health once the attacker's sockets closed: "
                         f"{r['first_health_after_ms']} ms")
    return "\n".join(lines)


def raise_nofile(need: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--interval", type=float, default=2.0,
                    help="seconds between one connection's trickled bytes (default 2)")
    ap.add_argument("--line-bytes", type=int, default=1, metavar="N",
                    help="send a whole header line of N bytes per tick instead of one byte")
    ap.add_argument("--ramp", type=float, default=4.0,
                    help="seconds over which the attacker opens its connections")
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="seconds per measure (kept panels, fresh panels; /health half)")
    ap.add_argument("--gateway", type=Path, default=GATEWAY, metavar="SCRIPT",
                    help="gateway entry point to run (default: the checkout's gateway.py)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the data folder under runs/")
    ap.add_argument("--attack", metavar="HOST:PORT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.nofile = raise_nofile(args.connections + 1024)
    if args.attack:
        host, _, port = args.attack.rpartition(":")
        return attack(host.strip("[]"), int(port), args.connections, args.interval, args.ramp,
                      args.line_bytes)
    if args.nofile < args.connections + 64:
        log(f"RLIMIT_NOFILE is {args.nofile}: too few for {args.connections} connections")
        return 2
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
