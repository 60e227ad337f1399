"""Dashboard logins on a database are every instance's (``server.sessiontable.DatabaseTable``):
a cookie from one instance opens another, a logout on any ends it everywhere, an expired
session is refused everywhere, and the database keeps only a digest of each cookie. Two
dashboards called in process, each on its own data folder, on one real cluster (``pgcluster``)."""

import hashlib
import time

import pytest
from conftest import DASHBOARD_TOKEN, wait_until
from inprocess import call
from panelist.metrics.home import open_home
from panelist.metrics.server.session import MAX_SESSIONS, Sessions
from panelist.metrics.server.sessiontable import DatabaseTable
from panelist.metrics.store.pg import Database
from panelist.serve import make_dashboard

ENV = {"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN, "PANELIST_LOGIN_PAUSE": "0"}


class Dashboard:
    """A dashboard built and never served, its routes called in process (``inprocess``)."""

    def __init__(self, server):
        self.server = server

    def get(self, path, headers=None):
        status, head, body = call(self.server, "GET", path, headers=headers)
        return status, body, head

    def post(self, path, body=None, headers=None):
        status, head, reply = call(self.server, "POST", path, body, headers=headers)
        return status, reply, head


@pytest.fixture()
def two(tmp_path, pg_url):
    made = [make_dashboard(open_home(tmp_path / n, database=pg_url), env=ENV) for n in ("a", "b")]
    try:
        yield [Dashboard(server) for server in made]
    finally:
        for server in made:
            server.close()


def login(dash) -> str:
    status, body, headers = dash.post("/api/login", {"token": DASHBOARD_TOKEN})
    assert status == 200 and body == {"ok": True}
    return headers["Set-Cookie"].split(";")[0]


def rows(url) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT digest, made, until FROM dashboard_sessions").fetchall()


def test_a_login_on_one_instance_opens_the_other_and_a_logout_ends_it_on_both(two, pg_url):
    a, b = two
    cookie = login(a)
    for dash in (a, b):
        status, info, _ = dash.get("/api/session", headers={"Cookie": cookie})
        assert status == 200 and info == {"token_required": True, "logged_in": True}
        status, models, _ = dash.get("/api/models", headers={"Cookie": cookie})
        assert status == 200 and "data" in models
    # the database holds the cookie's digest, never its value
    sid = cookie.split("=", 1)[1]
    [(digest, _, _)] = rows(pg_url)
    assert bytes(digest) == hashlib.sha256(sid.encode()).digest()
    assert sid.encode() not in b"".join(
        bytes(c) if isinstance(c, (bytes, memoryview)) else str(c).encode()
        for row in rows(pg_url)
        for c in row
    )
    status, body, headers = b.post("/api/logout", headers={"Cookie": cookie})
    assert status == 200 and "Max-Age=0" in headers["Set-Cookie"]
    for dash in (a, b):
        status, body, _ = dash.get("/api/models", headers={"Cookie": cookie})
        assert status == 401 and body["error"]["code"] == "login_required"
    assert rows(pg_url) == []


def test_a_wrong_cookie_opens_neither(two):
    a, b = two
    login(a)
    for dash in (a, b):
        status, body, _ = dash.get("/api/models", headers={"Cookie": "panelist_session=guess"})
        assert status == 401 and body["error"]["code"] == "login_required"


def test_an_expired_session_is_refused_on_every_instance(pg_url):
    tables = [DatabaseTable(Database(pg_url), MAX_SESSIONS) for _ in range(2)]
    try:
        long = Sessions(DASHBOARD_TOKEN, table=tables[0])
        short = Sessions(DASHBOARD_TOKEN, lifetime=0.5, table=tables[0])
        other = Sessions(DASHBOARD_TOKEN, table=tables[1])
        kept = long.login(DASHBOARD_TOKEN, "127.0.0.1")
        sid = short.login(DASHBOARD_TOKEN, "127.0.0.1")
        # the end is the database's: each instance reads what is left of it, never more than
        # the lifetime the login gave
        ends = tables[1].ends(hashlib.sha256(sid.encode()).digest())
        assert ends is None or ends - time.monotonic() <= 0.5
        assert wait_until(lambda: not other.valid(sid)), "the session never ended"
        assert other.valid(kept)  # a session still in its lifetime holds on the other
        assert not short.valid(sid) and len(rows(pg_url)) == 1
    finally:
        for table in tables:
            table.close()


def test_the_table_keeps_at_most_its_limit_the_oldest_leaving_first(pg_url):
    table = DatabaseTable(Database(pg_url), 3)
    try:
        later = time.monotonic() + 3600
        for i in range(5):
            table.add(bytes([i]) * 32, later)
        assert table.ends(bytes([0]) * 32) is None and table.ends(bytes([1]) * 32) is None
        assert all(table.ends(bytes([i]) * 32) > time.monotonic() for i in (2, 3, 4))
    finally:
        table.close()


def test_the_dashboard_answers_503_while_its_database_is_down(two, pg_cluster):
    a, _ = two
    cookie = login(a)
    pg_cluster.stop()
    try:
        status, body, headers = a.get("/api/models", headers={"Cookie": cookie})
        assert status == 503 and headers["Retry-After"] == "2"
        assert "the database is unreachable" in body["error"]["message"]
        assert a.get("/health")[0] == 200
    finally:
        pg_cluster.start()
    # the session outlived the outage
    assert a.get("/api/models", headers={"Cookie": cookie})[0] == 200
