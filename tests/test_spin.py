"""Looking for bytes due at once before sleeping (``metrics.upstream.spin``): its setting, what a
look returns, and panels served the same with it off and on."""

import http.client
import json
import select
import socket

import pytest

from conftest import PATIENCE, Gateway
from panelist.gateway import make_gateway
from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.upstream import spin


@pytest.fixture(autouse=True)
def default_spin():
    spin.configure({})
    yield
    spin.configure({})


@pytest.fixture()
def pair():
    a, b = socket.socketpair()
    poller = select.poll()
    poller.register(a, select.POLLIN)
    yield a, b, poller
    a.close()
    b.close()


def test_the_setting_is_microseconds_and_zero_turns_it_off():
    assert spin.limit() == spin.DEFAULT_US / 1e6
    spin.configure({"PANELIST_SPIN_US": "500"})
    assert spin.limit() == 0.0005
    spin.configure({"PANELIST_SPIN_US": "0"})
    assert spin.limit() == 0
    spin.configure({"PANELIST_SPIN_US": ""})
    assert spin.limit() == spin.DEFAULT_US / 1e6


@pytest.mark.parametrize("value", ["-1", "fast", "1.5", str(spin.MAX_US + 1)])
def test_a_bad_setting_is_refused_before_a_gateway_opens(folder, value):
    with pytest.raises(ConfigInvalid, match="PANELIST_SPIN_US must be a whole number of "
                                            "microseconds from 0 to 10000"):
        make_gateway(folder, env={"PANELIST_SPIN_US": value})
    assert spin.limit() == spin.DEFAULT_US / 1e6   # the refused value was not taken


def test_a_look_returns_what_is_ready(pair):
    a, b, poller = pair
    b.sendall(b"x")
    assert [fd for fd, _ in spin.soon(poller, 1.0)] == [a.fileno()]


def test_nothing_ready_and_no_time_to_look_returns_nothing(pair):
    _, _, poller = pair
    assert spin.soon(poller, 0.0) == []          # the caller allows no wait
    assert spin.soon(poller, 1.0) == []          # nothing came within the look
    spin.configure({"PANELIST_SPIN_US": "0"})
    assert spin.soon(poller, 1.0) == []


def test_one_thread_looks_at_a_time(pair):
    a, b, poller = pair
    b.sendall(b"x")
    with spin._TOKEN:   # another thread is looking: this one sleeps at once instead
        assert spin.soon(poller, 1.0) == []
    assert spin.soon(poller, 1.0) != []


def test_no_look_while_other_requests_are_worked_on(pair):
    a, b, poller = pair
    b.sendall(b"x")
    with spin.working():   # a request of this process is being answered
        assert spin.soon(poller, 1.0) == []             # a kept connection waits asleep
        assert spin.soon(poller, 1.0, mine=1) != []     # that request's own seats may look
        with spin.working():
            assert spin.soon(poller, 1.0, mine=1) == []   # another one is worked on too
    assert spin.soon(poller, 1.0) != []


@pytest.mark.parametrize("us", ["0", "200"])
def test_panels_on_a_kept_connection_are_answered_alike_with_looking_off_and_on(home, us):
    with Gateway(make_gateway(home, env={"PANELIST_SPIN_US": us})) as gw:
        host, port = gw.server.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=PATIENCE)
        try:
            for n in range(3):   # one connection: each next request follows a reply
                body = json.dumps({"model": "bench/trio",
                                   "messages": [{"role": "user", "content": f"Review {n}"}]})
                conn.request("POST", "/v1/chat/completions", body,
                             {"Content-Type": "application/json"})
                reply = conn.getresponse()
                data = json.loads(reply.read())
                assert reply.status == 200, data
                assert not reply.will_close
                assert [s["status"] for s in data["bench"]["seats"]] == ["ok"] * 5
        finally:
            conn.close()
