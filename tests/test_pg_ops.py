"""Running instances on PostgreSQL: an instance started while its database is out of reach
serves what needs none, says why on ``/ready`` and catches up once the database is back; the
pool caps the connections in use, not only the idle ones; ``/metrics`` counts database errors
and waits. A real cluster (``pgcluster``), real gateways on port 0, the simulated upstream."""

import threading

import pytest

from conftest import Gateway, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.roster.collection import Collections
from panelist.metrics.store import pg
from panelist.metrics.store.pgbounds import Bounds
from test_pg_gateway import make_home


def ask(gw):
    return gw.post(
        "/v1/chat/completions",
        {
            "model": "bench/trio",
            "messages": [{"role": "user", "content": "Review: def add(a, b): return a - b"}],
        },
    )


def test_an_instance_starts_without_its_database_and_serves_once_it_is_back(
    tmp_path, sim, pg_cluster, pg_url
):
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
            assert wait_until(lambda home=home: Keys(home).find(secret) is not None)
        auth = {"Authorization": f"Bearer {secret}"}
        cutter = pg.Database(pg_url)
        answers, lock = [], threading.Lock()

        cutting = threading.Lock()

        def cut_every_connection():
            with cutting:  # one cut at a time, so no cut ends the cutter's own connection
                cutter.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "datname = current_database() AND pid <> pg_backend_pid()"
                )

        def client(gw):
            for _ in range(6):
                status, _, headers = gw.get("/v1/models", headers=auth)
                with lock:
                    answers.append((status, headers.get("Retry-After")))
                    cut = len(answers) % 4 == 0
                if cut:  # every fourth answer, every instance loses its connections
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


def test_the_pool_caps_connections_in_use_and_the_next_use_gets_a_503(pg_url):
    db = pg.Database(pg_url, application="test-pool", pool=2, bounds=Bounds(connect=1))
    watcher = pg.Database(pg_url, application="test-pool-watch")
    held, release = threading.Barrier(3), threading.Event()
    errors = []

    def hold():
        try:
            with db.begin() as conn:
                conn.execute("SELECT 1")
                held.wait()
                release.wait()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hold) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        held.wait()
        # both connections in use: the third use waits for one, then is refused
        with pytest.raises(DatabaseUnreachable) as refused:
            db.execute("SELECT 1")
        assert "connections of this instance stayed busy" in refused.value.message
        assert refused.value.headers["Retry-After"]
        opened = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'test-pool'"
        )[0][0]
        assert opened == 2
    finally:
        release.set()
        for t in threads:
            t.join()
    assert errors == []
    assert db.execute("SELECT 1") == [(1,)]
    # a read inside a thread's own transaction rides on its connection's place
    with db.begin() as conn, db.begin() as again:
        assert conn.execute("SELECT 2").fetchone() == (2,)
        assert again.execute("SELECT 3").fetchone() == (3,)
        assert db.execute("SELECT 4") == [(4,)]
    db.close()
    watcher.close()


def test_metrics_count_database_errors_and_answer_while_it_is_down(
    tmp_path, sim, pg_cluster, pg_url
):
    from prometheus_client.parser import text_string_to_metric_families

    home = make_home(tmp_path / "a", sim, pg_url)

    def scrape(gw):
        status, text = gw.request_text("/metrics")
        assert status == 200, text
        return {f.name: f for f in text_string_to_metric_families(text)}

    def value(fams, family, name, **labels):
        (found,) = [
            s.value
            for s in fams[family].samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        return found

    with Gateway(make_gateway(home, env={})) as gw:
        gw.request_text = lambda path: _text(gw, path)
        assert ask(gw)[0] == 200
        fams = scrape(gw)
        assert value(fams, "panelist_db_uses", "panelist_db_uses_total") > 0
        assert value(fams, "panelist_db_seconds", "panelist_db_seconds_total") > 0
        assert (
            value(
                fams,
                "panelist_admission_refusals",
                "panelist_admission_refusals_total",
                model="fast",
            )
            == 0
        )
        before = value(fams, "panelist_db_errors", "panelist_db_errors_total", kind="unreachable")
        pg_cluster.stop()
        try:
            assert ask(gw)[0] == 503
            fams = scrape(gw)
        finally:
            pg_cluster.start()
        assert (
            value(fams, "panelist_db_errors", "panelist_db_errors_total", kind="unreachable")
            > before
        )
        assert "panelist_seats" not in fams  # the ledger's figures wait for the database
        assert value(fams, "panelist_worker_info", "panelist_worker_info") == 1


def _text(gw, path):
    import urllib.request

    with urllib.request.urlopen(gw.url + path, timeout=30) as resp:
        return resp.status, resp.read().decode()


def test_a_dashboard_starts_without_its_database_and_serves_its_pages(
    tmp_path, sim, pg_cluster, pg_url
):
    import urllib.request
    from panelist.serve import make_dashboard

    home = make_home(tmp_path / "a", sim, pg_url)
    pg_cluster.stop()
    try:
        with Gateway(make_dashboard(home, env={"PANELIST_LOGIN_PAUSE": "0"})) as dash:
            with urllib.request.urlopen(dash.url + "/", timeout=30) as resp:
                assert resp.status == 200 and b"<html" in resp.read().lower()
            assert dash.get("/ready")[0] == 503
            status, body, headers = dash.post(
                "/api/collections", {"name": "offline", "members": ["fast", "mid"]}
            )
            assert status == 503 and headers["Retry-After"], body
            assert "offline" not in Collections(home).all()
    finally:
        pg_cluster.start()
