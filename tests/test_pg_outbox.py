"""A database blip at a panel's end costs the caller no paid answers: the panel's write is tried
again within its bound, and when the database stays away the panel is kept on the instance, the
error names it (streamed or not), it can be read back, and it is stored once when the database
returns, with every seat row, nothing twice."""

import json
import threading

import pytest

from conftest import PATIENCE, Gateway, raw_stream, wait_until
from panelist.gateway import make_gateway
from test_pg_gateway import count, make_home

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: y = 2"}]}
# the instance's panel write, waiting at the test's lock on the panels table
WAITING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = %s "
    "AND wait_event_type = 'Lock' AND query LIKE '%%panelist_put_panels%%'"
)


def raw(url):
    import psycopg

    return psycopg.connect(url, autocommit=True)


class Blocker:
    """Holds the panels table so that a panel's write waits where the test can cut it."""

    def __init__(self, url):
        self.url = url
        self.conn = raw(url)
        self.conn.execute("BEGIN")
        self.conn.execute("LOCK TABLE panels IN SHARE MODE")
        self.name = url.rsplit("/", 1)[1]
        self.admin = raw(url.rsplit("/", 1)[0] + "/postgres")  # another database: it stays

    def waiting(self) -> list[int]:
        """The connections whose panel write waits on the lock, once there is one."""
        found = []
        assert wait_until(
            lambda: found.extend(r[0] for r in self.admin.execute(WAITING, (self.name,))) or found
        )
        return found

    def cut(self, pids) -> None:
        for pid in pids:
            self.admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    def refuse(self, refused: bool) -> None:
        """New connections to the test's database refused (or allowed again)."""
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS {not refused}')

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.execute("ROLLBACK")
            self.conn.close()

    def close(self) -> None:
        self.release()
        self.refuse(False)
        self.admin.close()


def in_thread(call):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", call()))
    thread.start()
    return thread, box


def stored(url, panel) -> tuple[int, int]:
    """(panel rows, seat rows) of ``panel`` in the database."""
    return (
        count(url, f"SELECT count(*) FROM panels WHERE panel = '{panel}'"),
        count(
            url,
            f"SELECT count(*) FROM evidence WHERE record->>'kind' = 'seat' AND panel = '{panel}'",
        ),
    )


def test_a_connection_cut_at_the_panel_write_still_answers_200(tmp_path, sim, pg_url):
    with Gateway(make_gateway(make_home(tmp_path / "a", sim, pg_url), env={})) as gw:
        blocker = Blocker(pg_url)
        try:
            thread, box = in_thread(lambda: gw.post("/v1/chat/completions", ASK))
            blocker.cut(blocker.waiting())
            blocker.release()
            thread.join(PATIENCE)
        finally:
            blocker.close()
        status, body, _ = box["result"]
        assert status == 200, body
        panel = body["bench"]["panel"]
        seats = len(body["bench"]["seats"])
        assert stored(pg_url, panel) == (1, seats)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_panel_the_database_cannot_take_is_kept_named_and_stored_once_later(
    tmp_path, sim, pg_url, monkeypatch, streamed
):
    monkeypatch.setenv("PANELIST_DB_STATEMENT_TIMEOUT", "1")  # the write's retries: 1 s
    home = make_home(tmp_path / "a", sim, pg_url)
    with Gateway(make_gateway(home, env={})) as gw:
        blocker = Blocker(pg_url)
        try:
            ask = (
                (lambda: raw_stream(gw, ASK))
                if streamed
                else (lambda: gw.post("/v1/chat/completions", ASK))
            )
            thread, box = in_thread(ask)
            writes = blocker.waiting()
            blocker.refuse(True)  # new connections only: the write is waiting already
            blocker.cut(writes)
            blocker.release()
            thread.join(PATIENCE)
            if streamed:
                head, data = box["result"]
                assert head.startswith("HTTP/1.1 200")
                events = [
                    json.loads(line[6:])
                    for line in data.decode().splitlines()
                    if line.startswith("data: {")
                ]
                panel = events[0]["id"][len("chatcmpl-") :]
                message = events[-1]["error"]["message"]
            else:
                status, body, headers = box["result"]
                assert status == 503, body
                assert headers["Retry-After"]
                message = body["error"]["message"]
                panel = headers["X-Panelist-Panel"]
                assert f"the answers of panel {panel} are kept" in message
            assert panel.startswith("p") and f"GET /bench/panels/{panel}" in message
            assert "nothing was written" not in message
            outbox = home.gateway_runs / "outbox"
            assert len([p for p in outbox.iterdir() if p.suffix == ".json"]) == 1
            # readable on this instance while the database is away
            status, record, _ = gw.get(f"/bench/panels/{panel}")
            assert status == 200 and record["panel"] == panel and record["seats"]
            seats = len(record["seats"])
            blocker.refuse(False)
        finally:
            blocker.close()
        # once the database answers, the next panel's write sends the kept one first, unless
        # the instance's follower (at most once a second) got there before it: either way once
        status, body, _ = gw.post("/v1/chat/completions", ASK)
        assert status == 200, body
        assert stored(pg_url, panel) == (1, seats)
        assert [p for p in outbox.iterdir() if p.suffix == ".json"] == []
        status, record, _ = gw.get(f"/bench/panels/{panel}")
        assert status == 200 and record["panel"] == panel
    # a restart finds nothing left to send, and stores nothing twice
    with Gateway(make_gateway(home, env={})) as gw:
        assert gw.post("/v1/chat/completions", ASK)[0] == 200
    assert stored(pg_url, panel) == (1, seats)
