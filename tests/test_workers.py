"""``--workers N``: N processes on one port over one data folder, started, supervised and stopped
by one parent. Everything here runs real processes (``python gateway.py`` / ``python serve.py``)
on real sockets; the upstream is the simulator (or the gated one) in this test process.

Which worker answered is told by ``GET /health`` (``pid``); a kept connection stays with the
worker that accepted it, so a test reaches a chosen worker by opening connections until one
lands there (the kernel spreads them)."""

import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import DASHBOARD_TOKEN, PATIENCE, logged, move_to, set_limits, wait_until
from panelist.metrics.cli.main import main
from panelist.metrics.home import open_home
from panelist.metrics.server.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
START = 4 * PATIENCE  # a group starts several interpreters; a loaded machine is slow at it
CHAT = {"model": "bench/trio", "messages": [{"role": "user", "content": "review this, please"}]}


class Group:
    """``python <entry> --workers N --port 0 --data DIR`` in its own process; its URL line read.
    A context manager that stops it (SIGTERM) unless the test did, and fails on a traceback."""

    def __init__(self, data, *, workers="2", entry="gateway.py", env=None, extra=()):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / entry),
                "--data",
                str(data),
                "--port",
                "0",
                "--workers",
                workers,
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(clean, PYTHONUNBUFFERED="1", **(env or {})),
            start_new_session=True,
        )  # its own process group, as a terminal's job has
        self.err = ""
        ready, _, _ = select.select([self.proc.stdout], [], [], START)
        line = self.proc.stdout.readline() if ready else ""
        found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not found:
            self.stop()
            raise AssertionError(f"the group did not start: {line!r}\n{self.err}")
        self.port = int(found.group(1))
        pids = re.search(r"pids ([\d, ]+)", line)
        self.pids = [int(p) for p in pids.group(1).split(", ")] if pids else []

    def stop(self, sig=signal.SIGTERM) -> int:
        """Signal it (unless it ended), wait for it, read what it said on stderr (once)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            try:
                _, self.err = self.proc.communicate(timeout=START)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                _, self.err = self.proc.communicate()
        return self.proc.returncode

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        if exc[0] is None:
            assert "Traceback" not in self.err, self.err

    # -- reaching the workers ----------------------------------------------------------------------
    def connect(self) -> tuple[http.client.HTTPConnection, int]:
        """A kept connection and the pid of the worker that answers it."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=PATIENCE)
        status, body = exchange(conn, "GET", "/health")
        assert status == 200 and body["ok"] is True
        return conn, body["pid"]

    def connect_to(self, pid: int) -> http.client.HTTPConnection:
        """A kept connection answered by the worker ``pid`` (new ones until one lands there)."""
        for _ in range(500):
            conn, got = self.connect()
            if got == pid:
                return conn
            conn.close()
        raise AssertionError(f"no connection reached worker {pid}")


def exchange(conn, method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    conn.request(method, path, data, hdrs)
    resp = conn.getresponse()
    raw = resp.read()
    conn.headers_of_last = resp.headers
    return resp.status, json.loads(raw or b"null")


def gone(pid: int) -> bool:
    """The process has ended (not running; an orphan awaiting its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def explorer(reply: dict) -> dict:
    (seat,) = [s for s in reply["bench"]["seats"] if s["seat"] == "explorer"]
    return seat


# -- many requests on one port ---------------------------------------------------------------------
def test_two_workers_answer_every_panel_on_one_port_and_log_each_once(home):
    with Group(home.root) as group:
        assert len(group.pids) == 2 and len(set(group.pids)) == 2

        def one(_):
            conn = http.client.HTTPConnection("127.0.0.1", group.port, timeout=PATIENCE)
            try:
                status, reply = exchange(conn, "POST", "/v1/chat/completions", CHAT)
                _, health = exchange(conn, "GET", "/health")  # the same worker, kept
                return status, reply["bench"]["panel"], health["pid"], health["worker"]
            finally:
                conn.close()

        with ThreadPoolExecutor(8) as pool:
            done = list(pool.map(one, range(40)))
        assert [d[0] for d in done] == [200] * 40
        served = Counter(d[2] for d in done)
        assert set(served) == set(group.pids), served  # both workers answered some
        assert {d[3] for d in done} == {0, 1}
        panels = [d[1] for d in done]
        assert len(set(panels)) == 40  # ids unique across the processes
        assert wait_until(lambda: len(logged(home)) == 40)
        assert sorted(r["panel"] for r in logged(home)) == sorted(panels)


# -- a verdict through one worker, seating through the other ---------------------------------------
def test_a_verdict_given_to_one_worker_moves_seating_in_the_other(home):
    """One explorer seat, three candidates: x-one, x-three, x-two sit in turn; a useful verdict
    on x-three (through worker A) makes it claim twice its wait, so the next panel (through
    worker B) seats x-three instead of x-one, whose turn it would have been."""
    set_limits(home, max_explorers=1)
    with Group(home.root) as group:
        a, b = group.pids
        to_a, to_b = group.connect_to(a), group.connect_to(b)
        try:
            seated = []
            for conn in (to_a, to_b, to_a):
                status, reply = exchange(conn, "POST", "/v1/chat/completions", CHAT)
                assert status == 200
                seated.append(explorer(reply))
            assert [s["alias"] for s in seated] == ["x-one", "x-three", "x-two"]
            judged = seated[1]["call"]
            status, owed = exchange(to_b, "GET", "/bench/pending")
            assert status == 200 and judged in {p["call"] for p in owed["data"]}

            status, verdict = exchange(
                to_a, "POST", "/bench/verdict", {"call": judged, "useful": True}
            )
            assert status == 200 and verdict["written"] is True

            status, owed = exchange(to_b, "GET", "/bench/pending")
            assert status == 200 and judged not in {p["call"] for p in owed["data"]}
            status, reply = exchange(to_b, "POST", "/v1/chat/completions", CHAT)
            assert status == 200 and explorer(reply)["alias"] == "x-three"
        finally:
            to_a.close()
            to_b.close()


# -- a key's rate across workers -------------------------------------------------------------------
def test_a_keys_requests_a_minute_hold_across_workers(home):
    secret, _ = Keys(home).create("robot", rpm=3)
    bearer = {"Authorization": f"Bearer {secret}"}
    with Group(home.root, env={"PANELIST_REQUIRE_KEYS": "1"}) as group:
        a, b = group.pids
        to_a, to_b = group.connect_to(a), group.connect_to(b)
        try:
            statuses = [
                exchange(conn, "GET", "/v1/models", headers=bearer)[0]
                for conn in (to_a, to_b, to_a, to_b)
            ]
            assert statuses == [200, 200, 200, 429]
            assert int(to_b.headers_of_last["Retry-After"]) >= 1
            status, body = exchange(to_a, "GET", "/v1/models", headers=bearer)
            assert status == 429 and "3 requests a minute" in body["error"]["message"]
        finally:
            to_a.close()
            to_b.close()


# -- stopping --------------------------------------------------------------------------------------
def test_sigterm_stops_every_worker_once_the_panels_in_flight_are_answered_and_logged(home, gated):
    move_to(home, gated, "fast", "mid", "slow")
    set_limits(home, max_explorers=0)
    group = Group(home.root)
    try:
        a, b = group.pids
        conns = [group.connect_to(pid) for pid in (a, b, a, b, a, b)]
        replies: list = [None] * len(conns)

        def ask(i):
            replies[i] = exchange(conns[i], "POST", "/v1/chat/completions", CHAT)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(conns))]
        for t in threads:
            t.start()
        assert wait_until(lambda: len(gated.arrived) == 3 * len(conns))  # all in flight
        group.proc.send_signal(signal.SIGTERM)

        def refused():
            probe = http.client.HTTPConnection("127.0.0.1", group.port, timeout=1)
            try:
                probe.connect()
            except ConnectionRefusedError:
                return True
            finally:
                probe.close()
            return False

        assert wait_until(refused)  # no worker takes new connections any more
        assert group.proc.poll() is None  # yet the group waits for what it owes
        gated.open("fast", "mid", "slow")
        for t in threads:
            t.join(PATIENCE)
        assert [r[0] for r in replies] == [200] * len(conns)
        assert group.proc.wait(START) == 0
        assert gone(a) and gone(b)
        lines = logged(home)
        assert sorted(r["panel"] for r in lines) == sorted(r[1]["bench"]["panel"] for r in replies)
        assert all(s["status"] == "ok" for r in lines for s in r["seats"])
    finally:
        for conn in locals().get("conns", []):
            conn.close()
        group.stop()
    assert "Traceback" not in group.err, group.err


def test_sigterm_under_load_loses_no_answered_panel_and_answers_every_logged_one(home):
    """Clients ask back to back until the group stops: every panel answered is in the log and
    every panel in the log was answered (a request either got its reply or never began)."""
    group = Group(home.root)
    answered: list[str] = []
    refused: list[tuple[int, dict]] = []  # replies that were not answers: checked below
    lock = threading.Lock()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", group.port, timeout=PATIENCE)
        try:
            while True:
                try:
                    status, reply = exchange(conn, "POST", "/v1/chat/completions", CHAT)
                except (OSError, http.client.HTTPException):
                    conn.close()  # the worker hung up between requests: try a new one
                    try:
                        conn.connect()
                    except OSError:
                        return  # nobody listens any more
                    continue
                if status != 200:  # an assertion here would fail only this thread
                    with lock:
                        refused.append((status, reply))
                    conn.close()
                    continue
                with lock:
                    answered.append(reply["bench"]["panel"])
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        assert wait_until(lambda: len(answered) >= 40)
        group.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(START)
        assert group.proc.wait(START) == 0
    finally:
        group.stop()
    assert "Traceback" not in group.err, group.err
    # a request refused while its head was still arriving never began: a 408, never a failure
    assert all(status == 408 for status, _ in refused), refused
    panels = [r["panel"] for r in logged(home)]
    assert len(panels) == len(set(panels))
    assert sorted(panels) == sorted(answered)


def test_ctrl_c_to_the_whole_process_group_stops_every_worker_once(home):
    """A terminal sends SIGINT to every process of the job: the workers leave it to the
    parent, which stops them as for SIGTERM."""
    with Group(home.root) as group:
        conn, _ = group.connect()
        conn.close()
        os.killpg(group.proc.pid, signal.SIGINT)
        assert group.proc.wait(START) == 0
        assert wait_until(lambda: all(gone(pid) for pid in group.pids))
        group.stop()
    assert group.err == "", group.err  # no worker said anything, no traceback


def test_one_process_too_answers_what_is_in_flight_before_sigterm_stops_it(home, gated):
    move_to(home, gated, "fast", "mid", "slow")
    set_limits(home, max_explorers=0)
    group = Group(home.root, workers="1")
    conns = [
        http.client.HTTPConnection("127.0.0.1", group.port, timeout=PATIENCE) for _ in range(2)
    ]
    try:
        replies: list = [None, None]

        def ask(i):
            replies[i] = exchange(conns[i], "POST", "/v1/chat/completions", CHAT)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        assert wait_until(lambda: len(gated.arrived) == 6)
        idle, _ = group.connect()  # kept, between requests
        group.proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: not http_alive(idle))  # hung up: nothing was asked of it
        idle.close()
        assert group.proc.poll() is None  # yet the panels in flight hold the process
        gated.open("fast", "mid", "slow")
        for t in threads:
            t.join(PATIENCE)
        assert [r[0] for r in replies] == [200, 200]
        assert conns[0].headers_of_last["Connection"] == "close"
        assert group.proc.wait(START) == 0
        assert sorted(r["panel"] for r in logged(home)) == sorted(
            r[1]["bench"]["panel"] for r in replies
        )
    finally:
        for conn in conns:
            conn.close()
        group.stop()
    assert "Traceback" not in group.err, group.err


def http_alive(conn) -> bool:
    """Whether a kept connection is still open at the server's end (no EOF waiting on it)."""
    readable, _, _ = select.select([conn.sock], [], [], 0)
    return not readable


def test_a_worker_that_dies_is_reported_and_replaced(home):
    with Group(home.root) as group:
        a, b = group.pids
        os.kill(b, signal.SIGKILL)
        seen = set()

        def replaced():
            try:
                conn, pid = group.connect()
            except (OSError, http.client.HTTPException):  # queued to the killed one
                return False
            conn.close()
            seen.add(pid)
            return len(seen - {a, b}) == 1

        assert wait_until(replaced)
        (c,) = seen - {a, b}
        conn = group.connect_to(c)
        try:
            status, _ = exchange(conn, "POST", "/v1/chat/completions", CHAT)
            assert status == 200
        finally:
            conn.close()
        assert group.stop() == 0
    assert (
        f"worker 1 (pid {b}) was killed by SIGKILL; starting another in its place" in group.err
    ), group.err
    assert f"worker 1 is back (pid {c})" in group.err
    assert gone(a) and gone(c)


def test_workers_stop_when_their_parent_is_killed(home):
    group = Group(home.root)
    try:
        group.proc.kill()  # SIGKILL: the parent says nothing to anyone
        group.proc.wait(PATIENCE)
        assert wait_until(lambda: all(gone(pid) for pid in group.pids)), (
            "a worker outlived its parent"
        )
    finally:
        for pid in group.pids:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        group.stop()


# -- what is refused -------------------------------------------------------------------------------
@pytest.mark.parametrize("count", ["0", "x", "-2", "257", ""])
def test_a_worker_count_that_is_not_one_is_refused_saying_what_to_give(tmp_path, capsys, count):
    with pytest.raises(SystemExit) as exited:
        main(["gateway", "--workers", count, "--port", "0", "--data", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --workers: give a whole number of processes from 1 to 256, or auto" in err, err


@pytest.mark.slow
def test_serve_refuses_a_bad_worker_count_before_starting_anything(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "serve.py"),
            "--workers",
            "many",
            "--port",
            "0",
            "--data",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        "--workers: give a whole number of processes from 1 to 256, or auto (one per core"
        in done.stderr
        and "not 'many'" in done.stderr
    )
    assert not (tmp_path / "d").exists()


NO_REUSE_PORT = """
import runpy, socket, sys
del socket.SO_REUSEPORT   # as on a platform that has none
sys.argv = ["gateway.py", *sys.argv[1:]]
runpy.run_path("gateway.py", run_name="__main__")
"""


@pytest.mark.slow
def test_several_workers_without_so_reuseport_are_refused_and_one_still_runs(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANELIST_")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_REUSE_PORT,
            "--workers",
            "2",
            "--port",
            "0",
            "--data",
            str(tmp_path / "d"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=START,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        "panelist: error: --workers 2 needs SO_REUSEPORT (several processes "
        "on one port), which this platform does not have; run one worker, "
        "or several servers on their own ports behind a load balancer\n"
    )
    one = subprocess.Popen(
        [
            sys.executable,
            "-c",
            NO_REUSE_PORT,
            "--workers",
            "1",
            "--port",
            "0",
            "--data",
            str(tmp_path / "d"),
        ],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        ready, _, _ = select.select([one.stdout], [], [], START)
        assert ready and "panelist gateway on http://127.0.0.1:" in one.stdout.readline()
    finally:
        one.terminate()
        _, err = one.communicate(timeout=START)
    assert one.returncode == 0 and "Traceback" not in err


def test_a_port_already_taken_is_refused_before_any_worker_starts(home):
    with Group(home.root) as first:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "gateway.py"),
                "--workers",
                "2",
                "--port",
                str(first.port),
                "--data",
                str(home.root),
            ],
            capture_output=True,
            text=True,
            timeout=START,
        )
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr == (
            f"panelist: error: cannot listen on 127.0.0.1:{first.port}: "
            "Address already in use; pick another --port or stop what "
            "holds it\n"
        )


# -- the dashboard with workers --------------------------------------------------------------------
@pytest.mark.slow
def test_serve_demo_with_workers_answers_on_each_and_a_login_holds_on_every_worker(tmp_path):
    secret, _ = Keys(open_home(tmp_path / "d")).create("robot")
    bearer = {"Authorization": f"Bearer {secret}"}
    with Group(
        tmp_path / "d",
        entry="serve.py",
        extra=["--demo"],
        env={"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN},
    ) as group:
        a, b = group.pids
        to_a, to_b = group.connect_to(a), group.connect_to(b)
        try:
            for conn in (to_a, to_b):  # one simulated upstream, the parent's, for both
                status, reply = exchange(
                    conn,
                    "POST",
                    "/v1/chat/completions",
                    dict(CHAT, model="bench/demo"),
                    headers=bearer,
                )
                assert status == 200 and all(s["status"] == "ok" for s in reply["bench"]["seats"])
            assert exchange(to_b, "GET", "/api/info")[0] == 401
            status, _ = exchange(to_a, "POST", "/api/login", {"token": DASHBOARD_TOKEN})
            assert status == 200
            cookie = {"Cookie": to_a.headers_of_last["Set-Cookie"].split(";")[0]}
            assert exchange(to_b, "GET", "/api/info", headers=cookie)[0] == 200
            assert exchange(to_a, "GET", "/api/info", headers=cookie)[0] == 200
            assert exchange(to_b, "POST", "/api/logout", {}, headers=cookie)[0] == 200
            assert exchange(to_a, "GET", "/api/info", headers=cookie)[0] == 401
        finally:
            to_a.close()
            to_b.close()
    assert group.proc.returncode == 0
