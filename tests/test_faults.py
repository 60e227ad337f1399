"""Faults: broken upstreams, slow and vanishing clients, a SIGKILLed gateway, two gateways on one
data folder, and config files saved by two processes at once."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import Client, Gateway, PATIENCE, read_jsonl, serving_threads, set_limits, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.roster.collection import Collections
from panelist.metrics.server.keys import Keys
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Roster

ROOT = Path(__file__).resolve().parent.parent


def ask(gw, model="bench/trio", headers=None, **extra):
    return gw.post(
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "Review: x"}], **extra},
        headers=headers,
    )


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- upstream faults ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fault, kind",
    [
        ("refused", "connection"),
        ("reset", "connection"),
        ("garbage", "bad_reply"),
        ("error_body", "server_error"),
        ("drip", "timeout"),
    ],
)
def test_an_upstream_fault_is_a_named_seat_error(gateway, home, sim, fault, kind):
    if fault == "refused":
        roster = Roster(home)
        roster.add_endpoint("gone", f"http://127.0.0.1:{closed_port()}/v1")
        roster.add_model("mid", "gone", family="mid", context=100_000)
    elif fault == "drip":  # a reply that trickles forever: only the seat's deadline ends it
        # ~20 s for the whole reply at this pace; the deadline leaves the other seats (answering
        # at once) ample room on a loaded machine
        set_limits(home, seat_timeout=2)
        sim.script("mid", drip=0.05)
    else:
        sim.script("mid", fail=fault)
    status, body, _ = ask(gateway)
    assert status == 200
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    assert seats["mid"]["status"] == "error" and seats["mid"]["error"].startswith(kind + ":")
    failed = {a: s["error"] for a, s in seats.items() if a != "mid" and s["status"] != "ok"}
    assert not failed, f"seats other than mid failed too: {failed}"
    assert f"error: {kind}:" in body["choices"][0]["message"]["content"]
    (logged,) = [
        e for e in read_jsonl(home.gateway_runs / "evidence.jsonl") if e.get("alias") == "mid"
    ]
    assert logged["status"] == "error" and logged["error"].startswith(kind)
    if fault == "drip":
        assert sim.wait_disconnects(1, timeout=PATIENCE)  # the trickle was hung up on


# -- slow and broken clients ----------------------------------------------------------------------
@pytest.fixture()
def impatient(home):
    """A gateway that gives a stalled client half a second."""
    with Gateway(make_gateway(home, env={}, client_timeout=0.5)) as gw:
        yield gw


def connect(gw) -> socket.socket:
    return socket.create_connection(("127.0.0.1", gw.server.port), timeout=PATIENCE)


def still_open(s: socket.socket) -> bool:
    """Whether the server has neither hung up on ``s`` nor sent anything on it (yet)."""
    s.setblocking(False)
    try:
        s.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.settimeout(PATIENCE)
    return False


def stall(gw, n: int) -> list[socket.socket]:
    """``n`` connections that each send the start of a header section and never finish it."""
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{gw.server.port}\r\n"
        "Content-Type: application/json\r\n"
    ).encode()
    stalled = []
    for _ in range(n):
        stalled.append(connect(gw))
        stalled[-1].sendall(head)
    return stalled


def test_stalled_clients_never_starve_others(gateway):
    # the default gateway waits a minute for a stalled client: the health check below is
    # answered while all forty are still held, however slowly this machine runs, and none of
    # them holds a handler thread (an unfinished head waits on the one heads thread)
    stalled = stall(gateway, 40)
    try:
        assert gateway.get("/health")[0] == 200
        dropped = [i for i, s in enumerate(stalled) if not still_open(s)]
        assert not dropped, f"stalled connections {dropped} were let go before /health answered"
        assert wait_until(lambda: serving_threads(gateway.server) == 0), (
            f"{serving_threads(gateway.server)} handler threads are held by unfinished heads"
        )
    finally:
        for s in stalled:
            s.close()


def test_stalled_clients_are_dropped_without_a_thread(impatient):
    gw = impatient
    stalled = stall(gw, 40)
    try:
        # silent past client_timeout: each is hung up on, without an answer
        kept = [i for i, s in enumerate(stalled) if s.recv(1024) != b""]
        assert not kept, f"the server answered instead of hanging up on stalled clients {kept}"
        assert serving_threads(gw.server) == 0, "a stalled head was given a handler thread"
    finally:
        for s in stalled:
            s.close()
    assert gw.get("/health")[0] == 200


def test_a_half_body_gets_408_and_the_connection_closes(impatient):
    gw = impatient
    s = connect(gw)
    s.sendall(
        (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{gw.server.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            '{"model": "bench/trio", '
        ).encode()
    )
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"Connection: close" in head
    assert "stopped arriving" in json.loads(body)["error"]["message"]


@pytest.mark.parametrize("stream", [True, False])
def test_a_caller_that_leaves_releases_its_seats_and_thread(impatient, sim, stream):
    gw = impatient
    sim.script("slow", latency=3600)  # a seat that would hold on for an hour
    s = connect(gw)
    body = json.dumps(
        {"model": "bench/trio", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    s.sendall(
        (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{gw.server.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    if stream:
        assert s.recv(4096).startswith(b"HTTP/1.1 200")  # the stream has begun
    assert wait_until(lambda: sim.count("slow") == 1), "the slow seat was never asked"
    assert serving_threads(gw.server) == 1  # this connection's, busy with the panel
    s.close()  # gone mid-stream / mid-panel
    assert sim.wait_disconnects(1, timeout=PATIENCE)  # the slow seat's upstream call was dropped
    assert wait_until(lambda: serving_threads(gw.server) == 0), (
        "the thread of a caller that left is still serving it"
    )
    assert gw.get("/health")[0] == 200


# -- helpers for gateway processes ----------------------------------------------------------------
class Process:
    """``python gateway.py --data DIR --port 0`` in its own process; a context manager that
    stops it (if the test has not killed it) and fails on a traceback in its stderr."""

    def __init__(self, data: Path, env: dict | None = None):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "gateway.py"), "--data", str(data), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(clean, PYTHONUNBUFFERED="1", **(env or {})),
        )
        line = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not found:
            err = self.stop()
            raise AssertionError(f"the gateway did not start: {line}{err}")
        self.gw = Client(f"http://127.0.0.1:{found.group(1)}")

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.returncode is None:
            err = self.stop()
            if exc[0] is None:
                assert "Traceback" not in err, err

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=PATIENCE)

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def parsed(path: Path) -> tuple[list[dict], list[bytes]]:
    good, bad = [], []
    for line in lines(path):
        try:
            good.append(json.loads(line))
        except ValueError:
            bad.append(line)
    return good, bad


def load(gw, stop: threading.Event, done: list, headers=None) -> None:
    while not stop.is_set():
        try:
            status, body, _ = ask(gw, headers=headers)
        except (OSError, http.client.HTTPException):
            return  # the gateway is gone (killed mid-reply: an incomplete read)
        if status == 200:
            done.append(body["bench"])


# -- crash safety ---------------------------------------------------------------------------------
def test_a_sigkilled_gateway_loses_only_what_was_in_flight(home, sim):
    runs = home.gateway_runs
    stop, done, workers = threading.Event(), [], []
    with Process(home.root) as first:
        judged = Counter()
        for _ in range(3):  # verdicts acknowledged before the crash
            status, body, _ = ask(first.gw)
            assert status == 200
            for seat in body["bench"]["seats"][:3]:
                status, got, _ = first.gw.post(
                    "/bench/verdict", {"call": seat["call"], "useful": True}
                )
                assert status == 200 and got["written"]
                judged[seat["alias"]] += 1
        try:
            workers += [
                threading.Thread(target=load, args=(first.gw, stop, done)) for _ in range(6)
            ]
            for w in workers:
                w.start()
            assert wait_until(lambda: len(done) >= 20, 3 * PATIENCE), (
                f"only {len(done)} panels answered"
            )
        finally:
            first.kill()  # mid-load: panels and seats are being written
            stop.set()
            for w in workers:
                w.join(PATIENCE)
    assert not [w for w in workers if w.is_alive()], "a load thread outlived the killed gateway"
    for path in (runs / "calls.jsonl", runs / "evidence.jsonl"):
        records, torn = parsed(path)
        assert records and len(torn) <= 1 and (not torn or lines(path)[-1] in torn)
    answered = [b["panel"] for b in done]
    logged = [c["panel"] for c in read_jsonl(runs / "calls.jsonl")]
    assert set(answered) <= set(logged) and len(logged) == len(set(logged))
    # a write cut off by the crash, as a filesystem that tears may leave it
    with open(runs / "evidence.jsonl", "ab") as f:
        f.write(b'{"v":1,"kind":"verdict","call":"p2026')

    with Process(home.root) as second:
        for bench in done[:5]:  # every answered panel is served back, and can be judged
            status, record, _ = second.gw.get(f"/bench/panels/{bench['panel']}")
            assert status == 200 and len(record["seats"]) == len(bench["seats"])
            seat = bench["seats"][0]
            status, got, _ = second.gw.post(
                "/bench/verdict", {"call": seat["call"], "useful": False}
            )
            assert status == 200 and got["written"]
        assert ask(second.gw)[0] == 200
    for path in (runs / "calls.jsonl", runs / "evidence.jsonl"):
        records, torn = parsed(path)  # the next append cut every torn line off
        assert records and torn == [] and path.read_bytes().endswith(b"\n"), path.name
    with Ledger(runs) as ledger:
        states = ledger.states(judged, "general")
        for alias, n in judged.items():
            assert states[alias].useful == n, alias
        not_useful = Counter(b["seats"][0]["alias"] for b in done[:5])
        states = ledger.states(not_useful, "general")
        for alias, n in not_useful.items():
            assert states[alias].not_useful == n, alias


# -- two gateways, one data folder ----------------------------------------------------------------
def test_two_gateway_processes_share_one_data_folder(home, sim):
    keys = Keys(home)
    bulk, _ = keys.create("bulk")
    metered, _ = keys.create("metered", rpm=20)
    env = {"PANELIST_REQUIRE_KEYS": "1"}
    with Process(home.root, env) as a, Process(home.root, env) as b:
        replies: list = []
        lock = threading.Lock()

        def drive(gws, n, headers, out):
            for i in range(n):
                status, body, _ = ask(gws[i % 2], headers=headers)
                with lock:
                    out.append((status, body))

        workers = [
            threading.Thread(
                target=drive,
                args=(
                    (a.gw, b.gw)[:: 1 - 2 * (i % 2)],
                    12,
                    {"Authorization": f"Bearer {bulk}"},
                    replies,
                ),
            )
            for i in range(8)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(3 * PATIENCE)
        assert not [w for w in workers if w.is_alive()], "a client thread is still asking"
        assert [s for s, _ in replies] == [200] * 96
        # requests a minute, counted once across both processes
        statuses: list = []

        def meter(gw):
            for _ in range(5):
                status, _, headers = gw.get(
                    "/v1/models", headers={"Authorization": f"Bearer {metered}"}
                )
                with lock:
                    statuses.append((status, headers["Retry-After"]))

        workers = [threading.Thread(target=meter, args=(gw,)) for gw in (a.gw, b.gw) * 3]
        began = time.time()
        for w in workers:
            w.start()
        for w in workers:
            w.join(3 * PATIENCE)
        ended = time.time()
        assert not [w for w in workers if w.is_alive()], "a client thread is still asking"
        counted = Counter(s for s, _ in statuses)
        assert set(counted) <= {200, 429} and sum(counted.values()) == 30, counted
        if began // 60 == ended // 60:
            assert counted == {200: 20, 429: 10}
        else:  # a new minute began meanwhile and made room: never fewer admitted, though
            assert counted[200] >= 20, counted
        vague = [after for s, after in statuses if s == 429 and not (after and int(after) >= 1)]
        assert not vague, f"429s without a Retry-After of a second or more: {vague}"
    runs = home.gateway_runs
    calls, torn = parsed(runs / "calls.jsonl")
    assert not torn and len(calls) == 96
    panels = [c["panel"] for c in calls]
    assert len(set(panels)) == 96 and set(panels) == {r["bench"]["panel"] for _, r in replies}
    evidence, torn = parsed(runs / "evidence.jsonl")
    seats = [e for e in evidence if e["kind"] == "seat"]
    assert not torn and len(seats) == sum(len(c["seats"]) for c in calls)
    assert len({s["call"] for s in seats}) == len(seats)
    assert {s["key"] for s in seats} == {"bulk"}


# -- config files ---------------------------------------------------------------------------------
def test_concurrent_collection_saves_lose_nothing(home):
    cli = [sys.executable, str(ROOT / "metrics" / "offload.py"), "--data", str(home.root)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}
    procs = [
        subprocess.Popen(
            cli + ["collection", "save", f"c{i}", "--members", "fast,mid"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(6)
    ]
    # and two processes saving in a tight loop, so the writes really do overlap
    loop = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _bootstrap\n"
        "from panelist.metrics.roster.collection import Collections\n"
        "from panelist.metrics.home import open_home\n"
        "from panelist.metrics.roster.roster import Roster\n"
        "home = open_home(sys.argv[2]); view = Roster(home).view()\n"
        "for i in range(40):\n"
        "    Collections(home).save(view, f'{sys.argv[3]}{i}', ['fast', 'slow'])\n"
    )
    procs += [
        subprocess.Popen(
            [sys.executable, "-c", loop, str(ROOT), str(home.root), prefix],
            env=env,
            stderr=subprocess.PIPE,
        )
        for prefix in ("a", "b")
    ]
    errors = []
    for p in procs:
        try:
            errors.append(p.communicate(timeout=3 * PATIENCE)[1])
        except subprocess.TimeoutExpired:
            p.kill()
            errors.append(p.communicate()[1] + b" (killed: it never finished)")
    failed = [err for p, err in zip(procs, errors) if p.returncode != 0]
    assert not failed, failed
    names = set(Collections(home).all())
    expected = {"trio"} | {f"c{i}" for i in range(6)} | {f"{p}{i}" for p in "ab" for i in range(40)}
    assert names == expected
    changes = [
        c["what"] for c in read_jsonl(home.file("changes.jsonl")) if c["file"] == "collections.json"
    ]
    assert sorted(changes) == sorted(f"collection {n}" for n in expected)
