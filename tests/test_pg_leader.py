"""One instance of a cluster runs the schedule (``upkeep.leader``): the holder of the lease
``leader`` on the shared database. The others run no job; when the leader freezes or stops,
another takes the lease within one lease period and runs the jobs from the database's book, so
a due time is run once whoever leads. A real cluster (``pgcluster``), gateways in process and in
processes of their own (frozen with SIGSTOP), the simulated upstream."""

import os
import signal
import time

import pytest
from conftest import PATIENCE, TEST_MODELS, Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upkeep import schedule
from panelist.metrics.upkeep.leader import Leader
from test_faults import Process

HOUR = 3600


def make_home(path, url, upstream, every):
    """A data folder on the database, its models on the simulator, with the catalog refresh
    scheduled (``log-only``: it reads the endpoint and changes nothing) every ``every`` s."""
    home = open_home(path, database=url)
    roster = Roster(home)
    roster.add_endpoint("sim", upstream)
    for alias in TEST_MODELS:
        roster.add_model(alias, "sim", family=alias, context=100_000)
    schedule.set_job(home, "catalog_refresh", mode="log-only", every=every)
    return home


def runs(home) -> list[dict]:
    path = home.root / "runs" / "schedule.jsonl"
    return read_jsonl(path) if path.exists() else []


def leader_row(url):
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT holder, term FROM leases WHERE name = 'leader' AND until > clock_timestamp()"
        ).fetchone()
    return row


@pytest.mark.slow
def test_one_of_two_instances_runs_a_job_and_a_clean_stop_hands_it_over(
    tmp_path, pg_url, sim, monkeypatch
):
    monkeypatch.setenv("PANELIST_LEASE_SECONDS", "3")
    homes = [make_home(tmp_path / n, pg_url, sim.url, HOUR) for n in ("a", "b")]
    gws = [Gateway(make_gateway(home, env={})) for home in homes]
    try:
        leaders = [gw.server.parts.leader for gw in gws]
        assert wait_until(lambda: sum(ld.leads() for ld in leaders) == 1), "nobody leads"
        first = 0 if leaders[0].leads() else 1
        other = 1 - first
        # both schedules make passes; the job, due at once, runs once, on the leader
        for gw in gws:
            done = gw.server.parts.schedule.passes
            assert gw.server.parts.schedule.wait_passes(done + 2, PATIENCE)
        assert [r["job"] for r in runs(homes[first])] == ["catalog_refresh"]
        assert runs(homes[other]) == []
        # /ready says which instance runs the jobs
        assert gws[first].get("/ready")[1]["jobs"]["leader"] is True
        assert gws[other].get("/ready")[1]["jobs"]["leader"] is False
        term = leaders[first].lease.term
        # a clean stop gives the lease up: the other takes it at its next renewal
        gws[first].close()
        assert leaders[other].wait_leading(True, PATIENCE), "the other never took over"
        assert leaders[other].lease.term == term + 1
        done = gws[other].server.parts.schedule.passes
        assert gws[other].server.parts.schedule.wait_passes(done + 2, PATIENCE)
        # the book is the database's: the run the first made is not made again for an hour
        assert runs(homes[other]) == []
        assert (
            schedule.book_of(homes[other], leaders[other].db).next_due("catalog_refresh", HOUR)
            > time.time() + HOUR / 2
        )
    finally:
        for gw in gws:
            gw.close()


@pytest.mark.slow
def test_a_frozen_leader_is_replaced_within_a_lease_period(tmp_path, pg_url, sim, monkeypatch):
    homes = [make_home(tmp_path / n, pg_url, sim.url, 1) for n in ("a", "b")]
    env = {"PANELIST_DATABASE_URL": pg_url, "PANELIST_LEASE_SECONDS": "3"}
    with Process(homes[0].root, env=env) as first:
        try:
            # the first instance leads alone, and runs its job every second
            assert wait_until(lambda: leader_row(pg_url) is not None), "it never led"
            assert wait_until(lambda: len(runs(homes[0])) >= 2), "its job never ran"
            monkeypatch.setenv("PANELIST_LEASE_SECONDS", "3")
            with Gateway(make_gateway(homes[1], env={})) as second:
                parts = second.server.parts
                done = parts.schedule.passes
                assert parts.schedule.wait_passes(done + 3, PATIENCE)
                assert not parts.leader.leads() and runs(homes[1]) == []
                assert first.gw.get("/ready")[1]["jobs"]["leader"] is True
                holder, term = leader_row(pg_url)
                os.kill(first.proc.pid, signal.SIGSTOP)  # alive, connected, silent
                assert parts.leader.wait_leading(True, PATIENCE), "nobody took over"
                assert leader_row(pg_url)[0] != holder and leader_row(pg_url)[1] == term + 1
                assert wait_until(lambda: len(runs(homes[1])) >= 2), "the job never ran again"
                # woken, the first finds the lease taken: it runs no more jobs
                os.kill(first.proc.pid, signal.SIGCONT)
                assert wait_until(lambda: first.gw.get("/ready")[1]["jobs"]["leader"] is False)
                before = len(runs(homes[0]))
                seen = len(runs(homes[1]))
                assert wait_until(lambda: len(runs(homes[1])) >= seen + 2)
                assert len(runs(homes[0])) == before
        finally:
            os.kill(first.proc.pid, signal.SIGCONT)


def test_without_a_database_every_server_runs_its_own_jobs():
    alone = Leader(None)
    assert alone.start().leads() and alone.status() == {"leader": True}
    alone.close()


def test_a_claim_lands_only_while_its_claimer_holds_the_lease(pg_url):
    from panelist.metrics.store import pg, pglease, pgschema

    db = pg.Database(pg_url)
    try:
        pgschema.migrate(db)
        lease = pglease.Lease(db, "leader", "me", 60)
        mine, theirs = schedule.DatabaseBook(db, "me"), schedule.DatabaseBook(db, "them")
        assert not mine.claim("probe", 60, 1000.0)  # nobody leads: nothing is claimed
        assert lease.renew() and lease.held()
        assert mine.claim("probe", 60, 1000.0)
        assert not mine.claim("probe", 60, 1001.0)  # claimed: due again at 1060
        assert not theirs.claim("probe", 60, 5000.0)  # due, but the lease is not theirs
        assert mine.next_due("probe", 60) == 1060.0
        lease.release()
        assert not lease.held() and not mine.claim("probe", 60, 5000.0)
        assert pglease.Lease(db, "leader", "them", 60).renew()  # the next term is theirs
        assert theirs.claim("probe", 60, 5000.0)
    finally:
        db.close()
