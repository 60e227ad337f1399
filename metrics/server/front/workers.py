"""Several worker processes answering one port over one data folder (``Group``), and how one
server process runs until it is told to stop (``serve_until``).

One process is bound by one core (the GIL). ``panelist gateway --workers N`` (and ``serve``)
starts N worker processes, each a whole server over the same data folder, which is already safe
for several processes: the logs are appended under a lock and the ledger's index follows the
evidence log's tail at every seating, so a verdict given to one worker counts in the next
seating of every other; keys' rate counts, admission and the schedule's due times live in
locked files; the onboarding queue is worked by one process at a time. What lives only in a
process's memory stays per worker: the seats in flight, the races a worker runs (another sees
a running one as ``unfinished`` until its report is written) and the failed-login counts. The
dashboard's sessions are kept in a file the group shares (``sessiontable``), so a login holds
on every worker.

How the workers are started, and why:

* ``multiprocessing`` with the ``spawn`` method: each worker is a fresh interpreter that runs
  the entry point the user ran (``gateway.py``, ``serve.py``, the ``panelist`` command) as its
  main module, so the server factory the entry point lent arrives by reference and the domain
  never imports an entry point. No ``fork``: the parent has threads (the demo's simulator),
  and a forked copy of a process with threads can inherit a lock some thread held.
* each worker binds its own listening socket with ``SO_REUSEPORT``, and the kernel spreads new
  connections among them. One listener inherited by every worker would wake all of them on
  each connection and leave the balance to whoever wins ``accept``. A platform without
  ``SO_REUSEPORT`` is refused with a clear error (``check_reuse_port``).
* the parent checks the port is free with a plain bind (which fails if anything holds it,
  another group's workers included), then keeps a socket bound to it with ``SO_REUSEPORT``
  and never listening, so a restarted worker always finds its port; only listening sockets
  receive connections.

Invariants:

* The parent prints that it listens only once every worker does; if any fails to start, all
  stop and its message is the command's one-line error.
* Each worker talks to the parent over one pipe: it says ``ready`` (or why it failed), and
  takes ``stop`` and ``hurry``. A worker whose pipe ends (the parent died, even by SIGKILL)
  stops as if told to, so no worker outlives its group holding the port.
* Stopping: Ctrl-C or SIGTERM to the parent tells every worker to stop; each drains
  (``Server.drain``: every request that began is answered, for at most ``drain`` seconds),
  then closes its parts (panels still running behind a reply are cut and logged), and exits.
  A second Ctrl-C or SIGTERM hurries them (the drain ends now). The workers ignore SIGINT (the
  terminal sends it to the whole process group: the parent alone decides), and take SIGTERM
  as ``stop`` (a service manager may signal every process of the group at once).
* A worker that ends when nobody stopped it is reported on stderr (index, pid, how it ended)
  and started again in its place, with its index; more than ``RESTARTS`` such ends within
  ``RESTART_WINDOW`` seconds stop the whole group with exit status 1.
* Worker 0 alone runs the schedule thread (``Role.runs_schedule``); the demo's simulated
  upstream is the parent's, started before the workers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from panelist.metrics.errors import ConfigInvalid, PanelistError
from panelist.metrics.home import open_home
from panelist.metrics.server.guard import Settings

DRAIN = 30.0  # seconds a stopping server lets the requests that began finish
CLOSE_MARGIN = 30.0  # seconds past the drain a worker may take to close before it is killed
START_TIMEOUT = 120.0  # seconds a worker may take to start listening
RESTARTS = 5  # unrequested ends tolerated within RESTART_WINDOW, then the group stops
RESTART_WINDOW = 60.0
MAX_WORKERS = 256


@dataclass(frozen=True)
class Role:
    """Which worker of how many a server is: one of several binds with ``SO_REUSEPORT``."""

    index: int = 0
    count: int = 1

    @property
    def runs_schedule(self) -> bool:
        return self.index == 0


def cores() -> int:
    """The cores this process may run on (its affinity, which a container's limit narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def worker_count(text: str) -> int:
    """``--workers``: a whole number from 1 to ``MAX_WORKERS``, or ``auto`` (one per core)."""
    if text.strip().lower() == "auto":
        return min(cores(), MAX_WORKERS)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"give a whole number of processes from 1 to {MAX_WORKERS}, or auto (one per core, "
            f"{cores()} here), not '{text[:20]}'"
        )
    return n


def check_reuse_port(count: int) -> None:
    """Refuse several workers where the platform cannot bind them all to one port."""
    if count > 1 and not hasattr(socket, "SO_REUSEPORT"):
        raise ConfigInvalid(
            f"--workers {count} needs SO_REUSEPORT (several processes on one "
            "port), which this platform does not have; run one worker, or "
            "several servers on their own ports behind a load balancer"
        )


def describe_end(code: int) -> str:
    """How a process ended, from its exit code (negative: the signal that killed it)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


# -- one server process ---------------------------------------------------------------------------
def serve_until(server, stop: threading.Event, hurry: threading.Event, drain: float = DRAIN) -> int:
    """Serve until ``stop`` is set, then drain (at most ``drain`` seconds, or until ``hurry``)
    and close; always closes. Returns how many connections the drain left unanswered."""

    def stopper():
        stop.wait()
        server.shutdown()

    threading.Thread(target=stopper, name="stopper", daemon=True).start()
    left = 0
    try:
        server.serve_forever()
        left = server.drain(drain, hurry)
    finally:
        server.close()
    return left


def _worker(
    make,
    root: str,
    host: str,
    port: int,
    role: Role,
    conn,
    sessions: str | None,
    drain: float,
    demo: bool = False,
    database: str | None = None,
) -> int:
    """One worker (the spawned process's target): build the server, say ready, serve until the
    parent (or SIGTERM) says stop. ``database``: the ledger's database, as the parent opened
    the data folder with it (handed down, never through the environment)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides (see the module notes)
    stop, hurry = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        settings = Settings.from_env()
        if sessions:
            settings = replace(settings, sessions=sessions)
        # the demo's simulator is the data folder's one (metrics.upkeep.demohost): the first
        # worker to need it starts it, the others find it
        extra = {"demo": True} if demo else {}
        server = make(
            open_home(root, database=database), host, port, settings=settings, role=role, **extra
        )
    except PanelistError as exc:
        conn.send(("failed", exc.message))
        return 1
    except OSError as exc:
        conn.send(
            ("failed", f"worker {role.index} cannot listen on {host}:{port}: {exc.strerror or exc}")
        )
        return 1

    def listen():
        try:
            while True:
                word = conn.recv()
                if word == "hurry":
                    hurry.set()
                stop.set()
        except (EOFError, OSError):  # the parent is gone: no worker outlives its group
            stop.set()

    conn.send(("ready", os.getpid()))
    threading.Thread(target=listen, name="parent", daemon=True).start()
    left = serve_until(server, stop, hurry, drain)
    if left:
        print(
            f"panelist: worker {role.index} (pid {os.getpid()}) stopped with {left} "
            "request(s) still being answered",
            file=sys.stderr,
        )
    return 0


def _run_worker(*args) -> None:
    sys.exit(_worker(*args))


# -- the group ------------------------------------------------------------------------------------
class _Worker:
    def __init__(self, index: int, process, conn):
        self.index = index
        self.process = process
        self.conn = conn  # None once the pipe ended
        self.pid = process.pid
        self.ready = False
        self.failed: str | None = None  # why it could not start, in its own words


class Group:
    """N workers of one server on one port; the parent's side. ``start`` returns once all
    listen (raising PanelistError if one cannot), ``run`` supervises until they are stopped."""

    def __init__(
        self,
        make,
        root,
        host: str,
        port: int,
        count: int,
        *,
        share_sessions: bool = False,
        drain: float = DRAIN,
        err=None,
        demo: bool = False,
        database: str | None = None,
    ):
        check_reuse_port(count)
        self.demo = demo
        self.database = database  # the ledger's, handed to each worker as it is spawned
        self.make = make
        self.root = str(root)
        self.host = host
        self.port = port
        self.count = count
        self.drain = drain
        self.err = err or sys.stderr
        self._share_sessions = share_sessions
        self._ctx = multiprocessing.get_context("spawn")
        self._workers: dict[int, _Worker] = {}
        self._ends: list[float] = []  # when workers ended unasked, for the restart budget
        self._signals = 0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._reserved: socket.socket | None = None
        self._folder: str | None = None
        self.sessions: str | None = None  # the shared session table's file, for serve
        self._old_handlers: dict = {}
        self._stop_by: float | None = None  # once stopping: when a straggler is killed
        self._start_failure: str | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pids(self) -> list[int]:
        return [self._workers[i].pid for i in sorted(self._workers)]

    # -- starting ---------------------------------------------------------------------------------
    def start(self) -> bool:
        """Reserve the port, start every worker and wait until each listens: True. False when
        Ctrl-C or SIGTERM came first (everything is stopped then); PanelistError when a
        worker could not start (the others are stopped)."""
        try:
            self._reserve()
            if self._share_sessions:
                self._folder = tempfile.mkdtemp(prefix="panelist-sessions-")
                self.sessions = str(Path(self._folder) / "sessions")
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            for index in range(self.count):
                self._spawn(index)
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                failed = self._start_failure or next(
                    (w.failed for w in self._workers.values() if w.failed), None
                )
                if failed:
                    raise PanelistError(failed)
                if all(w.ready for w in self._workers.values()):
                    break
                if self._signals:
                    self._finish()
                    return False
                if time.monotonic() > deadline:
                    raise PanelistError(
                        f"the workers did not start within {START_TIMEOUT:g} s; "
                        "see the errors above"
                    )
                self._turn(deadline - time.monotonic(), starting=True)
        except BaseException:
            self._finish()
            raise
        return True

    def _reserve(self) -> None:
        """Check the port is free (a plain bind fails if anything holds it), then keep it with a
        bound, never listening ``SO_REUSEPORT`` socket; ``port`` 0 takes a free one."""
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((self.host, self.port))
                self.port = probe.getsockname()[1]
            held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                held.bind((self.host, self.port))
            except OSError:
                held.close()
                raise
        except OSError as exc:
            raise PanelistError(
                f"cannot listen on {self.host}:{self.port}: "
                f"{exc.strerror or exc}; pick another --port or stop what holds "
                "it"
            ) from None
        self._reserved = held

    def _spawn(self, index: int) -> None:
        mine, theirs = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_run_worker,
            name=f"panelist-worker-{index}",
            daemon=True,
            args=(
                self.make,
                self.root,
                self.host,
                self.port,
                Role(index, self.count),
                theirs,
                self.sessions,
                self.drain,
                self.demo,
                self.database,
            ),
        )
        # the child starts with SIGINT ignored (an ignored signal stays so across exec), so a
        # Ctrl-C during its start cannot interrupt it: stopping is the parent's to decide
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            process.start()
        finally:
            signal.signal(signal.SIGINT, previous)
            theirs.close()
        self._workers[index] = _Worker(index, process, mine)

    # -- supervising ------------------------------------------------------------------------------
    def run(self) -> int:
        """Supervise until stopped: 0 once every worker stopped as asked, 1 if they kept
        ending. Restores the signal handlers and frees the port before returning."""
        status = 0
        try:
            while self._workers:
                if self._signals and self._stop_by is None:
                    self._stop_all()
                if self._stop_by is not None and time.monotonic() > self._stop_by:
                    self._kill_all()
                if self._turn(1.0) == "give up":
                    status = 1
                    self._stop_all()
        finally:
            self._finish()
        return status

    def _turn(self, timeout: float, starting: bool = False) -> str | None:
        """Wait for a message, a worker's end or a signal, and deal with what came."""
        waiting: dict = {self._wake_r: None}
        for w in self._workers.values():
            waiting[w.process.sentinel] = w
            if w.conn is not None:
                waiting[w.conn] = w
        outcome = None
        for obj in multiprocessing.connection.wait(list(waiting), max(0.0, timeout)):
            w = waiting[obj]
            if w is None:
                try:
                    os.read(self._wake_r, 512)
                except BlockingIOError:
                    pass
            elif obj is w.conn:
                self._heard(w)
            elif obj == w.process.sentinel and self._workers.get(w.index) is w:
                # (its pipe may have been read to the end already, and the one that takes
                # its place may hold its index by now)
                if self._ended(w, starting) == "give up":
                    outcome = "give up"
        return outcome

    def _heard(self, w: _Worker) -> None:
        try:
            kind, detail = w.conn.recv()
        except (EOFError, OSError):  # it ended: its sentinel says so too
            w.conn.close()
            w.conn = None
            return
        if kind == "ready":
            if self._ends:  # started in the place of one that ended
                self._say(f"worker {w.index} is back (pid {detail})")
            w.ready = True
        else:
            w.failed = detail

    def _ended(self, w: _Worker, starting: bool) -> str | None:
        """A worker's process ended: as asked, or (reported) started again, or the end."""
        w.process.join()
        while w.conn is not None and w.conn.poll():  # what it said before it ended
            self._heard(w)
        if w.conn is not None:
            w.conn.close()
            w.conn = None
        del self._workers[w.index]
        if self._stop_by is not None:
            return None
        how = describe_end(w.process.exitcode)
        if starting:
            self._start_failure = w.failed or (
                f"worker {w.index} (pid {w.pid}) {how} before it listened; see the errors above"
            )
            return None
        now = time.monotonic()
        self._ends = [t for t in self._ends if t > now - RESTART_WINDOW] + [now]
        why = f" ({w.failed})" if w.failed else ""
        if len(self._ends) > RESTARTS:
            self._say(
                f"worker {w.index} (pid {w.pid}) {how}{why}; workers ended "
                f"{len(self._ends)} times within {RESTART_WINDOW:g} s, so every worker "
                "stops; see the errors above"
            )
            return "give up"
        self._say(f"worker {w.index} (pid {w.pid}) {how}{why}; starting another in its place")
        self._spawn(w.index)
        return None

    def _on_signal(self, *_):
        self._signals += 1
        if self._signals > 1:  # asked again: the drain ends now
            for w in self._workers.values():
                self._tell(w, "hurry")
        try:
            os.write(self._wake_w, b"s")
        except (BlockingIOError, OSError):
            pass

    def _tell(self, w: _Worker, word: str) -> None:
        if w.conn is not None:
            try:
                w.conn.send(word)
            except OSError:  # it is ending; its sentinel will say so
                pass

    def _stop_all(self) -> None:
        if self._stop_by is None:
            self._stop_by = time.monotonic() + self.drain + CLOSE_MARGIN
            for w in self._workers.values():
                self._tell(w, "stop")

    def _kill_all(self) -> None:
        for w in self._workers.values():
            if w.process.is_alive():
                self._say(
                    f"worker {w.index} (pid {w.pid}) did not stop within "
                    f"{self.drain + CLOSE_MARGIN:g} s; killing it"
                )
                w.process.kill()
        self._stop_by = time.monotonic() + CLOSE_MARGIN  # a killed process ends at once

    def close(self) -> None:
        """Stop the group now if it still runs (as ``run`` does at its end); always returns."""
        self._finish()

    def _finish(self) -> None:
        """Stop every worker still running, wait for each (killing one that overstays), free
        the port and the session table, restore the signal handlers."""
        self._stop_all()
        for w in list(self._workers.values()):
            stop_by = self._stop_by  # read each time: a kill (a second signal) moves it
            assert stop_by is not None  # set by _stop_all, never unset
            w.process.join(max(0.0, stop_by - time.monotonic()))
            if w.process.is_alive():
                self._say(f"worker {w.index} (pid {w.pid}) did not stop; killing it")
                w.process.kill()
                w.process.join()
            if w.conn is not None:
                w.conn.close()
                w.conn = None
        self._workers.clear()
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    def _say(self, message: str) -> None:
        print(f"panelist: {message}", file=self.err, flush=True)
