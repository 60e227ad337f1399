"""The database layer on a real PostgreSQL (``metrics.store.pg``, ``pgschema``): the schema is
applied once however often it is asked for, an unreachable server is one clear 503 error
without the password, and a pool that outlived a server restart recovers by itself."""

import pytest

from panelist.metrics import errors
from panelist.metrics.store import pg, pgschema
from panelist.metrics.wire.errors import status_of


def test_migrate_is_idempotent_and_versioned(pg_url):
    db = pg.Database(pg_url)
    try:
        assert pgschema.migrate(db) == (pgschema.VERSION, [v for v, _ in pgschema.MIGRATIONS])
        assert pgschema.migrate(db) == (pgschema.VERSION, [])
        tables = {
            r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
        assert {
            "evidence",
            "verdicts",
            "panels",
            "races",
            "suite_samples",
            "config_changes",
            "config",
            "panelist_schema",
            "race_reports",
        } <= tables
        # ids of evidence come in commit order, through the one function
        first = db.execute(
            "SELECT panelist_append(%s::jsonb)",
            ('[{"kind":"seat","call":"p1-0.a"},{"kind":"verdict","call":"x"}]',),
        )
        assert first[0][0] == 1
        rows = db.execute(
            "SELECT id, kind FROM evidence UNION ALL SELECT id, 'verdict' FROM verdicts ORDER BY id"
        )
        assert rows == [(1, "seat"), (2, "verdict")]
    finally:
        db.close()


@pytest.mark.parametrize(
    "named",
    [
        "postgresql://someone:s3cret-word@127.0.0.1:{port}/nothing",
        "postgresql://someone@127.0.0.1:{port}/nothing?password=s3cret-word",
    ],
)
def test_unreachable_is_a_503_that_names_nothing_of_the_database(pg_cluster, caplog, named):
    port = __import__("pgcluster").free_port()  # nothing listens there
    db = pg.Database(named.format(port=port))
    try:
        with caplog.at_level("WARNING", logger="panelist.database"):
            with pytest.raises(errors.DatabaseUnreachable) as caught:
                db.execute("SELECT 1")
    finally:
        db.close()
    exc = caught.value
    assert status_of(exc) == 503
    assert exc.headers["Retry-After"] == "2"
    assert "database is unreachable" in exc.message
    # a caller learns neither where the database is nor who connects to it
    for private in ("s3cret-word", "someone", "127.0.0.1", str(port)):
        assert private not in exc.message
    # the operator's log says where, without the password
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "127.0.0.1" in logged and "***" in logged and "s3cret-word" not in logged


def test_a_pool_recovers_after_the_server_restarts(pg_cluster, pg_url):
    db = pg.Database(pg_url)
    try:
        assert db.execute("SELECT 1") == [(1,)]
        pg_cluster.stop()
        with pytest.raises(errors.DatabaseUnreachable):
            db.execute("SELECT 1")
        pg_cluster.start()
        # the idle connection died with the old server: a fresh one answers
        assert db.execute("SELECT 2") == [(2,)]
        # a held transaction too, after another restart: committed only when the block ends
        pgschema.migrate(db)
        pg_cluster.stop()
        pg_cluster.start()
        with db.begin() as conn:
            conn.execute("INSERT INTO config (name, version, body) VALUES ('x', 1, '{}')")
        with pytest.raises(ValueError):
            with db.begin() as conn:
                conn.execute("INSERT INTO config (name, version, body) VALUES ('x', 2, '{}')")
                raise ValueError("changed my mind")
        assert db.execute("SELECT version FROM config WHERE name = 'x'") == [(1,)]
    finally:
        db.close()


def test_not_a_postgresql_url_is_refused_with_the_form():
    with pytest.raises(errors.ConfigInvalid, match="postgresql://USER@HOST:PORT/DATABASE"):
        pg.Database("mysql://u:pw@h/db")


def test_a_migration_whose_connection_is_cut_is_one_clear_503(pg_url):
    """A schema check cut off mid-way (a restarted or failed-over server, an operator's
    pg_terminate_backend) reaches its caller as DatabaseUnreachable, never a driver error:
    a gateway's first rate check once answered 500 this way."""
    import threading

    from conftest import wait_until

    holder = pg.Database(pg_url, application="panelist-test-holder")
    cut = pg.Database(pg_url, application="panelist-test-migrating")
    seen: dict = {}
    try:
        with holder.session() as lock:
            # hold the schema lock, so the migration waits on it where it can be cut
            lock.execute("SELECT pg_advisory_lock(%s)", (pgschema.SCHEMA_LOCK,))

            def migrating():
                try:
                    pgschema.migrate(cut)
                except Exception as exc:  # what the caller would see
                    seen["error"] = exc

            worker = threading.Thread(target=migrating)
            worker.start()
            waiting = (
                "SELECT pid FROM pg_stat_activity WHERE application_name = "
                "'panelist-test-migrating' AND wait_event_type = 'Lock'"
            )
            assert wait_until(lambda: lock.execute(waiting).fetchall())
            lock.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'panelist-test-migrating'"
            )
            worker.join()
        assert isinstance(seen.get("error"), errors.DatabaseUnreachable), seen
        assert status_of(seen["error"]) == 503
    finally:
        holder.close()
        cut.close()
