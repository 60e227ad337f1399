"""A refused login is answered only after a pause, and the connection waits for it in the heads
thread, not in a handler thread: a client that waits for each answer before it tries again can
only try so often, and costs the server nothing while it waits. The right token is never paused."""

import json
import select

import pytest

from conftest import DASHBOARD_TOKEN, wait_until
from panelist.metrics.errors import ConfigInvalid
from panelist.serve import make_dashboard
from test_gateway_head import replies
from test_slow_bodies import head
from test_slow_clients import one_reply, start, until_closed  # noqa: F401

PAUSED = {"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN, "PANELIST_LOGIN_PAUSE": "30"}


def login(start, dash, body: bytes):
    s = start.connect(dash)
    s.sendall(head(dash.server.port, "/api/login", len(body)) + body)
    return s


def wrong(start, dash):
    return login(start, dash, json.dumps({"token": "not-the-admin-token"}).encode())


def test_a_refused_login_waits_for_its_answer_holding_no_thread(start):
    dash = start(make_dashboard, env=PAUSED, max_connections=1)  # one handler thread in all
    guess = wrong(start, dash)
    assert wait_until(lambda: dash.server.answers_waiting == 1)
    # the one thread is free: the admin logs in at once, while the guess still has no answer
    right = login(start, dash, json.dumps({"token": DASHBOARD_TOKEN}).encode())
    [(status, headers, _)] = one_reply(right)
    assert status == 200 and "panelist_session=" in headers["set-cookie"]
    assert select.select([guess], [], [], 0)[0] == []
    dash.server.close()  # a stopping server sends what it owes before it hangs up
    [(status, headers, body)] = replies(until_closed(guess))
    assert status == 401 and headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == "wrong_token"


def test_a_malformed_login_waits_as_a_wrong_one_does(start):
    dash = start(make_dashboard, env=PAUSED)
    blanks = login(start, dash, b" " * 200)  # no JSON at all: no token could be in it
    assert wait_until(lambda: dash.server.answers_waiting == 1)
    assert select.select([blanks], [], [], 0)[0] == []
    dash.server.close()
    [(status, _, _)] = replies(until_closed(blanks))
    assert status == 400


def test_past_what_the_heads_thread_may_hold_a_refusal_is_answered_at_once(start):
    dash = start(make_dashboard, env=PAUSED, max_pending=1)
    first = wrong(start, dash)
    assert wait_until(lambda: dash.server.answers_waiting == 1)
    [(status, _, _)] = replies(until_closed(wrong(start, dash)))
    assert status == 401
    assert select.select([first], [], [], 0)[0] == []  # the first still waits its pause


def test_a_client_that_leaves_while_it_waits_costs_nothing_more(start):
    dash = start(make_dashboard, env=dict(PAUSED, PANELIST_LOGIN_PAUSE="0.2"))
    wrong(start, dash).close()
    assert wait_until(lambda: dash.server.answers_waiting == 0)
    assert dash.get("/health")[0] == 200


@pytest.mark.parametrize("value", ["-1", "31", "soon", "nan"])
def test_a_login_pause_out_of_range_stops_the_server(folder, value):
    with pytest.raises(ConfigInvalid, match="PANELIST_LOGIN_PAUSE"):
        make_dashboard(folder, env={"PANELIST_LOGIN_PAUSE": value})
