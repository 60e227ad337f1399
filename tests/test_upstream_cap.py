"""``max_concurrent`` holds at the upstream itself when seats time out: a slot is given back
once the upstream is done with the call, not when the seat gives up on it. The upstream here
is the simulated provider with a ``deaf`` model (it works through its whole latency even after
the client left, as a provider that finishes generating does), and it counts the calls it is
working on itself (``peak_in_flight``)."""

import http.client
import socket
import threading

import pytest

from conftest import wait_until
from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.seats import SeatCall, Seats
from panelist.metrics.upstream.admission import Admission
from panelist.metrics.upstream.settle import Release, Settler
from panelist.metrics.upstream.sim import SimUpstream

# the upstream counts its own connections: the wire is what is tested
pytestmark = pytest.mark.slow

CAP = 2
MODEL_TIME = 1.0  # seconds the model takes, whoever is still listening (far past SEAT_TIMEOUT,
# so that no seat answers in time even on a loaded machine)
SEAT_TIMEOUT = 0.15  # shorter than the model's time: every seat admitted times out


@pytest.fixture()
def deaf():
    with SimUpstream({"m": {"latency": MODEL_TIME, "deaf": True}}) as sim:
        yield sim


def capped_seats(tmp_path, sim):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("ep", sim.url)
    roster.add_model("m", "ep", family="f", context=100_000)
    roster.set_limits("endpoint", "ep", {"max_concurrent": CAP})
    return roster, Seats(roster, admission=Admission(home))


@pytest.mark.parametrize("poll", [True, False], ids=["polled", "threads"])
def test_the_upstream_never_sees_more_calls_than_the_cap(tmp_path, deaf, poll):
    roster, seats = capped_seats(tmp_path, deaf)
    model = roster.view().models["m"]
    results, lock = [], threading.Lock()

    def panels(worker: int) -> None:  # panels back to back, as busy clients send them
        for n in range(5):
            calls = [
                SeatCall(
                    label=f"{worker}.{n}.{k}",
                    role="member",
                    model=model,
                    messages=[{"role": "user", "content": "review this"}],
                    timeout=SEAT_TIMEOUT,
                    wait_in_timeout=True,
                    retries=2,
                )
                for k in range(2)
            ]
            done = seats.start(calls, timeout=SEAT_TIMEOUT, poll=poll).wait()
            with lock:
                results.extend(done)

    workers = [threading.Thread(target=panels, args=(w,)) for w in range(4)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert wait_until(lambda: deaf.in_flight == 0, 10), "the upstream ended its calls"
    finally:
        seats.close()
    assert len(results) == 40
    assert {r.status for r in results} == {"error"}, "no seat could answer in its time"
    sent = [r for r in results if r.error_kind != "at_limit"]
    assert sent and {r.error_kind for r in sent} == {"timeout"}
    assert deaf.peak_in_flight <= CAP, f"the upstream saw {deaf.peak_in_flight} at once"
    assert len(deaf.requests) == len(sent), "one upstream call per seat sent, none unseen"


def test_a_cut_connection_is_kept_until_its_upstream_ends_the_call(deaf):
    """The transport's part alone: a connection cut mid-call settles, and its release runs once
    the upstream has answered (into our closed socket), not when it was cut."""
    deaf.script("held", deaf=True, hold_after=1)  # its first call answers, the second waits
    released = threading.Event()
    settler = Settler()
    host, port = deaf.url.split("//")[1].split("/")[0].rsplit(":", 1)
    body = b'{"model": "held", "messages": [{"role": "user", "content": "hi"}]}'
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    first = http.client.HTTPConnection(host, int(port), timeout=10)
    first.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    assert first.getresponse().status == 200
    first.close()
    sock = socket.create_connection((host, int(port)))
    try:
        sock.sendall(request)
        assert deaf.wait_held("held", 1, 10)
        release = Release(released.set)
        settler.add(sock, release)  # shut down: the upstream hears we left, and works on
        release.done()  # the exchange is over: only the settling holds it now
        assert settler.settling == 1 and not released.is_set(), "kept while the upstream works"
        deaf.release("held")  # the upstream ends the call (it answers into a closed socket)
        assert released.wait(10), "let go once the upstream ended the call"
        assert settler.settling == 0 and deaf.in_flight == 0
    finally:
        settler.close()


def test_a_connection_the_upstream_closed_first_is_let_go_at_once(deaf):
    released = threading.Event()
    settler = Settler()
    ours, theirs = socket.socketpair()  # no TCP state to read: nothing says the upstream works
    try:
        release = Release(released.set)
        settler.add(ours, release)
        release.done()
        assert released.is_set() and settler.settling == 0
    finally:
        theirs.close()
        settler.close()
