"""Slow and idle clients against the gateway's bounds: whole-request deadlines for the head and
the body that trickled bytes cannot extend, and the cap on open connections, which drops idle or
slow connections (never busy ones) so that ``/health`` and everyone else still get in."""

import json
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import Gateway, read_jsonl, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.server.front.base import HEALTH_RESERVE
from panelist.metrics.server.front.connection import IDLE
from test_gateway_head import BODY, replies

PATIENCE = 30  # seconds a test waits for something that should happen far sooner


@pytest.fixture()
def start(home):
    """``start(make=make_gateway, env=None, **limits)``: a gateway (or, with ``make``, a
    dashboard) with those limits; closed, with every socket, at the end."""
    servers, sockets = [], []

    def start_gateway(make=make_gateway, env=None, **limits):
        gw = Gateway(make(home, env=env or {}, **limits))
        servers.append(gw.server)
        return gw

    def connect(gw):
        s = socket.create_connection(("127.0.0.1", gw.server.port), timeout=PATIENCE)
        sockets.append(s)
        return s

    start_gateway.connect = connect
    yield start_gateway
    for s in sockets:
        s.close()
    for server in servers:
        server.close()


def until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:  # closed with our trickled bytes unread: still closed
        pass
    return data


def one_reply(s: socket.socket) -> list:
    data = b""
    while not replies(data):
        chunk = s.recv(65536)
        assert chunk, f"closed after {data[:200]!r}"
        data += chunk
    return replies(data)


def trickle(s: socket.socket, data: bytes, every: float = 0.05) -> None:
    """Send ``data`` a byte at a time, until the server answers or closes (or PATIENCE ends)."""
    end = time.monotonic() + PATIENCE
    for byte in data:
        if select.select([s], [], [], every)[0] or time.monotonic() > end:
            return
        try:
            s.sendall(bytes([byte]))
        except OSError:  # the server closed on us
            return


def only_408(data: bytes, words: str) -> None:
    [(status, headers, body)] = replies(data)
    assert status == 408 and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error" and words in error["message"]


def test_a_trickled_head_is_cut_at_its_deadline(start):
    gw = start(head_timeout=0.5)  # client_timeout stays 60 s: each byte comes long before it
    s = start.connect(gw)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % gw.server.port)
    trickle(s, b"X-Slow: " + b"z" * 5_000 + b"\r\n\r\n")
    only_408(until_closed(s), "did not arrive within 0.5 s")


def test_a_trickled_body_is_cut_at_its_deadline(start, home):
    gw = start(body_timeout=0.5)
    s = start.connect(gw)
    s.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n" % (gw.server.port, len(BODY))
    )
    trickle(s, BODY, every=0.1)
    only_408(until_closed(s), "the body did not arrive in time")
    assert (
        not (home.gateway_runs / "calls.jsonl").exists()
        or read_jsonl(home.gateway_runs / "calls.jsonl") == []
    )


def test_silent_and_slow_connections_are_closed_while_health_answers(start):
    gw = start(head_timeout=1.0)
    silent = [start.connect(gw) for _ in range(10)]
    slow = [start.connect(gw) for _ in range(10)]
    for s in slow:
        s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")  # a head begun and never finished
    assert gw.get("/health")[0] == 200
    for s in silent:  # nothing was asked, so nothing is answered: just closed
        assert until_closed(s) == b""
    for s in slow:
        only_408(until_closed(s), "did not arrive within 1 s")


def test_past_max_pending_the_slowest_heads_make_room(start):
    gw = start(max_pending=4, head_timeout=300)  # only the cap can free a place here
    held = []
    for _ in range(8):
        s = start.connect(gw)
        s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
        held.append(s)
    assert gw.get("/health")[0] == 200
    # to take each of the five newcomers (four slow ones and /health), the head that had been
    # arriving longest was dropped; the newest three still wait for theirs
    for s in held[:5]:
        only_408(until_closed(s), "needed this connection for another client")
    assert select.select(held[5:], [], [], 0)[0] == []


def test_slow_heads_never_hold_a_thread(start):
    # connection threads are kept between connections, for thread_idle seconds
    gw = start(max_connections=1, max_pending=50, head_timeout=300, thread_idle=0.2)
    before = threading.active_count()
    slow = [start.connect(gw) for _ in range(20)]
    for s in slow:
        s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
    most = before
    for _ in range(3):  # the one thread serves these in turn while twenty heads trickle
        assert gw.get("/health")[0] == 200
        most = max(most, threading.active_count())
    # the one connection thread (and /health's reserve, while it is busy) at most, never one
    # for each of the twenty; and they end once idle
    assert most <= before + 1 + HEALTH_RESERVE
    end = time.monotonic() + PATIENCE
    while threading.active_count() > before and time.monotonic() < end:
        time.sleep(0.01)
    assert threading.active_count() <= before
    assert select.select(slow, [], [], 0)[0] == []  # all still waiting


def test_at_the_cap_busy_connections_are_never_cut(start, sim):
    for member in ("fast", "mid", "slow"):
        sim.script(member, latency=0.5)  # two panels that are still running when /health comes
    gw = start(max_connections=2)
    port = gw.server.port
    panels = []
    for _ in range(2):
        s = start.connect(gw)
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
            b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (port, len(BODY), BODY)
        )
        panels.append(s)
    end = time.monotonic() + PATIENCE
    while sim.count("fast") < 2 and time.monotonic() < end:  # both panels are seated
        time.sleep(0.01)
    assert sim.count("fast") == 2
    other = start.connect(gw)
    other.sendall(
        b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port
    )
    assert [r[0] for r in replies(until_closed(other))] == [200]
    # the newcomer got in only once a panel had answered in full and its connection fell idle
    assert select.select(panels, [], [], 0)[0]
    for s in panels:  # and neither panel was cut
        [(status, _, body)] = one_reply(s)
        assert status == 200 and json.loads(body)["bench"]["panel"]


def test_at_the_cap_a_slow_next_head_goes_before_an_idle_connection(start):
    gw = start(max_connections=2, head_timeout=300)
    port = gw.server.port
    ask = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port
    slow, idle = start.connect(gw), start.connect(gw)  # each holds one of the two threads
    for s in (slow, idle):
        s.sendall(ask)
        assert [r[0] for r in one_reply(s)] == [200]
    # a reply is out before its thread marks the connection idle: until then it is busy, and
    # the newcomer below would take the only idle one instead
    assert wait_until(lambda: all(w.phase == IDLE for w in list(gw.server._wires.values())))
    slow.sendall(b"GET /v1/models HTTP/1.1\r\nX-Slow: ")  # its next head trickles
    assert gw.get("/v1/models")[0] == 200
    only_408(until_closed(slow), "needed this connection for another client")
    idle.sendall(ask)  # the pooled connection was left alone
    assert [r[0] for r in one_reply(idle)] == [200]


def test_with_every_thread_busy_and_the_queue_full_a_newcomer_gets_503(start, sim):
    for member in ("fast", "mid", "slow"):
        sim.script(member, latency=0.5)  # the one thread stays busy with this panel a while
    gw = start(max_connections=1, max_pending=1)
    port = gw.server.port
    panel = start.connect(gw)
    panel.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (port, len(BODY), BODY)
    )
    end = time.monotonic() + PATIENCE
    while sim.count("fast") < 1 and time.monotonic() < end:  # the panel holds the thread
        time.sleep(0.01)
    ask = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port
    first = start.connect(gw)
    first.sendall(ask)
    while not gw.server._heads.waiting and time.monotonic() < end:  # its head is in, queued
        time.sleep(0.01)
    second = start.connect(gw)
    second.sendall(ask)
    # past the queue of one, the second is told at once to come back; the first is answered
    # once the panel is done and its thread free
    [(status, headers, body)] = replies(until_closed(second))
    assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
    assert "connection limit" in json.loads(body)["error"]["message"]
    assert [r[0] for r in replies(until_closed(first))] == [200]
    [(status, _, body)] = one_reply(panel)
    assert status == 200 and json.loads(body)["bench"]["panel"]


@pytest.mark.slow
def test_the_limits_fit_the_descriptors_the_process_may_open(tmp_path):
    # a process that may open only 1,024 files cannot hold 512 pending and 512 served
    # connections with their seats' upstream sockets: the gateway takes fewer, and says so in
    # its limits, rather than fail to accept in a loop once the descriptors run out
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
        "import _bootstrap\n"
        "from panelist.gateway import make_gateway\n"
        f"server = make_gateway({str(tmp_path / 'data')!r}, env={{}})\n"
        "print(server.max_pending, server.max_connections)\n"
        "server.server_close(); server.panels.close(); server.guard.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=PATIENCE
    )
    assert out.returncode == 0, out.stderr
    pending, served = map(int, out.stdout.split())
    assert 0 < pending < 512 and 0 < served < 512
    assert pending + 6 * served + 128 <= 1024
