"""Running instances on PostgreSQL: an instance started while its database is out of reach
serves what needs none, says why on ``/ready`` and catches up once the database is back; the
pool caps the connections in use, not only the idle ones; ``/metrics`` counts database errors
and waits. A real cluster (``pgcluster``), real gateways on port 0, the simulated upstream."""

import threading

import pytest

from conftest import TEST_MODELS, Gateway, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.home import open_home
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store import pg
from panelist.metrics.store.pgbounds import Bounds


def make_home(path, sim, url):
    home = open_home(path, database=url)
    roster = Roster(home)
    roster.add_endpoint("sim", sim.url)
    for alias in TEST_MODELS:
        roster.add_model(alias, "sim", family=alias, context=100_000)
    Collections(home).save(roster.view(), "trio", ["fast", "mid", "slow"])
    return home


def ask(gw):
    return gw.post("/v1/chat/completions", {"model": "bench/trio", "messages": [
        {"role": "user", "content": "Review: def add(a, b): return a - b"}]})


def test_an_instance_starts_without_its_database_and_serves_once_it_is_back(
        tmp_path, sim, pg_cluster, pg_url):
    home = make_home(tmp_path / "a", sim, pg_url)
    pg_cluster.stop()
    try:
        gw = Gateway(make_gateway(home, env={}))
    except BaseException:
        pg_cluster.start()
        raise
    try:
        try:
            assert gw.get("/health")[0] == 200
            status, body, headers = gw.get("/ready")
            assert status == 503 and headers["Retry-After"], body
            assert body["checks"]["ledger"]["ok"] is False
            assert "database is unreachable" in body["checks"]["ledger"]["why"]
            assert "127.0.0.1" not in str(body)
            status, body, headers = ask(gw)
            assert status == 503 and int(headers["Retry-After"]) >= 1, body
            assert "database is unreachable" in body["error"]["message"]
            assert sim.requests == [], "a model was asked though nothing could be written"
        finally:
            pg_cluster.start()
        assert wait_until(lambda: gw.get("/ready")[0] == 200), gw.get("/ready")[1]
        status, body, _ = ask(gw)
        assert status == 200, body
        db = pg.Database(pg_url)
        try:
            assert db.execute("SELECT count(*) FROM panels")[0][0] == 1
        finally:
            db.close()
    finally:
        gw.close()


def test_a_keys_rpm_holds_on_three_instances_while_connections_are_cut(tmp_path, sim, pg_url):
    from panelist.metrics.server.keys import Keys
    homes = [make_home(tmp_path / f"host{i}", sim, pg_url) for i in range(3)]
    gws = []
    try:
        for home in homes:
            gws.append(Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})))
        limit = 6
        secret, _ = Keys(homes[0]).create("app", rpm=limit)
        for home in homes[1:]:
            assert wait_until(lambda: Keys(home).find(secret) is not None)
        auth = {"Authorization": f"Bearer {secret}"}
        cutter = pg.Database(pg_url)
        answers, lock = [], threading.Lock()

        cutting = threading.Lock()

        def cut_every_connection():
            with cutting:   # one cut at a time, so no cut ends the cutter's own connection
                cutter.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                               "datname = current_database() AND pid <> pg_backend_pid()")

        def client(gw):
            for _ in range(6):
                status, _, headers = gw.get("/v1/models", headers=auth)
                with lock:
                    answers.append((status, headers.get("Retry-After")))
                    cut = len(answers) % 4 == 0
                if cut:   # every fourth answer, every instance loses its connections
                    cut_every_connection()

        threads = [threading.Thread(target=client, args=(gw,)) for gw in gws for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cutter.close()
        statuses = [s for s, _ in answers]
        assert len(statuses) == 54 and set(statuses) <= {200, 429, 503}, statuses
        assert statuses.count(200) <= limit, statuses
        assert statuses.count(429) > 0
        assert all(int(after) >= 1 for s, after in answers if s != 200)
    finally:
        for gw in gws:
            gw.close()
