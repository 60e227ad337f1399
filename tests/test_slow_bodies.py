"""Bodies against the servers' bounds: a route's size cap and gate come before any body byte is
read, a body still arriving may be taken back for a newcomer, ``/health`` answers from its own
reserve while every thread is busy, and the bytes bodies hold in memory have one budget."""

import json
import select
import socket

import pytest

from conftest import DASHBOARD_TOKEN, PATIENCE, move_to, serving_threads, wait_until
from panelist.metrics.server.front.connection import BODY as READING_BODY, BODY_WAKE
from panelist.metrics.server.front.memory import GRANT_FACTOR
from panelist.gateway import make_gateway
from panelist.serve import make_dashboard
from test_gateway_head import BODY, replies
from test_slow_clients import one_reply, only_408, start, until_closed  # noqa: F401


def head(port: int, path: str, length: int, extra: bytes = b"") -> bytes:
    return (
        b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%s\r\n" % (path.encode(), port, length, extra)
    )


def error_of(body: bytes) -> dict:
    return json.loads(body)["error"]


def test_health_answers_from_its_reserve_while_every_thread_holds_a_panel(start, home, gated):
    move_to(home, gated, "fast", "mid", "slow")
    gw = start(max_connections=2)
    port = gw.server.port
    panels = []
    for _ in range(2):
        s = start.connect(gw)
        s.sendall(head(port, "/v1/chat/completions", len(BODY)) + BODY)
        panels.append(s)
    assert wait_until(lambda: gated.arrived.count("fast") == 2)  # both threads hold a panel
    for _ in range(6):  # more than the reserve: each is answered and its thread given back
        probe = start.connect(gw)
        probe.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        [(status, headers, _)] = replies(until_closed(probe))  # one request, then closed
        assert status == 200 and headers["connection"] == "close"
    gated.open("fast", "mid", "slow")
    for s in panels:  # the panels were never cut
        [(status, _, body)] = one_reply(s)
        assert status == 200 and json.loads(body)["bench"]["panel"]


def test_a_body_still_arriving_is_taken_back_for_a_newcomer(start):
    gw = start(max_connections=1, body_timeout=300)  # its deadline alone would hold it long
    port = gw.server.port
    slow = start.connect(gw)
    slow.sendall(head(port, "/v1/chat/completions", len(BODY)) + BODY[:5])
    assert wait_until(lambda: serving_threads(gw.server) == 1)  # it holds the one thread
    assert gw.get("/v1/models")[0] == 200
    only_408(until_closed(slow), "needed this connection for another client while the body")


def chat_of(size: int) -> bytes:
    """A chat request of a little over ``size`` bytes."""
    return json.dumps(
        {"model": "bench/trio", "messages": [{"role": "user", "content": "y" * size}]}
    ).encode()


def reading_a_body(gw) -> bool:
    return any(w.phase == READING_BODY for w in list(gw.server._wires.values()))


def receive(s: socket.socket, n: int) -> list:
    """The first ``n`` replies on ``s`` (a timeout fails the test)."""
    data = b""
    while len(replies(data)) < n:
        chunk = s.recv(65536)
        assert chunk, f"closed after {data[:200]!r}"
        data += chunk
    return replies(data)


@pytest.mark.parametrize("first", [0, 3_000, BODY_WAKE + 4_000])  # body bytes with the head
def test_a_body_sent_in_pieces_is_answered_as_its_last_piece_comes(start, first):
    # the route waits for the rest of the body; a read that waited for more bytes than are
    # still to come would wait until this deadline, far past the socket's PATIENCE
    gw = start(body_timeout=300)
    big = chat_of(3 * BODY_WAKE)
    s = start.connect(gw)
    s.settimeout(PATIENCE)
    s.sendall(head(gw.server.port, "/v1/chat/completions", len(big)) + big[:first])
    assert wait_until(lambda: reading_a_body(gw))
    piece = BODY_WAKE // 3  # each under the bytes a read waits for, the last one shorter
    for i in range(first, len(big), piece):
        s.sendall(big[i : i + piece])
    [(status, _, body)] = receive(s, 1)
    assert status == 200 and json.loads(body)["bench"]["panel"]


def test_requests_sent_together_on_one_connection_are_answered_in_turn(start):
    gw = start(body_timeout=300)  # a body read ahead with the head above must not be awaited
    port = gw.server.port
    bodies = [chat_of(100), chat_of(BODY_WAKE + 100), BODY]
    s = start.connect(gw)
    s.settimeout(PATIENCE)
    s.sendall(b"".join(head(port, "/v1/chat/completions", len(b)) + b for b in bodies))
    got = receive(s, 3)
    assert [r[0] for r in got] == [200, 200, 200]
    assert len({json.loads(r[2])["bench"]["panel"] for r in got}) == 3


def test_a_small_body_still_coming_is_awaited_without_a_thread(start):
    gw = start(max_connections=1, max_pending=8, body_hold=300, body_timeout=300)
    port = gw.server.port
    slow = start.connect(gw)
    slow.sendall(head(port, "/v1/chat/completions", len(BODY)) + BODY[:5])
    assert wait_until(lambda: gw.server._heads.holding == 1)
    assert serving_threads(gw.server) == 0
    # the one thread is free for others meanwhile, and nobody is taken back to make room
    for _ in range(2):
        assert gw.get("/v1/models")[0] == 200
    assert select.select([slow], [], [], 0)[0] == []
    slow.sendall(BODY[5:])  # the rest: on to a thread, and answered
    [(status, _, body)] = one_reply(slow)
    assert status == 200 and json.loads(body)["bench"]["panel"]


def test_a_request_sent_at_once_goes_before_bodies_that_did_not_come(start, home, gated):
    move_to(home, gated, "fast", "mid", "slow")
    gw = start(max_connections=1, max_pending=2, body_hold=0.1, body_timeout=300)
    port = gw.server.port
    panel = start.connect(gw)
    panel.sendall(head(port, "/v1/chat/completions", len(BODY)) + BODY)
    assert wait_until(lambda: gated.arrived.count("fast") == 1)  # the one thread holds it
    slow = []
    for _ in range(2):  # bodies that stop after five bytes: awaited, then queued for a thread
        s = start.connect(gw)
        s.sendall(head(port, "/v1/chat/completions", len(BODY)) + BODY[:5])
        slow.append(s)
    assert wait_until(lambda: len(gw.server._heads._late) == 2)
    other = start.connect(gw)  # the queue is full: the slow body waiting longest makes room
    other.sendall(
        b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port
    )
    [(status, headers, _)] = replies(until_closed(slow[0]))
    assert status == 503 and headers["retry-after"] == "1"
    gated.open("fast", "mid", "slow")
    assert one_reply(panel)[0][0] == 200
    # the request sent whole gets the thread first; the other slow body is still waited for
    assert [r[0] for r in replies(until_closed(other))] == [200]
    assert select.select([slow[1]], [], [], 0)[0] == []


def test_a_small_body_whose_client_awaits_100_continue_is_not_held(start):
    gw = start(body_hold=300)
    s = start.connect(gw)
    s.settimeout(PATIENCE)
    s.sendall(head(gw.server.port, "/v1/chat/completions", len(BODY), b"Expect: 100-continue\r\n"))
    assert s.recv(100).startswith(b"HTTP/1.1 100")  # at once, not after the hold
    s.sendall(BODY)
    [(status, _, _)] = receive(s, 1)
    assert status == 200


def test_a_login_body_past_its_small_cap_is_refused_before_it_is_read(start):
    dash = start(make_dashboard, env={"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN})
    s = start.connect(dash)
    s.sendall(head(dash.server.port, "/api/login", 5000))  # the head alone: no body follows
    [(status, headers, body)] = replies(until_closed(s))
    assert status == 413 and headers["connection"] == "close"
    assert "at most 4 KB" in error_of(body)["message"]


def test_dashboard_writes_have_a_cap_of_their_own(start):
    dash = start(make_dashboard)
    s = start.connect(dash)
    s.sendall(head(dash.server.port, "/api/collections", 2 * 2**20))
    [(status, _, body)] = replies(until_closed(s))
    assert status == 413 and "1 MB cap" in error_of(body)["message"]


def test_a_trickled_login_is_cut_at_its_deadline(start):
    dash = start(make_dashboard, env={"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN}, body_timeout=0.5)
    s = start.connect(dash)
    body = json.dumps({"token": "x" * 40}).encode()
    s.sendall(head(dash.server.port, "/api/login", len(body)) + body[:3])
    # nothing more is sent: the whole deadline (0.5 s plus 1 s per 16 KB) ends the wait
    only_408(until_closed(s), "the body did not arrive in time")


def test_a_body_is_never_read_before_the_gate_passed(start):
    gw = start(env={"PANELIST_REQUIRE_KEYS": "1"})
    s = start.connect(gw)
    s.sendall(head(gw.server.port, "/v1/chat/completions", 10_000))  # no key, and no body
    [(status, headers, body)] = replies(until_closed(s))
    assert status == 401 and headers["connection"] == "close"
    assert error_of(body)["code"] == "missing_key"


def test_past_the_memory_budget_a_big_body_waits_its_turn(start, home):
    # grants of GRANT_FACTOR times a body's size: room for one body of 300 KB, not two
    gw = start(max_in_flight=GRANT_FACTOR * 300_000 * 3 // 2)
    port = gw.server.port
    messages = [{"role": "user", "content": "y" * 300_000}]
    big = json.dumps({"model": "bench/trio", "messages": messages}).encode()
    first = start.connect(gw)
    first.sendall(head(port, "/v1/chat/completions", len(big), b"Expect: 100-continue\r\n"))
    assert first.recv(100).startswith(b"HTTP/1.1 100")  # granted: its body may come
    second = start.connect(gw)
    second.sendall(head(port, "/v1/chat/completions", len(big)))
    [(status, headers, body)] = replies(until_closed(second))
    assert status == 503 and headers["retry-after"] == "1"
    assert "PANELIST_MAX_INFLIGHT_MB" in error_of(body)["message"]
    first.sendall(big)
    [(status, _, body)] = one_reply(first)
    assert status == 200 and json.loads(body)["bench"]["panel"]
    # sent the moment the answer came, before the first's grant is back: the answered one's
    # grant is only settling, so the same body waits for it and gets in
    third = start.connect(gw)
    third.sendall(head(port, "/v1/chat/completions", len(big)) + big)
    assert [r[0] for r in one_reply(third)] == [200]


def test_a_body_that_could_never_fit_the_budget_is_too_large(start):
    gw = start(max_in_flight=1_000_000)
    s = start.connect(gw)
    s.sendall(head(gw.server.port, "/v1/chat/completions", 600_000))
    [(status, _, _)] = replies(until_closed(s))
    assert status == 413


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_body_that_is_not_utf8_is_refused(start, encoding):
    gw = start()
    data = json.dumps(
        {"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]}
    ).encode(encoding)
    status, body, _ = gw.request("POST", "/v1/chat/completions", raw=data)
    assert status == 400 and "UTF-8" in body["error"]["message"]


def test_a_bad_memory_budget_setting_stops_the_server_at_start(folder):
    from panelist.metrics.errors import ConfigInvalid

    with pytest.raises(ConfigInvalid, match="PANELIST_MAX_INFLIGHT_MB"):
        make_gateway(folder, env={"PANELIST_MAX_INFLIGHT_MB": "-5"})


def test_a_big_prompt_reaches_every_seat_whole(start, sim):
    # the seats share one encoding of a big prompt: each must still receive all of it
    from conftest import TEST_MODELS

    for model in TEST_MODELS:  # members and explorers alike
        sim.script(model, rules=[{"contains": "the-end-é", "answer": f"{model} read it all"}])
    gw = start()
    prompt = "z" * 300_000 + " the-end-é"
    status, body, _ = gw.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": prompt}]},
    )
    assert status == 200
    record = gw.get(f"/bench/panels/{body['bench']['panel']}")[1]
    seats = record["seats"]
    assert len(seats) == 5
    assert all(seat["answer"] == f"{seat['alias']} read it all" for seat in seats), seats
