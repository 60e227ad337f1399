"""A concurrency slot on PostgreSQL is a lease (``upstream.admitdb``): a row with an expiry on the
database's clock, renewed while its call runs. It outlives its connection (cut or terminated,
the slot stays taken while the call runs, and the upstream never sees more calls than the
limit), it ends for a holder that stops renewing (a frozen process's slot is taken over after
one lease period), and a lease lost that way is counted again, never twice, once its holder
wakes. A real cluster (``pgcluster``), gateways called in process, the simulated upstream, which
counts the calls it works on at once, and holders in other processes (``admission_worker.py``)."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import PATIENCE, TEST_MODELS, set_limits, wait_until
from inprocess import call
from panelist.gateway import make_gateway
from panelist.metrics.errors import AtLimit, ConfigInvalid
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store import pglease
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.upstream.admitdb import DatabaseStore

WORKER = Path(__file__).resolve().parent / "admission_worker.py"
ASK = {"model": "bench/solo", "messages": [{"role": "user", "content": "Review: x = 1"}]}


def make_home(path, url, upstream="http://127.0.0.1:9/v1"):
    """A data folder on the database: the test models on endpoint ``sim`` at ``upstream``,
    collection ``solo`` (fast alone, no explorers)."""
    home = open_home(path, database=url)
    roster = Roster(home)
    roster.add_endpoint("sim", upstream)
    for alias in TEST_MODELS:
        roster.add_model(alias, "sim", family=alias, context=100_000)
    Collections(home).save(roster.view(), "solo", ["fast"], description="One reviewer")
    set_limits(home, max_explorers=0, seat_timeout=PATIENCE)
    return home


def limit(homes, **limits):
    for home in homes:  # every host is configured alike
        Roster(home).set_limits("endpoint", "sim", limits)


def terminate(url: str, application: str) -> int:
    """``pg_terminate_backend`` every connection of ``application`` to ``url``'s database, as
    an operator or a failover would; how many were cut."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
            "AND application_name = %s AND pid <> pg_backend_pid()",
            (name, application),
        ).fetchall()
    return len(rows)


def live_leases(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM admission_leases WHERE until > clock_timestamp()"
        ).fetchone()[0]


class Instance:
    """A gateway built and never served, its routes called in process (``inprocess``)."""

    def __init__(self, server):
        self.server = server

    def post(self, path, body):
        status, head, reply = call(self.server, "POST", path, body)
        return status, reply, head


@pytest.fixture()
def two(tmp_path, sim, pg_url):
    """Two gateways on one database and the one simulated upstream, the endpoint taking two
    calls at once: ``(a, b, home_a, home_b)``."""
    homes = [make_home(tmp_path / name, pg_url, sim.url) for name in ("a", "b")]
    limit(homes, max_concurrent=2)
    made = [make_gateway(home, env={}) for home in homes]
    try:
        yield Instance(made[0]), Instance(made[1]), homes[0], homes[1]
    finally:
        sim.release("fast")
        for server in made:
            server.close()


def in_thread(fn, *args):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("result", fn(*args)))
    t.start()
    return t, box


def test_a_slot_stays_taken_when_its_connection_is_terminated(two, sim, pg_url):
    a, b, _, _ = two
    sim.script("fast", hold_after=1)  # calls after the first wait until the test releases them
    store = a.server.panels.admission.store
    assert b.post("/v1/chat/completions", ASK)[0] == 200
    asked = [in_thread(a.post, "/v1/chat/completions", ASK) for _ in range(2)]
    assert sim.wait_held("fast", 2, PATIENCE), "the two calls never reached the upstream"
    # every admission connection of every instance is cut while the calls run
    assert terminate(pg_url, "panelist-admission") >= 1
    renewed = store.renewer.passes
    assert store.renewer.wait_passes(renewed + 2, PATIENCE), "the leases were never renewed"
    # the slots are still taken, on a new connection: the other instance finds no room
    theirs = b.server.panels.admission
    assert not theirs.has_room("sim", "fast")
    assert theirs.status("endpoint", "sim")["running"] == 2
    assert a.server.panels.admission.status("endpoint", "sim")["running"] == 2
    assert store.reinstated == 0  # never lost: the rows outlived the connections
    # so its call waits for a slot instead of going out beside the two
    waiting = in_thread(b.post, "/v1/chat/completions", ASK)
    assert wait_until(lambda: theirs.waiting("sim") == 1), "the other call never queued"
    assert sim.count("fast") == 3
    sim.release("fast")
    for t, box in [*asked, waiting]:
        t.join(PATIENCE * 2)
        assert box["result"][0] == 200
    # the upstream never had more than two at once; the slots went back as the calls ended
    assert sim.count("fast") == 4 and sim.peak_in_flight == 2
    assert live_leases(pg_url) == 0


def hold(home, url, lease):
    """A holder of one slot in a process of its own, with its own lease period."""
    env = dict(os.environ, PANELIST_LEASE_SECONDS=str(lease))
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "hold", str(home.root), "sim", "fast", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def end(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.wait(PATIENCE)
    proc.stdin.close()
    proc.stdout.close()


@pytest.fixture()
def mine(tmp_path, pg_url):
    admissions = []

    def make(home):
        admissions.append(Admission.of_home(home))
        return admissions[-1]

    yield make
    for adm in admissions:
        adm.close()


@pytest.mark.slow
def test_a_frozen_holder_loses_its_slot_after_a_lease_period_and_is_counted_again(
    tmp_path, pg_url, mine
):
    theirs_home, my_home = (make_home(tmp_path / n, pg_url) for n in ("theirs", "mine"))
    limit([theirs_home, my_home], max_concurrent=1)
    me = mine(my_home)
    other = hold(theirs_home, pg_url, lease=3)
    try:
        with pytest.raises(AtLimit), me.slot("sim", "fast", wait=0):
            pass
        os.kill(other.pid, signal.SIGSTOP)  # frozen: its connection stays open, nothing renews
        # one lease period after its last renewal the slot is free again; until then it waits
        with me.slot("sim", "fast", wait=PATIENCE):
            assert me.status("endpoint", "sim")["running"] == 1
            os.kill(other.pid, signal.SIGCONT)
            # awake, the holder renews: its lease had lapsed and was taken, so it is put back
            # (its call may still be running upstream) and both calls are counted
            assert wait_until(lambda: me.status("endpoint", "sim")["running"] == 2), (
                "the woken holder's call was never counted again"
            )
            assert not me.has_room("sim", "fast")
        # this call ended: the woken holder's call alone holds the endpoint's one slot, and no
        # other call goes until it ends
        assert me.status("endpoint", "sim")["running"] == 1
        with pytest.raises(AtLimit), me.slot("sim", "fast", wait=0):
            pass
    finally:
        end(other)
    # killed, it renews no more: its slot comes free one period later
    with me.slot("sim", "fast", wait=PATIENCE):
        assert me.status("endpoint", "sim")["running"] == 1
    assert live_leases(pg_url) == 0


def test_many_calls_of_two_instances_leave_the_counts_exact(tmp_path, pg_url, mine):
    homes = [make_home(tmp_path / n, pg_url) for n in ("one", "two")]
    limit(homes, max_concurrent=3)
    a, b = mine(homes[0]), mine(homes[1])
    lock = threading.Lock()
    seen = {"running": 0, "peak": 0, "done": 0}

    def call(adm):
        for _ in range(5):
            with adm.slot("sim", "fast", wait=PATIENCE):
                counted = adm.status("endpoint", "sim")["running"]
                with lock:
                    seen["running"] += 1
                    seen["peak"] = max(seen["peak"], seen["running"])
                    seen["counted"] = max(seen.get("counted", 0), counted)
                with lock:
                    seen["running"] -= 1
                    seen["done"] += 1

    threads = [threading.Thread(target=call, args=(adm,)) for adm in (a, b) * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE * 4)
    assert seen["done"] == 30 and 1 <= seen["peak"] <= 3 and 1 <= seen["counted"] <= 3
    assert live_leases(pg_url) == 0
    assert a.status("endpoint", "sim")["running"] == 0


def test_a_lease_period_is_checked(monkeypatch):
    assert pglease.period_of_env({}) == pglease.PERIOD
    assert pglease.period_of_env({"PANELIST_LEASE_SECONDS": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon", "nan", "99999"):
        with pytest.raises(ConfigInvalid) as refused:
            pglease.period_of_env({"PANELIST_LEASE_SECONDS": bad})
        assert "PANELIST_LEASE_SECONDS must be a number of seconds" in refused.value.message


def test_a_database_store_takes_its_lease_period_from_the_environment(pg_url, monkeypatch):
    monkeypatch.setenv("PANELIST_LEASE_SECONDS", "4")
    store = DatabaseStore(pg_url)
    try:
        assert store.lease == 4.0 and store.renewer.every == pytest.approx(4 / 3)
    finally:
        store.close()


def test_a_database_of_the_version_before_is_upgraded_in_place(pg_url, monkeypatch):
    from panelist.metrics.store import pg, pgschema

    db = pg.Database(pg_url)
    try:
        before = [(v, s) for v, s in pgschema.MIGRATIONS if v < 6]  # the schema before leases
        monkeypatch.setattr(pgschema, "MIGRATIONS", before)
        assert pgschema.migrate(db) == (before[-1][0], [v for v, _ in before])
        monkeypatch.undo()
        assert pgschema.migrate(db) == (
            pgschema.VERSION,
            [v for v, _ in pgschema.MIGRATIONS if v >= 6],
        )
    finally:
        db.close()
    store = DatabaseStore(pg_url)  # a slot is taken and given on the upgraded tables
    try:
        slots = store.scope("endpoint", "sim", "sim")
        token = slots.take(1)
        assert token is not None and slots.take(1) is None and slots.in_use(1) == 1
        slots.give(token)
        assert slots.in_use(1) == 0
    finally:
        store.close()
