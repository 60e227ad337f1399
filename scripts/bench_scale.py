"""Benchmark several gateway instances on one PostgreSQL, under random instance kills. It prints
figures; it asserts nothing.

    python scripts/bench_scale.py [--instances 4] [--panels 20000] [--concurrency 32]
                                  [--kill-every 5] [--baseline-panels 3000] [--rpm 60]
                                  [--chaos] [--stop-for 2] [--database URL] [--keep] [--json]

Each instance is its own process (``gateway.py --data DIR --database URL --port P``, keys
required), with its own data folder, as a host would have; one simulated upstream
(``scripts/sim_upstream.py``, three models at 0 ms) serves them all. Without ``--database`` a
throwaway cluster is started (``tests/pgcluster.py``: the distribution's PostgreSQL, a temporary
folder, a free port) and removed at the end.

1. Baseline: one instance, ``--baseline-panels`` panels at ``--concurrency``: panels/s.
2. Scale: ``--instances`` instances behind a round-robin client (a connection refused moves the
   request to the next instance; a request cut by a kill is not retried), ``--panels`` panels
   at ``--concurrency``, each answered panel given a verdict through the next instance. Every
   ``--kill-every`` seconds one instance, drawn at random, gets SIGKILL and is started again on
   its port. Meanwhile a probe measures verdict-to-seating across instances (a panel through
   one instance, seen owed on another, its verdicts given through the first, then the time
   until the other no longer owes them), and a key limited to ``--rpm`` requests a minute asks
   without pause, spread over the instances.
3. ``--chaos``: the faults take turns instead of kills alone: SIGKILL of an instance (started
   again), SIGSTOP of one for ``--stop-for`` seconds (then SIGCONT: a host that stalls while it
   may hold a transaction open), and a cut of about half of the instances' database connections
   (``pg_terminate_backend``). Beside the load, four threads ask a collection of one model
   served by an in-process simulated upstream and limited to ``SLOT_LIMIT`` calls at once.

Printed: duplicate panel ids (answered twice, or twice in the table), lost records (answered
panels, their seat rows and verdicts missing from the database; panels cut by a kill and
written anyway are counted apart, they are not lost), the database's time per panel (sampled
active backend time, and its CPU when the cluster is local) and the share of
``pg_stat_activity`` samples in which a backend waited on a lock (``pgactivity``: target 5% or
less), for each phase; requests that waited longer than the documented database bound
(``pgbounds``: statement + grace) plus 1 s, not counting those sent to an instance while it
was stopped; the most calls of the limited model in flight at once beyond its limit, the limited key's admitted requests per minute against its
rpm, verdict-to-seating p50/p95, panels/s of each phase and their ratio, and the CPU used by
each kind of process, the database's included, as a share of the machine: when PostgreSQL and
the instances share a few cores, the ratio is bound by the cores, not by the design.
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
import itertools
import json
import os
import random
import shutil
import tempfile
import threading
import time

from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server.keys import Keys
from panelist.metrics.store import pg
from panelist.metrics.store.pgbounds import Bounds
from panelist.metrics.upstream.sim import SimUpstream
from panelist.scripts.pgactivity import Sampler
from panelist.scripts.bench_gateway_rig import MEMBERS, PY, SIM, request_body
from panelist.scripts.bench_scale_cluster import Instance, RoundRobin
from panelist.scripts.benchkit import TICKS, Child, log, pct, proc_cpu, self_cpu

CONFIG = ("roster.json", "collections.json", "keys.json", "gateway.json")
SLOT_LIMIT = 2  # calls at once allowed to the chaos run's limited model
SLOT_ASKERS = 4  # threads asking it, so that its limit is always pressed
CUT = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name LIKE 'panelist%%' "
    "AND pid <> pg_backend_pid() AND random() < 0.5"
)


def cluster_cpu(postmaster: int | None) -> float | None:
    """CPU seconds of a PostgreSQL cluster so far: the postmaster, the backends it reaped
    (cutime, cstime) and the ones alive."""
    if postmaster is None:
        return None
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == postmaster:
            total += sum(int(x) for x in fields[11:15]) / TICKS
        elif int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def machine_cpu() -> float:
    """CPU seconds the whole machine was busy so far, every core and every process (anyone
    else's included), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return (sum(fields[:8]) - idle) / TICKS


class Bench:
    def __init__(self, args):
        self.args = args
        ROOT.joinpath("runs").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=ROOT / "runs"))
        self.cluster = None
        self.postmaster = None
        self.sim: Child | None = None
        self.instances: list[Instance] = []
        self.body = request_body()
        self.probed: list[str] = []  # the seating probe's panels and verdicts
        self.probed_verdicts: list[str] = []
        self.slot_sim: SimUpstream | None = None
        self.sampler: Sampler | None = None
        self.stopped: list[tuple[int, float, float]] = []  # (instance, from, to): SIGSTOPped
        self.timings: list[tuple[float, float, int, int]] = []  # (sent, answered, inst, status)
        self.seats: dict[str, int] = {}  # answered panel -> seats in its reply

    # -- setup --------------------------------------------------------------------------------
    def database(self) -> str:
        if self.args.database:
            return pg.check_url(self.args.database)
        sys.path.insert(0, str(ROOT / "tests"))
        import pgcluster

        log("starting a throwaway PostgreSQL cluster")
        self.cluster = pgcluster.start_cluster()
        self.postmaster = int((self.cluster.data / "postmaster.pid").read_text().split()[0])
        return self.cluster.create_database()

    def setup(self) -> None:
        self.url = self.database()
        models = self.work / "sim.json"
        models.write_text(json.dumps({m: {"latency": 0.0, "window": 128_000} for m in MEMBERS}))
        self.sim = Child("sim", [PY, str(SIM), "--port", "0", "--models", str(models)], self.work)
        first = open_home(self.work / "host0", database=self.url)
        limits = first.file("gateway.json")
        doc = json.loads(limits.read_text())
        limits.write_text(json.dumps(dict(doc, max_explorers=0), indent=2) + "\n")
        roster = Roster(first)
        roster.add_endpoint("sim", self.sim.first_line, by="bench")
        for i, m in enumerate(MEMBERS, 1):
            roster.add_model(m, "sim", family=f"fam{i}", context=128_000, by="bench")
        Collections(first).save(
            roster.view(), "trio", list(MEMBERS), description="benchmark trio", by="bench"
        )
        if self.args.chaos:
            self.slot_sim = SimUpstream({"slotted": {"latency": 0.2}}).start()
            roster.add_endpoint("slots", self.slot_sim.url, by="bench")
            roster.add_model("slotted", "slots", family="fam-slot", context=128_000, by="bench")
            roster.set_limits("model", "slotted", {"max_concurrent": SLOT_LIMIT}, by="bench")
            Collections(first).save(
                roster.view(),
                "slotted",
                ["slotted"],
                description="one model with a slot limit",
                by="bench",
            )
        keys = Keys(first)
        self.load_key, _ = keys.create("load", by="bench")
        self.probe_key, _ = keys.create("probe", by="bench")
        self.limited_key, _ = keys.create("limited", rpm=self.args.rpm, by="bench")
        env = dict(os.environ, PANELIST_REQUIRE_KEYS="1")
        env.pop("PANELIST_DATABASE_URL", None)
        for n in range(self.args.instances):
            data = self.work / f"host{n}"
            if n:  # every host is configured alike
                other = open_home(data, database=self.url)
                for name in CONFIG:
                    shutil.copy(first.file(name), other.file(name))
            self.instances.append(Instance(f"gateway-{n}", data, self.work, self.url, env))

    def close(self) -> None:
        for inst in self.instances:
            inst.stop()
        if self.sim is not None:
            self.sim.stop()
        if self.slot_sim is not None:
            self.slot_sim.stop()
        if self.cluster is not None:
            self.cluster.close()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")

    # -- load ---------------------------------------------------------------------------------
    def load(self, instances: list[Instance], panels: int, verdicts: bool) -> dict:
        """``panels`` panels at the concurrency over ``instances``; what was answered."""
        rr = RoundRobin(instances, self.load_key)
        left = itertools.count()
        answered, verdicts_ok = [], []
        outcomes: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()

        def work() -> None:
            while next(left) < panels:
                sent = time.monotonic()
                status, data, i = rr.send("POST", "/v1/chat/completions", self.body)
                with lock:
                    self.timings.append((sent, time.monotonic(), i, status))
                if status != 200:
                    with lock:
                        outcomes["cut by a kill" if status == 0 else f"http {status}"] += 1
                    continue
                bench = json.loads(data)["bench"]
                with lock:
                    answered.append(bench["panel"])
                    self.seats[bench["panel"]] = len(bench["seats"])
                    outcomes["ok"] += 1
                if not verdicts:
                    continue
                call = bench["seats"][0]["call"]
                body = json.dumps({"call": call, "useful": random.random() < 0.5}).encode()
                status, data, _ = rr.send("POST", "/bench/verdict", body, at=i + 1)
                with lock:
                    if status == 200 and json.loads(data).get("written"):
                        verdicts_ok.append(call)
                    else:
                        outcomes["verdict cut" if status == 0 else f"verdict http {status}"] += 1
                        if os.environ.get("BENCH_DEBUG"):
                            log(f"verdict {status}: {data[:300]!r}")

        threads = [threading.Thread(target=work, daemon=True) for _ in range(self.args.concurrency)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        return {
            "answered": answered,
            "verdicts": verdicts_ok,
            "outcomes": dict(outcomes),
            "seconds": seconds,
            "panels_per_s": len(answered) / seconds,
        }

    def killer(self, stop: threading.Event, kills: list, faults: collections.Counter) -> None:
        """A fault every ``--kill-every`` seconds: kills alone, or with ``--chaos`` a kill, a
        stop and a cut of connections in turn."""
        rng = random.Random(7)
        turns = itertools.cycle(("kill", "stop", "cut") if self.args.chaos else ("kill",))
        admin = pg.Database(self.url)
        try:
            while not stop.wait(self.args.kill_every):
                fault = next(turns)
                n = rng.randrange(len(self.instances))
                inst = self.instances[n]
                if fault == "kill":
                    inst.kill()
                    t0 = time.perf_counter()
                    inst.start()
                    kills.append((inst.name, time.perf_counter() - t0))
                elif fault == "stop":
                    t0 = time.monotonic()
                    inst.pause(True)
                    try:
                        stop.wait(self.args.stop_for)
                    finally:
                        inst.pause(False)
                        self.stopped.append((n, t0, time.monotonic()))
                else:
                    try:
                        faults["connections cut"] += admin.execute(CUT)[0][0]
                    except Exception:
                        faults["cut refused"] += 1
                faults[fault] += 1
        finally:
            admin.close()

    def slot_probe(self, stop: threading.Event, outcomes: collections.Counter) -> None:
        """Ask the limited model's collection without pause, from ``SLOT_ASKERS`` threads."""
        rr = RoundRobin(self.instances, self.probe_key)
        body = json.dumps(
            {"model": "bench/slotted", "messages": [{"role": "user", "content": "Review: x = 1"}]}
        ).encode()

        def ask() -> None:
            while not stop.is_set():
                sent = time.monotonic()
                status, data, i = rr.send("POST", "/v1/chat/completions", body)
                self.timings.append((sent, time.monotonic(), i, status))
                outcomes[status] += 1
                if status == 200:  # counted with the answered panels, seat rows and all
                    bench = json.loads(data)["bench"]
                    self.probed.append(bench["panel"])
                    self.seats[bench["panel"]] = len(bench["seats"])

        askers = [threading.Thread(target=ask, daemon=True) for _ in range(SLOT_ASKERS)]
        for t in askers:
            t.start()
        for t in askers:
            t.join()

    def rate_probe(self, stop: threading.Event, seen: list) -> None:
        rr = RoundRobin(self.instances, self.limited_key)
        while not stop.is_set():
            at = time.time()
            status, _, _ = rr.send("GET", "/v1/models")
            seen.append((at, status))
            stop.wait(0.1)

    def seating_probe(self, stop: threading.Event, lags: list, misses: list) -> None:
        """Verdict-to-seating across instances, one panel at a time."""
        rr = RoundRobin(self.instances, self.probe_key)
        n = len(self.instances)
        for turn in itertools.count():
            if stop.is_set():
                return
            a, b = turn % n, (turn + 1) % n
            status, data, a = rr.send("POST", "/v1/chat/completions", self.body, at=a)
            if status != 200:
                continue
            bench = json.loads(data)["bench"]
            self.probed.append(bench["panel"])
            calls = {s["call"] for s in bench["seats"]}
            # b must know the panel first, or "not owed" would mean "not seen yet"
            if not self._until(rr, b, lambda owed: calls <= owed, stop):
                misses.append("never seen owed")
                continue
            starts, cut = self.instances[b].starts, False
            for call in calls:
                body = json.dumps({"call": call, "useful": True}).encode()
                status, data, _ = rr.send("POST", "/bench/verdict", body, at=a)
                t0 = time.perf_counter()
                if status == 200 and json.loads(data).get("written"):
                    self.probed_verdicts.append(call)
                else:
                    cut = True
            if cut:
                misses.append("a verdict cut by a kill")
                continue
            seen = self._until(rr, b, lambda owed: not (calls & owed), stop)
            if stop.is_set():
                return  # the run ended while this probe waited: no figure either way
            if self.instances[b].starts != starts:
                misses.append("the other instance restarted meanwhile")
            elif seen:
                lags.append(time.perf_counter() - t0)
            else:
                misses.append("verdict never seen")

    @staticmethod
    def _until(rr: RoundRobin, at: int, done, stop: threading.Event, patience: float = 30.0):
        end = time.perf_counter() + patience
        while time.perf_counter() < end and not stop.is_set():
            status, data, i = rr.send("GET", "/bench/pending?limit=50", at=at)
            if status == 200 and i == at % len(rr.instances):
                owed = {o["call"] for o in json.loads(data)["data"]}
                if done(owed):
                    return True
            time.sleep(0.01)
        return False

    # -- the run ------------------------------------------------------------------------------
    def cpu(self) -> dict:
        if self.sim is None:
            raise RuntimeError("setup() starts the simulated upstream first")
        return {
            "gateways": sum(i.cpu() for i in self.instances),
            "sim": proc_cpu(self.sim.pid),
            "client": self_cpu(),
            "database": cluster_cpu(self.postmaster),
            "machine busy": machine_cpu(),
        }

    def run(self) -> dict:
        a = self.args
        self.setup()
        first = self.instances[0]
        first.start()
        self.sampler = Sampler(pg.Database(self.url), a.sample_every).start()
        log(f"baseline: 1 instance, {a.baseline_panels} panels at c={a.concurrency}")
        self.sampler.phase("baseline")
        cpu_b0 = cluster_cpu(self.postmaster)
        base = self.load([first], a.baseline_panels, verdicts=True)
        self.sampler.phase(None)
        base["database_cpu"] = _less(cluster_cpu(self.postmaster), cpu_b0)
        self.timings.clear()
        for inst in self.instances[1:]:
            inst.start()
        log(
            f"scale: {a.instances} instances, {a.panels} panels at c={a.concurrency}, a kill "
            f"every {a.kill_every:g} s"
        )
        stop = threading.Event()
        kills: list[tuple[str, float]] = []
        rates: list[tuple[float, int]] = []
        lags: list[float] = []
        misses: list[str] = []
        faults: collections.Counter = collections.Counter()
        slots: collections.Counter = collections.Counter()
        helpers = [
            threading.Thread(target=self.killer, args=(stop, kills, faults), daemon=True),
            threading.Thread(target=self.rate_probe, args=(stop, rates), daemon=True),
            threading.Thread(target=self.seating_probe, args=(stop, lags, misses), daemon=True),
        ]
        if a.chaos:
            helpers.append(
                threading.Thread(target=self.slot_probe, args=(stop, slots), daemon=True)
            )
        self.sampler.phase("scale")
        cpu0, t0 = self.cpu(), time.perf_counter()
        for t in helpers:
            t.start()
        scale = self.load(self.instances, a.panels, verdicts=True)
        stop.set()
        for t in helpers:
            t.join()
        cpu1, wall = self.cpu(), time.perf_counter() - t0
        self.sampler.stop()
        scale["database_cpu"] = _less(cpu1["database"], cpu0["database"])
        result = self.figures(base, scale, kills, rates, lags, misses, cpu0, cpu1, wall)
        result.update(self.chaos_figures(base, scale, faults, slots))
        return result

    def chaos_figures(self, base, scale, faults, slots) -> dict:
        """The database's time per panel and its lock waits, per phase; the waits over the
        bound; the slot limit's excess; seat rows lost."""
        bound = Bounds.of_env().wait
        assert self.sampler is not None  # run() started it before any figures

        def stopped_during(i, sent, got) -> bool:
            return any(n == i and start < got and sent < end for n, start, end in self.stopped)

        over = [
            got - sent
            for sent, got, i, _ in self.timings
            if got - sent > bound + 1 and not stopped_during(i, sent, got)
        ]
        phases = {}
        for name, phase in (("baseline", base), ("scale", scale)):
            tally = self.sampler.tallies.get(name)
            n = len(phase["answered"]) or 1
            figures = tally.figures() if tally else {}
            phases[name] = dict(
                figures,
                panels_per_s=round(phase["panels_per_s"], 1),
                active_ms_per_panel=round(1000 * tally.active_s / n, 2) if tally else None,
                cpu_ms_per_panel=round(1000 * phase["database_cpu"] / n, 2)
                if phase["database_cpu"] is not None
                else None,
            )
        db = pg.Database(self.url)
        try:
            rows = dict(
                db.execute(
                    "SELECT panel, count(*) FROM evidence WHERE kind = 'seat' GROUP BY panel"
                )
            )
        finally:
            db.close()
        lost_seats = sum(max(0, n - rows.get(p, 0)) for p, n in self.seats.items())
        peak = self.slot_sim.peak.get("slotted", 0) if self.slot_sim else None
        return {
            "database": phases,
            "bound_s": bound,
            "waited_over_bound": {
                "n": len(over),
                "worst_s": round(max(over, default=0), 1),
                "timed": len(self.timings),
            },
            "faults": dict(faults),
            "lost_seat_rows": lost_seats,
            "slots": {
                "limit": SLOT_LIMIT,
                "peak": peak,
                "over": max(0, peak - SLOT_LIMIT) if peak is not None else None,
                "asked": dict(slots),
            }
            if self.args.chaos
            else None,
        }

    def figures(self, base, scale, kills, rates, lags, misses, cpu0, cpu1, wall) -> dict:
        a = self.args
        db = pg.Database(self.url)
        try:
            stored = [p for (p,) in db.execute("SELECT panel FROM panels")]
            voted = {c for (c,) in db.execute("SELECT DISTINCT call FROM verdicts")}
        finally:
            db.close()
        answered = base["answered"] + scale["answered"] + self.probed
        verdicts = base["verdicts"] + scale["verdicts"] + self.probed_verdicts
        stored_set = set(stored)
        per_minute = collections.Counter(int(at // 60) for at, s in rates if s == 200)
        cores = os.cpu_count() or 1
        used = {k: (cpu1[k] - cpu0[k]) if cpu0[k] is not None else None for k in cpu0}
        ours = sum(v for k, v in used.items() if k != "machine busy" and v is not None)
        used["anyone else"] = max(0.0, used["machine busy"] - ours)
        share = {
            k: round(v / (wall * cores) * 100, 1) if v is not None else None
            for k, v in used.items()
        }
        return {
            "instances": a.instances,
            "concurrency": a.concurrency,
            "cores": cores,
            "baseline": {
                "panels": len(base["answered"]),
                "seconds": round(base["seconds"], 1),
                "panels_per_s": round(base["panels_per_s"], 1),
                "outcomes": base["outcomes"],
            },
            "scale": {
                "panels": len(scale["answered"]),
                "seconds": round(scale["seconds"], 1),
                "panels_per_s": round(scale["panels_per_s"], 1),
                "outcomes": scale["outcomes"],
                "kills": len(kills),
                "restart_s_p50": round(pct([s for _, s in kills], 50) or 0, 2),
            },
            "ratio": round(scale["panels_per_s"] / base["panels_per_s"], 2)
            if base["panels_per_s"]
            else None,
            "duplicate_panel_ids": {
                "answered": len(answered) - len(set(answered)),
                "stored": len(stored) - len(stored_set),
            },
            "lost": {
                "panels": len(set(answered) - stored_set),
                "verdicts": len(set(verdicts) - voted),
            },
            "written_but_cut": len(stored_set - set(answered)),
            "rate": {
                "rpm": a.rpm,
                "max_admitted_in_a_minute": max(per_minute.values(), default=0),
                "minutes": len(per_minute),
                "asked": len(rates),
                "refused_429": sum(1 for _, s in rates if s == 429),
                "other": sum(1 for _, s in rates if s not in (200, 429)),
            },
            "verdict_to_seating_s": {
                "n": len(lags),
                "p50": round(pct(lags, 50) or 0, 3),
                "p95": round(pct(lags, 95) or 0, 3),
                "misses": collections.Counter(misses),
            },
            "cpu_share_of_machine_pct": share,
        }


def _less(a, b):
    return a - b if a is not None and b is not None else None


def report(r: dict) -> str:
    rate = r["rate"]
    lines = [
        f"baseline, 1 instance: {r['baseline']['panels']} panels in "
        f"{r['baseline']['seconds']} s = {r['baseline']['panels_per_s']} panels/s",
        f"{r['instances']} instances, {r['scale']['kills']} kills (restart p50 "
        f"{r['scale']['restart_s_p50']} s): {r['scale']['panels']} panels in "
        f"{r['scale']['seconds']} s = {r['scale']['panels_per_s']} panels/s "
        f"(x{r['ratio']} one instance); outcomes {r['scale']['outcomes']}",
        f"duplicate panel ids: {r['duplicate_panel_ids']['answered']} answered, "
        f"{r['duplicate_panel_ids']['stored']} stored",
        f"lost records: {r['lost']['panels']} panels, {r['lost']['verdicts']} verdicts "
        f"(written but never answered, cut by a kill: {r['written_but_cut']})",
        f"rate held globally: key at {rate['rpm']} rpm admitted at most "
        f"{rate['max_admitted_in_a_minute']} in a minute over {rate['minutes']} minute(s) "
        f"({rate['asked']} asked, {rate['refused_429']} refused with 429, {rate['other']} "
        "other)",
        f"verdict to seating across instances: p50 {r['verdict_to_seating_s']['p50']} s, p95 "
        f"{r['verdict_to_seating_s']['p95']} s over {r['verdict_to_seating_s']['n']} probes "
        f"(misses: {dict(r['verdict_to_seating_s']['misses'])})",
        "CPU share of the machine ("
        + str(r["cores"])
        + " cores): "
        + ", ".join(
            f"{k} {v}%" if v is not None else f"{k} n/a (an external database)"
            for k, v in r["cpu_share_of_machine_pct"].items()
        ),
    ]
    for name, d in r["database"].items():
        lines.append(
            f"database, {name} at {d['panels_per_s']} panels/s: active backend time "
            f"{d['active_ms_per_panel']} ms a panel, CPU "
            f"{d['cpu_ms_per_panel'] if d['cpu_ms_per_panel'] is not None else 'n/a'} ms a "
            f"panel; a backend waited on a lock in {d.get('lock_share_pct')}% of "
            f"{d.get('samples')} samples ({d.get('backend_lock_share_pct')}% of active "
            f"backends seen; kinds {d.get('lock_kinds')})"
        )
    w = r["waited_over_bound"]
    lines.append(
        f"requests that waited over the database bound + 1 s ({r['bound_s']:g} + 1 s), "
        f"instances stopped meanwhile aside: {w['n']} of {w['timed']} (worst "
        f"{w['worst_s']} s); seat rows lost: {r['lost_seat_rows']}; faults "
        f"{r['faults']}"
    )
    if r["slots"] is not None:
        s = r["slots"]
        lines.append(
            f"calls over a slot limit: {s['over']} (most in flight at once {s['peak']}"
            f", limit {s['limit']}; asked {s['asked']})"
        )
    if (r["cpu_share_of_machine_pct"]["anyone else"] or 0) > 20:
        lines.append(
            'note: other processes kept the machine busy during the run ("anyone '
            'else" above): the panels/s and latencies are theirs to share, not this '
            "design's bound"
        )
    if r["cores"] < 2 * r["instances"]:
        lines.append(
            f"note: {r['instances']} instances, their database, the upstream and this client "
            f"share {r['cores']} cores, so instances add no cores: the ratio to one instance is "
            "bound by the machine here (a 3x needs the instances on cores of their own, with "
            "PostgreSQL's CPU share above as the bound that remains)"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--instances", type=int, default=4)
    p.add_argument("--panels", type=int, default=20_000)
    p.add_argument(
        "--baseline-panels",
        type=int,
        default=None,
        help="panels of the one-instance run (default: --panels / 5, at most 3000)",
    )
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--kill-every", type=float, default=5.0, help="seconds between kills")
    p.add_argument("--rpm", type=int, default=60, help="the limited key's requests a minute")
    p.add_argument(
        "--chaos",
        action="store_true",
        help="SIGSTOP and connection cuts in turn with the kills; a slot-limited model",
    )
    p.add_argument(
        "--stop-for",
        type=float,
        default=2.0,
        help="seconds a stopped instance stays stopped (--chaos)",
    )
    p.add_argument(
        "--sample-every",
        type=float,
        default=0.05,
        help="seconds between two samples of pg_stat_activity",
    )
    p.add_argument(
        "--database",
        metavar="URL",
        help="an existing database (default: a throwaway cluster of the distribution's PostgreSQL)",
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder under runs/")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.instances < 1 or args.panels < 1 or args.concurrency < 1:
        p.error("--instances, --panels and --concurrency must be at least 1")
    if args.baseline_panels is None:
        args.baseline_panels = max(1, min(3000, args.panels // 5))
    bench = Bench(args)
    try:
        result = bench.run()
    finally:
        bench.close()
    print(json.dumps(result, indent=2, default=str) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
