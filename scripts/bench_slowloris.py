"""Benchmark a server under slowloris attacks. It prints figures; it asserts nothing.

    python scripts/bench_slowloris.py [--attack heads|bodies|logins|login-heads]
                                      [--connections N] [--interval S] [--ramp S] [--seconds S]
                                      [--line-bytes N] [--body-bytes N] [--rate B/S]
                                      [--server gateway|dashboard] [--json] [--keep]

Three processes, as in ``bench_gateway.py``: the simulated upstream (three members of 0 ms), the
server under attack and this script, which measures. A fourth, the attacker (this script with
``--attacker``), holds ``--connections`` sockets open and opens a fresh connection on a slot's
next tick when the server closes it (as slowloris tools do). The attacks:

* ``heads`` (the default; 2,000 connections against ``gateway.py``): a request line, then one
  byte of an endless run of header lines every ``--interval`` seconds (2); with
  ``--line-bytes N`` a whole header line of N bytes a tick instead, a head that grows fast.
* ``bodies`` (2,000 connections against ``gateway.py``): a whole head of ``POST
  /v1/chat/completions`` claiming ``--body-bytes`` (1 MiB), then the body trickled at ``--rate``
  bytes a second (18 KiB/s), one chunk every ``--interval`` seconds (1). ``--body-bytes 32768
  --rate 64`` is the small, slow variant (under the size that needs a share of the memory
  budget, far under the minimum body rate).
* ``logins`` (560 connections against ``serve.py``, the dashboard, which carries ``/v1`` on the
  same port): a head of ``POST /api/login`` claiming ``--body-bytes`` (4 KiB, the route's cap: a
  larger claim is refused with 413 at once), then that body trickled at ``--rate`` (18 KiB/s,
  one chunk every 0.1 s). The body is blanks, never a guess at the token, so the login pacing
  stays out of it: what is measured is what the connections cost. ``--rate 256`` trickles it
  over 16 s, as slow as the route's body deadline allows.
* ``login-heads`` (900 connections against ``serve.py``, opened at 45 a second over a 20 s
  ramp): a whole ``POST /api/login`` head claiming 4 KiB, and then nothing.

The dashboard runs with ``PANELIST_ADMIN_TOKEN`` set (a fresh random token) and this script
calls its ``/v1`` with a gateway key it made; ``--server dashboard`` runs ``heads`` or
``bodies`` against it too (the attacker then holds a key of its own, as a key holder could).

Figures, without the attack (quiet), during it, and just after it (every socket of the
attacker closed at once): panels one after another on one kept connection (p50 / p95 / max,
client-observed) and panels each on a fresh connection, for ``--seconds`` each; all the while
``GET /health`` on a fresh connection every 0.25 s and, on the dashboard, a login with the right
token every second, each in its own thread (answered: a 200 within 10 s per connect and per
read); the server's memory (``VmHWM`` / ``VmRSS`` from ``/proc/<pid>/status``, and the peak
VmRSS sampled every 0.25 s) and thread count; during the attack also what the attacker's
connections were told. Then the targets beside the figures: ``/health`` always answers, the
panel p50 within 2x of quiet, RSS at most 150 MB. The file-descriptor limit is raised for this
process and its children (the servers inherit it) and printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

import argparse
import http.client
import json
import os
import resource
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter
from typing import Any

from panelist.metrics.roster.collection import Collections
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server.keys import Keys
from panelist.scripts.bench_gateway_rig import COLLECTION, GATEWAY, MEMBERS, PY, SIM, request_body
from panelist.scripts.bench_slowloris_attack import KEY_ENV, Attacker, attack, chunk_of, said
from panelist.scripts.benchkit import (
    Child,
    Client,
    host_header,
    log,
    pct,
    proc_cpu,
    proc_mem,
    url_of,
)

SERVE = ROOT / "serve.py"
KIB = 1024
# each attack's defaults: connections, interval, ramp, body bytes, rate (bytes/s), server
ATTACKS = {
    "heads": dict(connections=2000, interval=2.0, ramp=4.0, body_bytes=0, rate=0, server="gateway"),
    "bodies": dict(
        connections=2000,
        interval=1.0,
        ramp=4.0,
        body_bytes=1024 * KIB,
        rate=18 * KIB,
        server="gateway",
    ),
    "logins": dict(
        connections=560,
        interval=0.1,
        ramp=2.0,
        body_bytes=4 * KIB,
        rate=18 * KIB,
        server="dashboard",
    ),
    "login-heads": dict(
        connections=900, interval=1.0, ramp=20.0, body_bytes=4 * KIB, rate=0, server="dashboard"
    ),
}
PROBE_TIMEOUT = 10.0  # seconds a probe may wait to connect, and then for its answer
HEALTH_EVERY = 0.25
LOGIN_EVERY = 1.0
TARGET_RATIO = 2.0
TARGET_RSS_MB = 150.0


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
    return {
        "n": len(values),
        "p50": r(pct(values, 50)),
        "p95": r(pct(values, 95)),
        "max": r(max(values, default=None)),
    }


class Sampler:
    """The server's VmRSS and thread count every 0.25 s while it runs; their peaks."""

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


class Probes:
    """While a phase runs: ``GET /health`` every ``HEALTH_EVERY`` s and, when ``token`` is
    given, a login with it every ``LOGIN_EVERY`` s, each on a fresh connection in a thread of
    its own, so a probe left waiting never delays the next one. Answered: a 200."""

    def __init__(self, addr: tuple[str, int], token: str | None):
        self.addr, self.token = addr, token
        self.got: dict[str, list] = {"health": [], "logins": []}  # (ms, outcome)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._ticker = threading.Thread(target=self._run, daemon=True)
        self._ticker.start()

    def _run(self) -> None:
        t0, k = time.monotonic(), 0
        per_login = round(LOGIN_EVERY / HEALTH_EVERY)
        while not self._stop.wait(max(0.0, t0 + k * HEALTH_EVERY - time.monotonic())):
            self._spawn("health")
            if self.token and k % per_login == 0:
                self._spawn("logins")
            k += 1

    def _spawn(self, what: str) -> None:
        thread = threading.Thread(target=self._probe, args=(what,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _probe(self, what: str) -> None:
        headers = {"Host": host_header(*self.addr)}
        body = None
        if what == "logins":
            body = json.dumps({"token": self.token}).encode()
            headers["Content-Type"] = "application/json"
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection(*self.addr, timeout=PROBE_TIMEOUT)
        try:
            conn.request(
                "POST" if body else "GET", "/api/login" if body else "/health", body, headers
            )
            resp = conn.getresponse()
            resp.read()
            outcome = str(resp.status)
        except TimeoutError:
            outcome = "no answer in time"
        except (OSError, http.client.HTTPException) as exc:
            outcome = type(exc).__name__
        finally:
            conn.close()
        with self._lock:
            self.got[what].append(((time.perf_counter() - t0) * 1000, outcome))

    def stop(self) -> dict:
        self._stop.set()
        self._ticker.join()
        for thread in self._threads:
            thread.join()
        out = {}
        for what, got in self.got.items():
            if what == "logins" and not self.token:
                continue
            ok = [ms for ms, outcome in got if outcome == "200"]
            out[what] = dict(
                stat(ok),
                attempts=len(got),
                answered=len(ok),
                failures=dict(Counter(o for _, o in got if o != "200")),
            )
        return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.dashboard = args.server == "dashboard"
        ROOT.joinpath("runs").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="bench-slowloris-", dir=ROOT / "runs"))
        self.data = self.work / "data"
        self.home = open_home(self.data)
        self.body = request_body()
        self.token = secrets.token_urlsafe(24) if self.dashboard else None
        self.key: str | None = None  # this script's gateway key, on the dashboard
        self.attacker_key: str | None = None
        self.sim: Child | None = None
        self.server: Child | None = None
        self.attacker: Attacker | None = None

    @property
    def auth(self) -> dict:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def client(self) -> Client:
        client = Client(*self.addr, self.body)
        client.headers.update(self.auth)
        return client

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
        Collections(self.home).save(
            roster.view(), COLLECTION, list(MEMBERS), description="benchmark trio", by="bench"
        )
        script, env = self.args.gateway, None
        if self.dashboard:  # behind a login, so /v1 takes gateway keys
            keys = Keys(self.home)
            self.key, _ = keys.create("bench", by="bench")
            self.attacker_key, _ = keys.create("attacker", by="bench")
            script, env = self.args.serve, dict(os.environ, PANELIST_ADMIN_TOKEN=self.token)
        self.server = Child(
            self.args.server,
            [PY, str(script), "--data", str(self.data), "--port", "0"],
            self.work,
            env=env,
        )
        self.addr = url_of(self.server.first_line)
        client = self.client()
        end = time.monotonic() + 120
        while client.panel()[0] != 200:
            if time.monotonic() > end or self.server.proc.poll() is not None:
                raise RuntimeError(
                    f"the {self.args.server} gave no panel; stderr:\n{self.server.stderr_tail()}"
                )
            time.sleep(0.05)
        client.close()

    def close(self) -> None:
        if self.attacker is not None:
            self.attacker.stop()
        for child in (self.server, self.sim):
            if child is not None:
                child.stop()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")

    # one measure each: (milliseconds, failures)
    def kept(self, seconds: float) -> tuple[list[float], Counter]:
        client = self.client()
        ms: list[float] = []
        failed: Counter[str] = Counter()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            status, data, secs = client.panel()
            if status == 200:
                ms.append(secs * 1000)
            else:
                failed[f"{status}{said(data, status)}" if status else "no answer"] += 1
        client.close()
        return ms, failed

    def fresh(
        self, seconds: float, path: str = "/v1/chat/completions", limit: int = 10_000
    ) -> tuple[list[float], Counter]:
        """Requests each on a new connection (connect included in the time); the times of those
        answered 200, and what the others got."""
        ms: list[float] = []
        failed: Counter[str] = Counter()
        body = self.body if path != "/health" else None
        headers = {"Host": host_header(*self.addr)}
        if body is not None:
            headers.update(self.auth)
            headers["Content-Type"] = "application/json"
        end = time.perf_counter() + seconds
        while time.perf_counter() < end and len(ms) + failed.total() < limit:
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection(*self.addr, timeout=120)
            try:
                conn.request("POST" if body else "GET", path, body, headers)
                resp = conn.getresponse()
                outcome = f"{resp.status}{said(resp.read(), resp.status)}"
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__
            finally:
                conn.close()
            if outcome == "200":
                ms.append((time.perf_counter() - t0) * 1000)
            else:
                failed[outcome] += 1
        return ms, failed

    def phase(self, name: str, seconds: float) -> dict:
        if self.server is None:
            raise RuntimeError("start() starts the server first")
        pid = self.server.pid
        sampler = Sampler(pid)
        probes = Probes(self.addr, self.token)
        overflows = listen_overflows()
        cpu0, t0 = proc_cpu(pid), time.perf_counter()
        out: dict[str, Any] = {}
        for label, (ms, failed) in (
            ("panels_kept_ms", self.kept(seconds)),
            ("panels_fresh_ms", self.fresh(seconds)),
        ):
            out[label] = dict(stat(ms), failed=sum(failed.values()), failures=dict(failed))
        out.update(probes.stop())
        out.update(
            sampler.stop(),
            listen_overflows=listen_overflows() - overflows,
            server_cpu_pct=round((proc_cpu(pid) - cpu0) / (time.perf_counter() - t0) * 100),
        )
        out.update(proc_mem(pid), threads_now=proc_threads(pid))
        log(f"{name}: {json.dumps(out)}")
        return out

    def run(self) -> dict:
        a = self.args
        self.setup()
        result = {
            "attack": a.attack,
            "server": a.server,
            "connections": a.connections,
            "interval_s": a.interval,
            "ramp_s": a.ramp,
            "line_bytes": a.line_bytes,
            "body_bytes": a.body_bytes,
            "rate_bps": a.rate,
            "chunk_bytes": chunk_of(a),
            "seconds": a.seconds,
            "nofile": a.nofile,
            "cpus": os.cpu_count(),
        }
        result["before"] = self.phase("before", a.seconds)
        self.attacker = Attacker(
            self.addr, a, self.work, self.attacker_key if a.attack == "bodies" else None
        )
        end = time.monotonic() + a.ramp + 120
        while (
            self.attacker.status.get("t", 0) < a.ramp + a.interval
            and time.monotonic() < end
            and self.attacker.proc.poll() is None
        ):
            time.sleep(0.2)  # every connection opened and has sent at least once
        log(f"attack under way: {self.attacker.status}")
        cpu0, t0 = proc_cpu(self.attacker.proc.pid), time.perf_counter()
        result["during"] = self.phase("during", a.seconds)
        result["attacker"] = dict(
            self.attacker.status,
            cpu_pct=round(
                (proc_cpu(self.attacker.proc.pid) - cpu0) / (time.perf_counter() - t0) * 100
            ),
        )
        self.attacker.stop()
        self.attacker = None
        t0 = time.perf_counter()  # the first /health after every attacking socket closed at once
        first, failed = self.fresh(60, "/health", limit=1)
        result["first_health_after_ms"] = round(first[0], 2) if first else None
        result["first_health_failed"] = dict(failed)
        result["after"] = self.phase("after", a.seconds)
        result["after"]["first_health_wait_s"] = round(time.perf_counter() - t0, 2)
        result["targets"] = targets(result)
        return result


def ratio(during: dict, before: dict) -> float | None:
    if not during["p50"] or not before["p50"]:
        return None
    return round(during["p50"] / before["p50"], 2)


def targets(r: dict) -> dict:
    """The issue's targets, judged on the figures taken during the attack."""
    d, b = r["during"], r["before"]
    health = d["health"]
    kept = ratio(d["panels_kept_ms"], b["panels_kept_ms"])
    fresh = ratio(d["panels_fresh_ms"], b["panels_fresh_ms"])
    rss = max(d["peak_VmRSS_mb"], d["VmRSS"])
    return {
        "health_always_answers": {
            "answered": health["answered"],
            "attempts": health["attempts"],
            "met": health["attempts"] > 0 and health["answered"] == health["attempts"],
        },
        "panel_p50_within_2x_of_quiet": {
            "kept_ratio": kept,
            "fresh_ratio": fresh,
            "met": kept is not None and fresh is not None and max(kept, fresh) <= TARGET_RATIO,
        },
        "rss_at_most_150_mb": {
            "peak_VmRSS_mb": rss,
            "VmHWM_mb": d["VmHWM"],
            "met": max(rss, d["VmHWM"]) <= TARGET_RSS_MB,
        },
    }


def describe(r: dict) -> str:
    """What the attacker did, in one sentence."""
    n, interval = f"{r['connections']:,} connections", f"{r['interval_s']:g} s"
    if r["attack"] == "heads":
        what = (
            "a header byte" if r["line_bytes"] <= 1 else f"a {r['line_bytes']:,}-byte header line"
        )
        return f"Slowloris heads: {n}, each trickling {what} every {interval}"
    path = "/v1/chat/completions" if r["attack"] == "bodies" else "/api/login"
    claim = f"a whole head of POST {path} claiming {r['body_bytes']:,} body bytes"
    if r["attack"] == "login-heads":
        return (
            f"Login heads: {n} opened over {r['ramp_s']:g} s "
            f"({r['connections'] / r['ramp_s']:.0f} a second), each sending {claim}, then "
            "nothing"
        )
    return (
        f"Slow bodies: {n}, each sending {claim}, then {r['chunk_bytes']:,} bytes of it "
        f"every {interval} ({r['rate_bps']:,} B/s)"
    )


def report(r: dict) -> str:
    def fig(d: dict) -> str:
        why = ", ".join(f"{n} {got}" for got, n in sorted(d["failures"].items()))
        return f"p50 {d['p50']} ms, p95 {d['p95']} ms, max {d['max']} ms ({d['n']} ok" + (
            f", {d['failed']} failed: {why})" if d["failed"] else ")"
        )

    def probe(d: dict) -> str:
        missed = ", ".join(f"{n} {why}" for why, n in sorted(d["failures"].items()))
        return (
            f"{d['answered']} of {d['attempts']} answered"
            + (f" ({missed})" if missed else "")
            + f"; p50 {d['p50']} ms, max {d['max']} ms"
        )

    def met(ok) -> str:
        return "met" if ok else "MISSED"

    att = r.get("attacker", {})
    server = (
        "gateway.py" if r["server"] == "gateway" else "serve.py (dashboard, /v1 on the same port)"
    )
    lines = [
        f"{describe(r)}; against {server}; {r['cpus']} CPUs shared by the server, "
        f"upstream, attacker and this client; RLIMIT_NOFILE {r['nofile']}.",
        "",
    ]
    for name in ("before", "during", "after"):
        p = r[name]
        lines += [
            f"{name}:" if name != "before" else "before (quiet):",
            f"  panels, one kept connection   {fig(p['panels_kept_ms'])}",
            f"  panels, a connection each     {fig(p['panels_fresh_ms'])}",
            f"  /health, a connection each    {probe(p['health'])}",
        ]
        if "logins" in p:
            lines.append(f"  logins, right token           {probe(p['logins'])}")
        lines += [
            f"  server memory                 VmHWM {p['VmHWM']} MB, VmRSS {p['VmRSS']} MB "
            f"(peak in this phase {p['peak_VmRSS_mb']} MB); threads peak "
            f"{p['peak_threads']}, now {p['threads_now']}; CPU {p['server_cpu_pct']}% "
            "of one core",
            f"  listen queue overflows        {p['listen_overflows']:,} (SYNs the kernel "
            "dropped: the client retries after 1 s)",
        ]
        if name == "during":
            body = (
                f", {att.get('bodies_sent_whole', 0):,} bodies sent whole, "
                f"{att.get('body_mb_sent', 0)} MB of bodies trickled"
                if r["attack"] != "heads"
                else ""
            )
            lines.append(
                f"  attacker                      {att.get('held', 0):,} sockets held "
                f"(accepted or in the listen queue) at the end; over the attack's "
                f"{att.get('t', 0)} s, {att.get('opened', 0):,} opened, "
                f"{att.get('closed_by_server', 0):,} closed by the server ("
                + (
                    ", ".join(
                        f"{n:,} after a {code}"
                        for code, n in sorted(att.get("replies", {}).items())
                    )
                    or "no reply"
                )
                + f"){body}; CPU {att.get('cpu_pct')}% of one core"
            )
        if name == "after":
            lines.append(
                f"  first /health once the attacker's sockets closed: "
                f"{r['first_health_after_ms']} ms"
            )
    t = r["targets"]
    h, p50, rss = (
        t["health_always_answers"],
        t["panel_p50_within_2x_of_quiet"],
        t["rss_at_most_150_mb"],
    )
    lines += [
        "targets, during the attack:",
        f"  /health always answers        {h['answered']} of {h['attempts']}: {met(h['met'])}",
        f"  panel p50 within 2x of quiet  kept connection {p50['kept_ratio']}x, a "
        f"connection each {p50['fresh_ratio']}x: {met(p50['met'])}",
        f"  RSS at most 150 MB            peak VmRSS {rss['peak_VmRSS_mb']} MB, VmHWM "
        f"{rss['VmHWM_mb']} MB: {met(rss['met'])}",
    ]
    return "\n".join(lines)


def raise_nofile(need: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--attack",
        choices=sorted(ATTACKS),
        default="heads",
        help="what the attacker trickles (default heads)",
    )
    ap.add_argument(
        "--connections",
        type=int,
        help="attacking connections (default 2000; logins 560, login-heads 900)",
    )
    ap.add_argument(
        "--interval",
        type=float,
        help="seconds between one connection's sends (default 2; bodies and "
        "login-heads 1, logins 0.1)",
    )
    ap.add_argument(
        "--ramp",
        type=float,
        help="seconds over which the attacker opens its connections (default 4; "
        "logins 2, login-heads 20)",
    )
    ap.add_argument(
        "--line-bytes",
        type=int,
        default=1,
        metavar="N",
        help="heads: send a whole header line of N bytes per tick instead of one byte",
    )
    ap.add_argument(
        "--body-bytes",
        type=int,
        metavar="N",
        help="the Content-Length the attacker claims (default 1 MiB; logins and "
        "login-heads 4 KiB, the login route's cap)",
    )
    ap.add_argument(
        "--rate",
        type=int,
        metavar="B/S",
        help="body bytes a second each connection trickles (default 18 KiB; login-heads 0: none)",
    )
    ap.add_argument(
        "--server",
        choices=("gateway", "dashboard"),
        help="the server attacked (default gateway; logins and login-heads: the dashboard, always)",
    )
    ap.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="seconds per panel measure (kept, then fresh), per phase",
    )
    ap.add_argument(
        "--gateway",
        type=Path,
        default=GATEWAY,
        metavar="SCRIPT",
        help="gateway entry point to run (default: the checkout's gateway.py)",
    )
    ap.add_argument(
        "--serve",
        type=Path,
        default=SERVE,
        metavar="SCRIPT",
        help="dashboard entry point to run (default: the checkout's serve.py)",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the data folder under runs/")
    ap.add_argument("--attacker", metavar="HOST:PORT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name, value in ATTACKS[args.attack].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.attack in ("logins", "login-heads"):
        args.server = "dashboard"  # the login route is the dashboard's
    if args.attack == "login-heads":
        args.rate = 0
    return args


def main(argv=None) -> int:
    args = parse(argv)
    args.nofile = raise_nofile(args.connections + 1024)
    if args.attacker:
        host, _, port = args.attacker.rpartition(":")
        return attack(
            host.strip("[]"),
            int(port),
            args.attack,
            args.connections,
            args.interval,
            args.ramp,
            line=args.line_bytes,
            length=args.body_bytes,
            chunk=chunk_of(args),
            key=os.environ.get(KEY_ENV),
        )
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
