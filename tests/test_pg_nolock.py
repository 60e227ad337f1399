"""Writes on PostgreSQL take no lock another instance waits on, and followers still miss no row:
a transaction held open mid-write (an instance stopped between two statements) holds up no
other instance's panels or verdicts, a row committed after a later one is folded once when it
lands, and a database of the old schema (one global append lock) is upgraded in place."""

import pytest

from conftest import Gateway
from panelist.gateway import make_gateway
from panelist.metrics.errors import DatabaseUnreachable
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.ledger import pglogs
from panelist.metrics.ledger.pglogs import to_json
from panelist.metrics.ledger.samples import DatabaseSamples
from panelist.metrics.store import pgschema
from test_pg_gateway import ask, make_home

HELD = "SET lock_timeout = '3s'"  # the old schema's lock would make the test fail, not hang


def raw(url):
    """A connection of the test's own (the driver is imported once a cluster is there)."""
    import psycopg

    return psycopg.connect(url, autocommit=True)


def seat_line(ledger, pid, alias):
    return ledger.seat_record(
        {
            "call": f"{pid}.{alias}",
            "alias": alias,
            "shape": "code",
            "status": "ok",
            "panel": pid,
            "seconds": 0.5,
            "key": "local",
        }
    )


def open_write(url, records):
    """A connection with a transaction that wrote ``records`` and has not committed."""
    conn = raw(url)
    conn.execute(HELD)
    conn.execute("BEGIN")
    conn.execute("SELECT panelist_append(%s::jsonb)", (to_json(records),))
    return conn


def test_an_open_write_holds_up_no_other_instance(tmp_path, sim, pg_url):
    with Ledger(tmp_path / "stalled", database=pg_url) as stalled:
        pid = stalled.new_panel()
        held = open_write(pg_url, [seat_line(stalled, pid, "mid")])
        try:
            with Gateway(make_gateway(make_home(tmp_path / "b", sim, pg_url), env={})) as b:
                status, body, _ = ask(b)
                assert status == 200, body
                panel = body["bench"]["panel"]
                call = next(s["call"] for s in body["bench"]["seats"] if s["status"] == "ok")
                status, verdict, _ = b.post("/bench/verdict", {"call": call, "useful": True})
                assert status == 200 and verdict["written"], verdict
                with raw(pg_url) as conn:
                    stored = conn.execute(
                        "SELECT count(*) FROM panels WHERE panel = %s", (panel,)
                    ).fetchone()[0]
                    judged = conn.execute(
                        "SELECT count(*) FROM verdicts WHERE call = %s", (call,)
                    ).fetchone()[0]
                assert (stored, judged) == (1, 1)
        finally:
            held.execute("ROLLBACK")
            held.close()


@pytest.mark.parametrize("batch", [1, 5000])  # one row a read, or all of them
def test_a_row_committed_after_a_later_one_is_followed_once(tmp_path, pg_url, monkeypatch, batch):
    monkeypatch.setattr(pglogs, "BATCH", batch)
    with (
        Ledger(tmp_path / "writer", database=pg_url) as writer,
        Ledger(tmp_path / "follower", database=pg_url) as follower,
    ):
        pid = writer.new_panel()
        for n in range(3):
            writer.record_seat_lines([seat_line(writer, f"{pid}x{n}", "before")])
        reader = follower.evidence_after(0)
        assert [r["alias"] for _, r in reader.read()] == ["before"] * 3
        first = open_write(pg_url, [seat_line(writer, pid, "early")])  # the lower id
        try:
            second = open_write(
                pg_url, [seat_line(writer, pid, "late"), seat_line(writer, pid, "later")]
            )
            second.execute("COMMIT")
            second.close()
            assert [r["alias"] for _, r in reader.read()] == []  # the earlier one is open
            follower.catch_up()
            assert set(follower.model_stats("code")) == {"before", "late", "later"}
            first.execute("COMMIT")
        finally:
            first.close()
        follower.catch_up()
        follower.catch_up()
        stats = follower.model_stats("code")
        assert {a: s["seats"] for a, s in stats.items()} == {
            "before": 3,
            "early": 1,
            "late": 1,
            "later": 1,
        }
        read = [(pos, r["alias"]) for pos, r in reader.read()]
        assert [a for _, a in read] == ["early", "late", "later"]
        assert read[0][0] < read[1][0] < read[2][0]
        assert list(reader.read()) == []
    # a restart from the follower's snapshot folds neither again
    with Ledger(tmp_path / "follower", database=pg_url) as again:
        assert again.from_snapshot and again.replayed == 0
        assert {a: s["seats"] for a, s in again.model_stats("code").items()} == {
            "before": 3,
            "early": 1,
            "late": 1,
            "later": 1,
        }


def test_a_sample_committed_late_is_read_once(pg_url):
    with DatabaseSamples(pg_url) as samples:
        samples.append({"kind": "sample", "n": 0})
        tail = samples.reader()
        assert [r["n"] for _, r in tail.read()] == [0]
        late = raw(pg_url)
        try:
            late.execute(HELD)
            late.execute("BEGIN")
            late.execute(
                'INSERT INTO suite_samples (record) VALUES (\'{"kind": "sample", "n": 1}\')'
            )
            samples.append({"kind": "sample", "n": 2})  # not held up by the open insert
            stamp = samples.stamp()
            assert [r["n"] for _, r in tail.read()] == []
            late.execute("COMMIT")
        finally:
            late.close()
        assert samples.stamp() != stamp
        assert sorted(r["n"] for _, r in tail.read()) == [1, 2]
        assert list(tail.read()) == []


def old_schema(url) -> None:
    """A database as versions 1 to 5 left it."""
    with raw(url) as conn:
        conn.execute(
            "CREATE TABLE panelist_schema (version int PRIMARY KEY, "
            "applied timestamptz NOT NULL DEFAULT now())"
        )
        for version, statements in pgschema.MIGRATIONS:
            if version > 5:
                break
            with conn.transaction():
                for sql in statements:
                    conn.execute(sql)
                conn.execute("INSERT INTO panelist_schema (version) VALUES (%s)", (version,))


def test_a_database_of_the_locked_schema_is_upgraded_in_place(tmp_path, pg_url):
    old_schema(pg_url)
    with Ledger(tmp_path / "scratch", database=None) as lines:
        old = [seat_line(lines, f"p20260101-{i}", "old") for i in range(3)]
    with raw(pg_url) as conn:
        conn.execute("SELECT panelist_append(%s::jsonb)", (to_json(old),))
        conn.execute('INSERT INTO suite_samples (record) VALUES (\'{"kind": "sample"}\')')
    with Ledger(tmp_path / "a", database=pg_url) as a:  # opening migrates
        with raw(pg_url) as conn:
            assert (
                conn.execute("SELECT max(version) FROM panelist_schema").fetchone()[0]
                == pgschema.VERSION
            )
        assert {k: s["seats"] for k, s in a.model_stats("code").items()} == {"old": 3}
        # the old global lock, held elsewhere, no longer holds up a write
        blocker = raw(pg_url)
        try:
            blocker.execute("BEGIN")
            blocker.execute("SELECT pg_advisory_xact_lock(%s)", (pgschema.APPEND_LOCK,))
            pid = a.new_panel()
            a.record_seat(
                {
                    "call": f"{pid}.new",
                    "alias": "new",
                    "shape": "code",
                    "status": "ok",
                    "panel": pid,
                    "seconds": 1.0,
                }
            )
            a.record_panel(
                {
                    "panel": pid,
                    "shape": "code",
                    "seats": [{"call": f"{pid}.new", "alias": "new", "status": "ok"}],
                }
            )
        finally:
            blocker.close()
        a.catch_up()
        assert {k: s["seats"] for k, s in a.model_stats("code").items()} == {"old": 3, "new": 1}
    with DatabaseSamples(pg_url) as samples:
        assert samples.read_all() == [{"kind": "sample"}]


def test_a_panel_write_past_its_bound_is_a_503_that_leaves_nothing_half_written(
    tmp_path, pg_url, monkeypatch
):
    """A panel write that cannot finish in its bound (here a row lock on its seq, another
    writer's open insert, outlasts the lock bound at every try) is refused whole, and kept: it
    lands whole, once, when the way is clear."""
    monkeypatch.setenv("PANELIST_DB_LOCK_TIMEOUT", "0.3")
    monkeypatch.setenv("PANELIST_DB_STATEMENT_TIMEOUT", "1")
    with Ledger(tmp_path / "a", database=pg_url) as a:
        pid = a.new_panel()
        seq = int(pid.rsplit("-", 1)[1])
        other = raw(pg_url)
        try:
            other.execute("BEGIN")
            other.execute(
                "INSERT INTO panels (seq, panel, record) VALUES (%s, %s, '{}')", (seq, pid)
            )
            with pytest.raises(DatabaseUnreachable) as caught:
                a.record_panel(
                    {"panel": pid, "shape": "code", "seats": []},
                    evidence=[seat_line(a, pid, "lost")],
                )
            assert f"GET /bench/panels/{pid}" in caught.value.message
            with raw(pg_url) as conn:
                assert (
                    conn.execute(
                        "SELECT count(*) FROM evidence WHERE panel = %s", (pid,)
                    ).fetchone()[0]
                    == 0
                )
        finally:
            other.close()
        assert a.panel(pid)["seats"] == []  # kept on this instance meanwhile
        a.record_seat(
            {"call": "x", "alias": "other", "shape": "code", "status": "ok", "panel": pid}
        )  # any write sends what was kept first
        with raw(pg_url) as conn:
            assert (
                conn.execute("SELECT count(*) FROM panels WHERE panel = %s", (pid,)).fetchone()[0]
                == 1
            )
            assert (
                conn.execute(
                    "SELECT count(*) FROM evidence WHERE panel = %s AND record->>'alias' = 'lost'",
                    (pid,),
                ).fetchone()[0]
                == 1
            )
