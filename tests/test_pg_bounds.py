"""Every wait on the database is bounded: a statement or a lock wait past its bound, and a
server that stops answering altogether, are a 503 (``DatabaseUnreachable``) within the bound,
and the pool serves again once the server does. The bounds come from the environment."""

import threading

import pytest

from panelist.metrics import errors
from panelist.metrics.store import pg
from panelist.metrics.store.pgbounds import GRACE, Bounds
from panelist.metrics.wire.errors import status_of


def test_the_bounds_default_and_come_from_the_environment():
    assert Bounds.of_env({}) == Bounds()
    got = Bounds.of_env(
        {
            "PANELIST_DB_STATEMENT_TIMEOUT": "2.5",
            "PANELIST_DB_LOCK_TIMEOUT": "1",
            "PANELIST_DB_CONNECT_TIMEOUT": "0.2",
            "PANELIST_DB_KEEPALIVE": " 4 ",
        }
    )
    assert (got.statement, got.lock, got.connect, got.keepalive) == (2.5, 1.0, 1, 4)
    assert got.wait == 2.5 + GRACE
    options = got.connect_options()
    assert options["connect_timeout"] == 1 and options["keepalives"] == 1
    assert "-c statement_timeout=2500" in options["options"]
    assert "-c lock_timeout=1000" in options["options"]
    assert "-c idle_in_transaction_session_timeout=30000" in options["options"]
    # a caller's defaults give way to the environment's
    assert Bounds.of_env({}, statement=600.0).statement == 600.0
    assert Bounds.of_env({"PANELIST_DB_STATEMENT_TIMEOUT": "7"}, statement=600.0).statement == 7


@pytest.mark.parametrize("raw", ["soon", "0", "-3", "nan", "1e9"])
def test_a_bad_bound_is_refused_by_name(raw):
    with pytest.raises(errors.ConfigInvalid) as caught:
        Bounds.of_env({"PANELIST_DB_LOCK_TIMEOUT": raw})
    assert "PANELIST_DB_LOCK_TIMEOUT" in caught.value.message


def _ended(call, patience: float = 60.0):
    """``call()``'s exception, from a thread, or a failure if it is still waiting after
    ``patience`` seconds (far past any bound these tests set)."""
    caught: list[BaseException] = []
    done = threading.Event()

    def run():
        try:
            call()
        except BaseException as exc:
            caught.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert done.wait(patience), "the database call was still waiting"
    thread.join()
    return caught[0] if caught else None


def test_a_statement_past_its_bound_is_a_503_and_the_pool_goes_on(pg_url):
    db = pg.Database(pg_url, bounds=Bounds(statement=0.5))
    try:
        exc = _ended(lambda: db.execute("SELECT pg_sleep(30)"))
        assert isinstance(exc, errors.DatabaseUnreachable) and status_of(exc) == 503
        assert "a statement waited over 0.5 s" in exc.message
        assert db.execute("SELECT 1") == [(1,)]
    finally:
        db.close()


def test_a_lock_held_elsewhere_is_a_503_after_the_lock_bound(pg_url):
    db = pg.Database(pg_url, bounds=Bounds(lock=0.5))
    try:
        with db.session() as holder:
            holder.execute("SELECT pg_advisory_lock(4242)")
            exc = _ended(
                lambda: db.transaction(
                    lambda conn: conn.execute("SELECT pg_advisory_xact_lock(4242)")
                )
            )
        assert isinstance(exc, errors.DatabaseUnreachable)
        assert "a lock waited over 0.5 s" in exc.message
        # released with its session: the same lock is had at once
        db.transaction(lambda conn: conn.execute("SELECT pg_advisory_xact_lock(4242)"))
    finally:
        db.close()


def test_a_frozen_server_is_a_503_within_the_bound_then_serves_again(pg_cluster, pg_url):
    db = pg.Database(pg_url, bounds=Bounds(statement=0.5, connect=1))
    try:
        assert db.execute("SELECT 1") == [(1,)]  # a pooled connection, then silence
        pg_cluster.freeze()
        try:
            # the pooled connection, inside a transaction: the watch cuts it at its bound
            held = _ended(lambda: _in_transaction(db))
            # a new connection to a frozen server: its connect bound
            fresh = _ended(lambda: db.execute("SELECT 1"))
        finally:
            pg_cluster.thaw()
        assert isinstance(held, errors.DatabaseUnreachable) and status_of(held) == 503
        assert f"did not answer within {0.5 + GRACE:g} s" in held.message
        assert isinstance(fresh, errors.DatabaseUnreachable) and status_of(fresh) == 503
        assert "the database is unreachable" in fresh.message
        assert db.execute("SELECT 1") == [(1,)]
    finally:
        db.close()


def _in_transaction(db):
    with db.begin() as conn:
        conn.execute("SELECT 1")
