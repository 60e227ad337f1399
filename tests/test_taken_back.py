"""Which connection the server takes back for a newcomer when every thread is taken: never one
whose request head has arrived whole (it waits for nothing from its client and is answered in
moments), however short the time since its thread started or its bytes came."""

import json
import socket
import sys
import time

import pytest

from conftest import serving_threads, wait_until
from panelist.metrics.server.front.memory import GRANT_FACTOR
from test_gateway_head import BODY, replies
from test_slow_clients import one_reply, only_408, start, until_closed  # noqa: F401

NEWCOMERS = 24


@pytest.fixture()
def busy():
    """The interpreter switching threads as often as it can, as it does under load, so a thread
    that has read a whole head is often stopped before it starts answering."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def trickler(start, gw) -> socket.socket:
    """A connection holding the one thread with a body that stopped arriving."""
    s = start.connect(gw)
    s.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (gw.server.port, len(BODY), BODY[:5])
    )
    assert wait_until(lambda: serving_threads(gw.server) == 1)
    return s


def test_newcomers_whose_heads_came_whole_are_all_answered(start):
    # the trickler's deadline alone would hold it for minutes; every newcomer may wait its turn
    gw = start(max_connections=1, max_pending=2 * NEWCOMERS, body_timeout=300)
    slow = trickler(start, gw)
    ask = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % (
        gw.server.port
    )
    # heads that all arrive at once: each waits for the one thread in turn, and none is taken
    # back for the one behind it while its thread is only starting
    newcomers = [start.connect(gw) for _ in range(NEWCOMERS)]
    for s in newcomers:
        s.sendall(ask)
    for s in newcomers:
        assert [r[0] for r in replies(until_closed(s))] == [200]
    only_408(until_closed(slow), "needed this connection for another client while the body")


def test_a_kept_connection_whose_next_request_came_is_answered(start, busy):
    gw = start(max_connections=1, max_pending=2 * NEWCOMERS)
    port = gw.server.port
    ask = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port
    for _ in range(NEWCOMERS):
        kept = start.connect(gw)
        kept.sendall(ask)
        assert [r[0] for r in one_reply(kept)] == [200]  # it holds the one thread, idle
        kept.sendall(ask)  # its next request, with a newcomer just behind it
        newcomer = start.connect(gw)
        newcomer.sendall(ask.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        [(status, _, body)] = one_reply(kept)
        assert status == 200 and json.loads(body)["object"] == "list"
        # the newcomer has the thread once the kept connection is idle again
        assert [r[0] for r in replies(until_closed(newcomer))] == [200]
        kept.close()


def test_past_the_memory_budget_a_big_body_takes_no_one_s_place(start):
    # the one thread holds a granted body still arriving; the budget has no room for another
    gw = start(max_connections=1, max_in_flight=1_000_000, body_timeout=300)
    port = gw.server.port
    # a body whose grant (GRANT_FACTOR times its size) fits the budget once, not twice
    big = json.dumps(
        {
            "model": "bench/trio",
            "messages": [{"role": "user", "content": "y" * (3 * 1_000_000 // (4 * GRANT_FACTOR))}],
        }
    ).encode()
    ask = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n" % (port, len(big))
    )
    first = start.connect(gw)
    first.sendall(ask + b"Expect: 100-continue\r\n\r\n")
    assert first.recv(100).startswith(b"HTTP/1.1 100")  # granted: its body may come
    second = start.connect(gw)
    second.sendall(ask + b"\r\n")
    # told to come back at once, without the first being taken back to give it a thread
    [(status, headers, body)] = replies(until_closed(second))
    assert status == 503 and headers["retry-after"] == "1"
    assert "PANELIST_MAX_INFLIGHT_MB" in json.loads(body)["error"]["message"]
    first.sendall(big)
    [(status, _, body)] = one_reply(first)
    assert status == 200 and json.loads(body)["bench"]["panel"]


def test_at_the_cap_a_stalled_body_goes_before_an_idle_connection(start):
    gw = start(max_connections=2, body_timeout=300)
    port = gw.server.port
    ask = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port
    idle = start.connect(gw)
    idle.sendall(ask)
    assert [r[0] for r in one_reply(idle)] == [200]  # a pooled connection, between requests
    slow = start.connect(gw)  # a body that stopped coming after five bytes
    slow.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (port, len(BODY), BODY[:5])
    )
    assert wait_until(
        lambda: any(w.stalled(time.monotonic()) for w in list(gw.server._wires.values()))
    )
    assert gw.get("/v1/models")[0] == 200
    only_408(until_closed(slow), "needed this connection for another client while the body")
    idle.sendall(ask)  # the pooled connection was left alone
    assert [r[0] for r in one_reply(idle)] == [200]
