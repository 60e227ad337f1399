"""Shared fixtures: a simulated upstream, a data folder that knows it, gateways that close.

Invariants every test can lean on: a server a fixture starts is closed at teardown, its
``serve_forever`` thread joined and every connection thread of it ended (a test that leaves a
client connection open fails its teardown, naming the leak). Waits are on conditions with a
generous deadline (``wait_until``), never on a fixed sleep, and no assertion is about speed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _bootstrap  # noqa: E402,F401  (the checkout imports itself as ``panelist``)

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import socketserver  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

import pytest  # noqa: E402

from gated import GatedUpstream  # noqa: E402
from panelist.gateway import make_gateway  # noqa: E402
from panelist.metrics.roster.collection import Collections  # noqa: E402
from panelist.metrics.home import open_home  # noqa: E402
from panelist.metrics.roster.roster import Roster  # noqa: E402
from panelist.metrics.seats import Seats  # noqa: E402
from panelist.metrics.server.front.memory import keep_heap_small  # noqa: E402
from panelist.metrics.upstream.sim import SimUpstream  # noqa: E402

# A small roster the end-to-end tests share: three members of different speed, and explorer
# candidates of distinct families. Tests that need one seat to finish before another hold it at
# a gate (the ``gated`` fixture) instead of relying on these latencies.
TEST_MODELS = {
    "fast": {"latency": 0.0},
    "mid": {"latency": 0.02},
    "slow": {"latency": 0.05},
    "x-one": {"latency": 0.0},
    "x-two": {"latency": 0.0},
    "x-three": {"latency": 0.0},
}

# How long a wait on a condition may take before the test gives up. Only a broken behaviour
# ever reaches it, so it is generous: a loaded machine must never be mistaken for a bug.
PATIENCE = 30.0


def wait_until(predicate, timeout: float = PATIENCE) -> bool:
    """Poll ``predicate`` until it holds; False if it still does not after ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def serving_threads(server) -> int:
    """How many threads are serving a connection of ``server`` right now.

    Counted from what the threads are running (a request handler of this server on their stack),
    not from socketserver's private bookkeeping, which does not track daemon threads at all."""
    count = 0
    for frame in list(sys._current_frames().values()):
        while frame is not None:
            # a handler runs its whole connection inside its constructor: that frame holds it
            if frame.f_code is _HANDLER_INIT:
                handler = frame.f_locals.get("self")
                count += getattr(handler, "server", None) is server
                break
            frame = frame.f_back
    return count


_HANDLER_INIT = socketserver.BaseRequestHandler.__init__.__code__


# Workers per core for ``-n auto`` (pyproject's addopts). The slow tests mostly wait (a process
# starting, a server stopping, a deadline passing), so a worker per core leaves the cores idle
# much of the run. Two per core were faster still, but loaded a 2-core machine enough to lose
# races the tests wait on; one and a half keeps most of the gain. The cap bounds the browsers
# and database clusters a big machine would start (one of each per worker).
WORKERS_PER_CORE, MAX_WORKERS = 1.5, 8


def pytest_xdist_auto_num_workers(config):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, round(WORKERS_PER_CORE * (cores or 1))))


# Fixtures that start a server, a process, a browser or a database: a test that uses one,
# directly or through another fixture (``home`` starts a simulator), is marked ``slow`` at
# collection. A test that starts one in its own body says so with ``@pytest.mark.slow`` (or a
# module's ``pytestmark``); ``wire_guard`` fails one that does not.
SLOW_FIXTURES = frozenset({"sim", "gated", "pg_cluster", "browser"})


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(slow)


class _WireWatch:
    """What a test not marked slow did on the wire: TCP connections made and processes started,
    as the interpreter's audit events report them (``sys.addaudithook``; a hook stays for the
    process's life, so it only looks while ``on``)."""

    PROCESS_EVENTS = frozenset(
        {
            "subprocess.Popen",
            "os.fork",
            "os.forkpty",
            "os.posix_spawn",
            "os.posix_spawnp",
            "os.system",
            "os.exec",
        }
    )

    def __init__(self):
        self.on = False
        self.seen: list[str] = []
        sys.addaudithook(self.audit)

    def audit(self, event: str, args) -> None:
        if not self.on:
            return
        if event == "socket.connect":
            sock, address = args[0], args[1]
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                self.seen.append(f"a TCP connection to {address}")
        elif event in self.PROCESS_EVENTS:
            self.seen.append(f"a process ({event})")

    def start(self) -> None:
        self.seen.clear()
        self.on = True

    def stop(self) -> list[str]:
        self.on = False
        return list(self.seen)


_wire = _WireWatch()
# a server's first build in a process looks up libc (ctypes runs ldconfig): done here, before any
# test is watched, so the guard does not depend on which test builds a server first
keep_heap_small()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test without the ``slow`` mark runs in process: a TCP connection or a process started
    during its setup or body fails it, naming what it did and what to do."""
    result = yield
    if item.get_closest_marker("slow") is None:
        seen = _wire.stop()
        if seen:
            raise AssertionError(
                f"this test is not marked slow but made {'; '.join(dict.fromkeys(seen))}: "
                "run it in process (the `folder` fixture, tests/inprocess.py, "
                "tests/transport_fake.py), or mark it @pytest.mark.slow if the wire is what "
                "it tests"
            )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("slow") is None:
        _wire.start()
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    _wire.stop()  # a setup that failed never reached the check: stop looking all the same


@pytest.fixture(autouse=True)
def no_proxy_from_the_shell(monkeypatch):
    """A shell's proxy settings would send the tests' loopback calls (urllib's and the
    upstream client's) to a proxy: every test runs without them unless it sets its own."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def no_stored_keys_of_the_user(monkeypatch, tmp_path_factory):
    """Keys sign-in stored for the user running the tests (``roster.keystore``) are never read:
    every test starts with a key file of its own, empty."""
    monkeypatch.setenv(
        "PANELIST_KEY_FILE", str(tmp_path_factory.mktemp("keys") / "endpoint-keys.json")
    )


@pytest.fixture(scope="session")
def pg_cluster():
    """A real PostgreSQL cluster for the session (``pgcluster``): skipped where the binaries
    or the driver are absent, a failure then under ``PANELIST_REQUIRE_POSTGRES=1``."""
    import pgcluster

    required = os.environ.get("PANELIST_REQUIRE_POSTGRES") == "1"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if required:
            pytest.fail("psycopg is not installed: pip install 'panelist[postgres]'")
        pytest.skip("psycopg is not installed (pip install 'panelist[postgres]')")
    if pgcluster.binaries() is None:
        if required:
            pytest.fail("PostgreSQL's binaries are missing: apt-get install postgresql")
        pytest.skip("PostgreSQL's binaries are missing (apt-get install postgresql)")
    cluster = pgcluster.start_cluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture()
def pg_url(pg_cluster):
    """A fresh, empty database for one test, dropped after it (the cluster started again
    first if the test stopped it)."""
    url = pg_cluster.create_database()
    try:
        yield url
    finally:
        if pg_cluster.proc is None:
            pg_cluster.start()
        pg_cluster.drop_database(url)


@pytest.fixture()
def sim():
    with SimUpstream({k: dict(v) for k, v in TEST_MODELS.items()}) as s:
        yield s


@pytest.fixture()
def gated():
    """An upstream whose models answer only when the test opens their gate (see gated.py)."""
    upstream = GatedUpstream(TEST_MODELS)
    try:
        yield upstream
    finally:
        upstream.close()


def move_to(home, upstream, *aliases) -> None:
    """Serve ``aliases`` from ``upstream`` (e.g. the gated one) instead of the simulator."""
    roster = Roster(home)
    roster.add_endpoint("gated", upstream.url)
    for alias in aliases:
        roster.add_model(alias, "gated", family=alias, context=100_000)


# Where ``folder``'s models say they are served: nothing listens there, and a test not marked
# slow that calls it fails at once (the connection attempt alone fails it)
UNSERVED = "http://127.0.0.1:9/v1"


def _fill(home, url: str):
    """``TEST_MODELS`` on an endpoint ``sim`` at ``url``, and the collection ``trio``."""
    roster = Roster(home)
    roster.add_endpoint("sim", url)
    for alias in TEST_MODELS:
        roster.add_model(alias, "sim", family=alias, context=100_000)
    Collections(home).save(
        roster.view(),
        "trio",
        ["fast", "mid", "slow"],
        description="Three simulated reviewers",
        tags=["test", "code"],
    )
    return home


@pytest.fixture()
def folder(tmp_path):
    """A data folder with ``home``'s roster and collection that starts nothing: for tests of
    what is read and written there (ledger, roster, records, routes called in process)."""
    return _fill(open_home(tmp_path / "data"), UNSERVED)


@pytest.fixture()
def home(tmp_path, sim):
    """The same data folder, its models served by a simulated upstream (``sim``)."""
    return _fill(open_home(tmp_path / "data"), sim.url)


@pytest.fixture()
def roster(home):
    return Roster(home)


@pytest.fixture()
def core(roster):
    """The seats core of ``home``'s roster, closed after the test."""
    seats = Seats(roster)
    yield seats
    seats.close()


class Client:
    """JSON requests to a server by URL (one connection per request, closed after it)."""

    def __init__(self, url: str):
        self.url = url

    def request(self, method, path, body=None, *, raw: bytes | None = None, headers=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=PATIENCE) as resp:
                return resp.status, json.loads(resp.read() or b"null"), resp.headers
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, json.loads(exc.read() or b"null"), exc.headers

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)


class Gateway(Client):
    """A built gateway served from a thread of this process; ``close()`` stops it for good."""

    def __init__(self, server):
        super().__init__(server.url)
        self.server = server
        self.thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), daemon=True, name=f"gateway-{server.port}"
        )
        self.thread.start()
        # its own threads (heads, schedule) run before a test counts threads or connects
        assert server.started.wait(PATIENCE), "the gateway did not start serving"

    def close(self) -> None:
        """Stop serving, join the serving thread and check that no connection is left behind."""
        if self.thread is None:
            return
        thread, self.thread = self.thread, None
        self.server.close()
        thread.join(PATIENCE)
        assert not thread.is_alive(), "the gateway's serve_forever did not return after close()"
        assert wait_until(lambda: serving_threads(self.server) == 0), (
            f"{serving_threads(self.server)} connection(s) to the gateway still being served "
            "after the test: close every client (openai.OpenAI, sockets) the test opened"
        )

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


DASHBOARD_TOKEN = "dashboard-admin-token-0123456789"


@pytest.fixture()
def dash(home):
    """A dashboard server (its API, pages and the gateway's routes) over ``home``, open locally."""
    from panelist.serve import make_dashboard

    with Gateway(make_dashboard(home, env={"PANELIST_LOGIN_PAUSE": "0"})) as server:
        yield server


@pytest.fixture()
def api(folder):
    """The same dashboard over ``folder``, built and never served: each request runs through its
    whole handler in process (``inprocess.Caller``, with ``dash``'s ``get``/``post``)."""
    from inprocess import Caller
    from panelist.serve import make_dashboard

    server = make_dashboard(folder, env={"PANELIST_LOGIN_PAUSE": "0"})
    try:
        yield Caller(server)
    finally:
        server.close()


@pytest.fixture()
def locked(home):
    """The same with ``PANELIST_ADMIN_TOKEN`` set to ``DASHBOARD_TOKEN``: a login is needed."""
    from panelist.serve import make_dashboard

    # refused logins answered at once: the pause before them has tests of its own
    env = {"PANELIST_ADMIN_TOKEN": DASHBOARD_TOKEN, "PANELIST_LOGIN_PAUSE": "0"}
    with Gateway(make_dashboard(home, env=env)) as server:
        yield server


@pytest.fixture()
def gateway(home):
    # local mode, whatever the shell running the tests says
    gw = Gateway(make_gateway(home, env={}))
    try:
        yield gw
    finally:
        gw.close()


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def logged(home) -> list[dict]:
    """The panels in the call log, oldest first (none yet: an empty list)."""
    path = home.gateway_runs / "calls.jsonl"
    return read_jsonl(path) if path.exists() else []


def seat_bodies(sim, prompt: str) -> list[dict]:
    """The chat bodies the seats were sent for a prompt (the merger's is not among them)."""
    return [
        r["body"]
        for r in sim.requests
        if any(m.get("content") == prompt for m in r["body"]["messages"] if isinstance(m, dict))
    ]


def openai_client(gateway):
    """The openai package pointed at a gateway, without its own retries."""
    import openai

    return openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    )


def raw_stream(gw, body) -> tuple[str, bytes]:
    """A streamed chat request over a raw socket: the response head and body as they came."""
    raw = json.dumps(dict(body, stream=True)).encode()
    with socket.create_connection(("127.0.0.1", gw.server.port), timeout=PATIENCE) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (gw.server.port, len(raw), raw)
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode(), rest


def set_limits(home, **limits):
    """Change the data folder's gateway.json limits (a server reads them on the next request)."""
    path = home.file("gateway.json")
    doc = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(dict(doc, **limits)))


def seats_logged(home) -> dict:
    """``{alias: status}`` of every seat line in the evidence log so far."""
    path = home.gateway_runs / "evidence.jsonl"
    if not path.exists():
        return {}
    return {e["alias"]: e["status"] for e in read_jsonl(path) if e["kind"] == "seat"}
