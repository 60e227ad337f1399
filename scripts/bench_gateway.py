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

``--only ledger`` compares the two ledgers on one machine: ms per panel (step 2, 0 ms seats, c=1)
and panels/s at c=1 and c=32, first with the JSONL files, then with the ledger in PostgreSQL
(``--database URL``, or without it a throwaway cluster from ``tests/pgcluster.py``). A database
URL given without ``--only ledger`` runs every step against that database.

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
    sys.path.insert(0, str(ROOT))
    import _bootstrap  # noqa: E401,E702,F401

import argparse
import collections
import gc
import json
import shutil
import subprocess
import threading
import time

from panelist.scripts.bench_gateway_report import (
    MERGER,
    direct_report,
    ledger_report,
    pick_report,
    report,
    top_frames,
)
from panelist.scripts.bench_gateway_rig import (
    GATEWAY,
    MEMBERS,
    PROFILES,
    PY,
    Rig,
    outcome_of,
    request_body_for_model,
    seats_of,
)
from panelist.scripts.benchkit import Client, log, pct, proc_cpu, self_cpu, url_of

FILL = ROOT / "scripts" / "fill_ledger.py"


class Bench(Rig):
    """The steps of the module docstring, each measured on the rig (``Rig``)."""

    # -- measurements ----------------------------------------------------------------------------
    def sequential(self, n: int, warmup: int, *, merged: bool = False) -> dict:
        """n panels one after another on one connection; wall time and added latency. Merged
        (step 8): the merged collection, and the merger's own seconds count as upstream time
        too (it runs after the seats); a reply without a merger that answered is a failure."""
        client = Client(*self.address, self.merged_body if merged else self.body)
        for _ in range(warmup):
            client.panel()
        gc.collect()
        wall, added, inside, outside, slowest, failed = [], [], [], [], [], 0
        merger_s: list[float] = []
        notes: collections.Counter[str] = collections.Counter()
        cpu0, gw0 = self_cpu(), proc_cpu(self.running.pid)
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
                    notes[
                        bench.get("note") or f"merger {merger.get('alias')}: {merger.get('status')}"
                    ] += 1
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
            "panels": len(wall),
            "failed": failed,
            "wall_ms": {"p50": ms(pct(wall, 50)), "p95": ms(pct(wall, 95)), "max": top(wall)},
            # merged: the slowest seat plus the merger
            "slowest_seat_ms": {"p50": ms(pct(slowest, 50)), "max": top(slowest)},
            "added_ms": {
                "p50": ms(pct(added, 50)),
                "p95": ms(pct(added, 95)),
                "p99": ms(pct(added, 99)),
                "max": top(added),
            },
            # bench.seconds (the gateway's own clock, from seating to the reply being built)
            # minus the slowest seat, and the client's time minus bench.seconds (HTTP in and
            # out, parsing, seating, writing the panel line, encoding the reply)
            "inside_ms_p50": ms(pct(inside, 50)),
            "outside_ms_p50": ms(pct(outside, 50)),
            "gateway_cpu_ms_per_panel": ms((proc_cpu(self.running.pid) - gw0) * 1000 / done),
            "client_cpu_ms_per_panel": ms((self_cpu() - cpu0) * 1000 / done),
            "elapsed_s": round(elapsed, 2),
        }
        if merged:
            out.update(
                merger_ms={"p50": ms(pct(merger_s, 50)), "max": top(merger_s)}, failures=dict(notes)
            )
        return out

    def picks(self, n: int, warmup: int) -> dict:
        """Step 9: n pick-mode panels one after another on one connection; the client's time
        minus the picked seat's own ``seconds``, and the seats still running behind each reply.
        A reply that picked another seat than the first member, or with no seat running behind
        it, counts as failed (the figure would not be what it says)."""
        client = Client(*self.address, self.pick_body)
        for _ in range(warmup):
            client.panel()
        gc.collect()
        added, inside, picked_s, behind = [], [], [], []
        failures: collections.Counter[str] = collections.Counter()
        gw0 = proc_cpu(self.running.pid)
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
            "panels": len(added),
            "failed": sum(failures.values()),
            "failures": dict(failures),
            "seat_latencies_ms": [round(x * 1000) for x in PROFILES["pick"]],
            "added_ms": {
                "p50": ms(pct(added, 50)),
                "p95": ms(pct(added, 95)),
                "p99": ms(pct(added, 99)),
                "max": ms(max(added, default=None)),
            },
            "inside_ms_p50": ms(pct(inside, 50)),
            "picked_seat_ms_p50": ms(pct(picked_s, 50)),
            "running_behind_p50": pct(behind, 50),
            # includes the slower seats finishing behind earlier replies and their logging
            "gateway_cpu_ms_per_panel": ms((proc_cpu(self.running.pid) - gw0) * 1000 / done),
        }

    def streams(self, n: int, warmup: int) -> dict:
        """Step 7: n streams one after another on one keep-alive connection (each runs to
        [DONE], so ~2 s apiece); when the first seat's text arrives, against that seat's own
        ``seconds``."""
        client = Client(*self.address, self.stream_body)
        for _ in range(warmup):
            client.stream()
        gc.collect()
        first, gap, head, role, after_role, fastest, end, failures = [], [], [], [], [], [], [], []
        for _ in range(n):
            s = client.stream()
            seats = (s["bench"] or {}).get("seats") or []
            if (
                s["error"]
                or s["first_text"] is None
                or s["role"] is None
                or len(seats) != 3
                or s["texts"] != 3
                or any(x["status"] != "ok" for x in seats)
            ):
                failures.append(
                    s["error"]
                    or f"status {s['status']}, {s['texts']} seat chunks, "
                    f"seats {[x.get('status') for x in seats]}"
                )
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
        stat = lambda v: {  # noqa: E731
            "p50": ms(pct(v, 50)),
            "p95": ms(pct(v, 95)),
            "max": ms(max(v, default=None)),
        }
        return {
            "streams": len(first),
            "failed": len(failures),
            "failures": failures[:5],
            "seat_latencies_ms": [round(x * 1000) for x in PROFILES["stream"]],
            "first_text_ms": stat(first),
            # the first text's time minus the fastest seat's own seconds (bench.seats)
            "gap_ms": stat(gap),
            "fastest_seat_ms": stat(fastest),
            # the head and the role chunk go out as soon as the panel is seated, before any
            # seat answers; role_to_text is the time between the role chunk and the first text
            "head_ms": stat(head),
            "role_ms": stat(role),
            "role_to_text_ms": stat(after_role),
            # [DONE] minus the slowest seat's seconds (recording the panel, the final chunk)
            "done_after_slowest_ms": stat(end),
        }

    def throughput(self, concurrency: int, duration: float, warmup: float) -> dict:
        """``concurrency`` threads asking back to back for warmup + duration seconds; only the
        panels finished inside the measured window count."""
        clients = [Client(*self.address, self.body) for _ in range(concurrency)]
        start = threading.Event()
        t_begin = [0.0]
        t_stop = [0.0]
        done: list[list] = [[] for _ in clients]  # (t_finished, seconds, outcome) per thread

        def work(client: Client, out: list) -> None:
            start.wait()
            end = t_stop[0]
            while time.perf_counter() < end:
                status, data, secs = client.panel()
                out.append((time.perf_counter(), secs, outcome_of(status, data)))
            client.close()

        threads = [
            threading.Thread(target=work, args=(c, o), daemon=True) for c, o in zip(clients, done)
        ]
        for t in threads:
            t.start()
        gc.collect()
        now = time.perf_counter()
        t_begin[0] = now + warmup
        t_stop[0] = t_begin[0] + duration
        start.set()
        time.sleep(max(0.0, t_begin[0] - time.perf_counter()))
        pids = {"gateway": self.running.pid, "upstream": self.sims[self.upstream_profile].pid}
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
            "concurrency": concurrency,
            "duration_s": duration,
            "panels_per_s": round(len(ok) / duration, 1),
            "failed": sum(v for k, v in failures.items() if k != "seat"),
            "seat_errors": failures.get("seat", 0),
            "failures": dict(failures),
            "requests": len(every),
            "latency_ms": {
                "p50": round(pct(lat, 50) or 0, 2),
                "p95": round(pct(lat, 95) or 0, 2),
                "max": round(max(lat) if lat else 0, 2),
            },
            "cpu_pct_of_one_core": cpu,
            "gateway_cpu_ms_per_panel": round((cpu1["gateway"] - cpu0["gateway"]) * 1000 / n, 3),
            "upstream_cpu_ms_per_panel": round((cpu1["upstream"] - cpu0["upstream"]) * 1000 / n, 3),
        }

    def fill(self, total: int) -> dict:
        """Top the logs up to ``total`` panels with fill_ledger.py (no gateway running)."""
        have = self.log_panels()
        if total <= have:
            return {"added": 0}
        log(f"filling the logs with {total - have:,} panels (fill_ledger.py) ...")
        t0 = time.perf_counter()
        out = subprocess.run(
            [PY, str(FILL), str(self.data), "--panels", str(total - have)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if out.returncode:
            raise RuntimeError(f"fill_ledger failed: {out.stderr[-2000:]}")
        return dict(
            json.loads(out.stdout.strip().splitlines()[-1]),
            added=total - have,
            wall_s=round(time.perf_counter() - t0, 1),
        )

    def versus_direct(self, n: int, warmup: int) -> dict:
        """Step 2b: a 3-seat panel against one direct call to the same 0 ms upstream, by the same
        client in the same run, alternating so both see the same machine. The figure is what
        the gateway adds: p50 of the panel minus p50 of the direct call."""
        sim = url_of(self.sims["zero"].first_line)
        direct = Client(*sim, request_body_for_model(MEMBERS[0]))
        panel = Client(*self.address, self.body)
        for _ in range(warmup):
            direct.panel()
            panel.panel()
        gc.collect()
        times: dict[str, list[float]] = {"direct": [], "panel": []}
        failed = 0
        gw0 = proc_cpu(self.running.pid)
        for _ in range(n):
            for name, client in (("direct", direct), ("panel", panel)):
                status, _, secs = client.panel()
                if status != 200:
                    failed += 1
                    continue
                times[name].append(secs * 1000)
        # what the gateway spent per pair: the panel and the work after its reply
        gateway_cpu = (proc_cpu(self.running.pid) - gw0) * 1000 / n
        direct.close()
        panel.close()
        p50 = {k: pct(v, 50) for k, v in times.items()}
        ms = lambda v: None if v is None else round(v, 3)  # noqa: E731
        return {
            "pairs": n,
            "failed": failed,
            "direct_ms_p50": ms(p50["direct"]),
            "panel_ms_p50": ms(p50["panel"]),
            "direct_ms_p95": ms(pct(times["direct"], 95)),
            "panel_ms_p95": ms(pct(times["panel"], 95)),
            "added_ms_p50": ms(None if None in p50.values() else p50["panel"] - p50["direct"]),
            "gateway_cpu_ms_per_panel": ms(gateway_cpu),
        }

    # -- the run ---------------------------------------------------------------------------------
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
        log(f"step 2b: a panel against one direct upstream call, 0 ms ({a.panels} pairs)")
        r["direct"] = self.versus_direct(a.panels, warmup=a.warmup)

        self.use("zero")
        log(f"step 8: merged-mode added latency, 0 ms seats and merger ({a.merged_panels} panels)")
        r["added_merged"] = self.sequential(a.merged_panels, warmup=a.warmup, merged=True)

        self.use("pick")
        log(f"step 9: pick mode, seats 0/250/500 ms ({a.pick_panels} panels)")
        r["pick"] = self.picks(a.pick_panels, warmup=a.warmup)

        if a.streams:
            self.use("stream")
            log(
                f"step 7: first seat's text in a stream, seats 50/500/2000 ms ({a.streams} "
                f"streams, ~{2 * (a.streams + 1)} s)"
            )
            r["stream_first_text"] = self.streams(a.streams, warmup=1)

        self.use("zero")
        r["throughput"] = []
        for c in (1, 8, 32, 64):
            log(f"step 3: throughput at concurrency {c} ({a.duration:g} s)")
            r["throughput"].append(self.throughput(c, a.duration, a.tp_warmup))
        r["sizes"] = [
            {
                "log_panels": self.log_panels(),
                "added": r["added_zero"],
                "memory": self.stop_gateway(),
                "bytes": self.log_bytes(),
            }
        ]

        for size in a.sizes:
            fill = self.fill(size)
            self.use("zero")
            log(f"gateway on {self.log_panels():,} panels")
            start = self.start_gateway()
            r["startup"].append(dict(start, log_panels=self.log_panels()))
            log(f"step 4: added latency, 0 ms seats ({a.panels} panels)")
            added = self.sequential(a.panels, warmup=a.warmup)
            r["sizes"].append(
                {
                    "log_panels": self.log_panels(),
                    "fill": fill,
                    "added": added,
                    "memory": self.stop_gateway(),
                    "bytes": self.log_bytes(),
                }
            )
        return r

    def run_direct(self) -> dict:
        """``--only direct``: step 2b, and throughput at c=8 (step 3), on one gateway."""
        a, r = self.args, self.results
        self.setup()
        self.use("zero")
        self.start_gateway()
        log(f"step 2b: a panel against one direct upstream call, 0 ms ({a.panels} pairs)")
        r["direct"] = self.versus_direct(a.panels, warmup=a.warmup)
        log(f"step 3: throughput at concurrency 8 ({a.duration:g} s)")
        r["throughput"] = [self.throughput(8, a.duration, a.tp_warmup)]
        r["memory"] = self.stop_gateway()
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

    def run_ledger(self) -> dict:
        """``--only ledger``, one ledger: step 2 (0 ms seats), then throughput at c=1 and 32."""
        a, r = self.args, self.results
        self.setup()
        self.use("zero")
        self.start_gateway()
        log(f"step 2: added latency, 0 ms seats ({a.panels} panels)")
        before = self.transactions()
        r["added_zero"] = self.sequential(a.panels, warmup=a.warmup)
        if before is not None:
            done = a.panels + a.warmup
            after = self.transactions()
            assert after is not None  # the same database that counted ``before``
            r["added_zero"]["transactions_per_panel"] = round((after - before) / done, 2)
        r["throughput"] = []
        for c in (1, 32):
            log(f"step 3: throughput at concurrency {c} ({a.duration:g} s)")
            r["throughput"].append(self.throughput(c, a.duration, a.tp_warmup))
        r["memory"] = self.stop_gateway()
        return r

    def transactions(self) -> int | None:
        """Transactions committed in the database so far (each statement outside a
        transaction is one, so this counts the ledger's and limits' writes and reads); the
        server publishes its counts lazily, so this waits for them first."""
        if not self.database:
            return None
        import psycopg

        time.sleep(1.5)  # the server publishes its counts about once a second
        with psycopg.connect(self.database, autocommit=True) as conn:
            # the instance's own background reads (the listener's reconnects, config) land
            # in the count too, a few in a run of hundreds of panels
            row = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                "WHERE datname = current_database()"
            ).fetchone()
            assert row is not None  # the current database always has its row
            return row[0]

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
                [
                    spy,
                    "record",
                    "--format",
                    "raw",
                    "--rate",
                    "1000",
                    "--threads",
                    "--duration",
                    str(int(self.args.duration)),
                    "--pid",
                    str(self.running.pid),
                    "--output",
                    str(path),
                    *extra,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            time.sleep(1.0)  # py-spy attaches
            t_end = time.perf_counter() + self.args.duration - 1.5
            client = Client(*self.address, self.body)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip log steps above 100,000 panels")
    ap.add_argument(
        "--panels-max",
        type=int,
        default=1_000_000,
        metavar="N",
        help="largest log for steps 4-6 (default 1,000,000; 0 skips them)",
    )
    ap.add_argument("--panels", type=int, default=500, help="panels per added-latency run")
    ap.add_argument("--parallel-panels", type=int, default=20)
    ap.add_argument(
        "--merged-panels",
        type=int,
        default=300,
        help="panels in the merged-mode added-latency run (step 8)",
    )
    ap.add_argument(
        "--pick-panels", type=int, default=300, help="panels in the pick-mode run (step 9)"
    )
    ap.add_argument(
        "--only",
        choices=("pick", "direct", "ledger"),
        help="run one step alone: pick (step 9, beside step 2's 0 ms figure), "
        "direct (step 2b and throughput at c=8), ledger (files against the "
        "database: step 2 and throughput at c=1 and 32)",
    )
    ap.add_argument(
        "--database",
        metavar="URL",
        help="keep the ledger in this PostgreSQL database (with --only ledger, "
        "without it: a throwaway cluster)",
    )
    ap.add_argument(
        "--streams",
        type=int,
        default=20,
        help="streams for step 7 (each ~2 s: its slowest seat takes 2000 ms); 0 skips",
    )
    ap.add_argument("--warmup", type=int, default=50, help="warm-up panels before each run")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per throughput run")
    ap.add_argument("--tp-warmup", type=float, default=1.0, help="warm-up seconds per run")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument(
        "--gateway",
        type=Path,
        default=GATEWAY,
        metavar="SCRIPT",
        help="gateway entry point to run (default: the checkout's gateway.py); "
        "for A/B runs of a patched copy",
    )
    ap.add_argument("--keep", action="store_true", help="keep the data folder under runs/")
    ap.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="only profile the gateway with py-spy (0 ms seats, c=1)",
    )
    args = ap.parse_args(argv)
    top = min(args.panels_max, 100_000) if args.quick else args.panels_max
    args.sizes = sorted({s for s in (100_000, top) if 0 < s <= top})

    if args.only == "ledger":
        return compare_ledgers(args)
    args.database_url = args.database
    bench = Bench(args)
    interrupted = False
    try:
        if args.profile:
            result = bench.profile(args.profile)
            print(json.dumps(result, indent=1))
            return 0
        result = {"pick": bench.run_pick, "direct": bench.run_direct}.get(args.only, bench.run)()
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
    elif args.only == "direct":
        print(direct_report(result))
    else:
        print(report(result, args))
    return 0


def compare_ledgers(args) -> int:
    """``--only ledger``: the same steps on the files, then on the database."""
    cluster = None
    url = args.database
    if url is None:
        sys.path.insert(0, str(ROOT / "tests"))
        import pgcluster

        log("starting a throwaway PostgreSQL cluster")
        cluster = pgcluster.start_cluster()
    results = {}
    try:
        for name in ("files", "database"):
            if name == "files":
                args.database_url = None
            elif url:
                args.database_url = url
            else:
                assert cluster is not None  # started above, as no --database was given
                args.database_url = cluster.create_database()
            log(f"ledger: {name}")
            bench = Bench(args)
            try:
                results[name] = bench.run_ledger()
            finally:
                bench.close()
    except KeyboardInterrupt:
        log("interrupted; processes stopped")
        return 130
    finally:
        if cluster is not None:
            cluster.stop()
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(ledger_report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
