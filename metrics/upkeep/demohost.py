"""The demo's simulated upstream: one per data folder, found by every process that needs it.

The demo roster's ``demo`` endpoint (``roster.demo``) points at one simulator for the whole data
folder, whichever process runs it. That process, its owner, holds an exclusive ``flock`` on
``runs/demo-sim.owner`` for as long as its simulator serves; ``runs/demo-sim.json``
(``Home.demo_sim``) records the simulator's URL and the owner's pid. A process that needs the
demo (``serve --demo``, the dashboard's Load demo, ``suite run --demo``) calls ``start``: it
starts a simulator only when no process holds the owner lock, and otherwise uses the recorded
one.

Invariants:

* At most one simulator serves a data folder's demo. The owner lock is taken without waiting;
  a process that ends, however it ends, lets go of it (the kernel drops a dead process's
  ``flock``), so a lock held means a simulator serves. Deciding and recording happen under
  ``runs/demo-sim.lock``, so two processes starting at once never both start one.
* Nothing a process does rewires what another uses: the roster's demo endpoint changes only
  when nothing serves its URL. A new owner binds the port of the recorded URL (else of the
  roster's loopback demo URL) and takes another port only when that one is held by something
  else; only then is the endpoint rewritten, to the simulator that now serves.
* A long-lived host (``watch``: a server) that found another process's simulator looks every
  ``WATCH`` seconds whether its owner is still there, and when it is gone takes over, on the
  same port: the demo keeps answering with the same URL, after a pause of at most ``WATCH``.
* ``close`` stops the simulator it owns before it lets the lock go, so the next owner can bind
  the port at once; it leaves the record (the URL the next owner binds) with no pid.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlsplit

from panelist.metrics.errors import PanelistError
from panelist.metrics.home import Home
from panelist.metrics.roster import demo
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store import configfile, flock, jsonwire
from panelist.metrics.store.jsonl import SCHEMA, utc_iso

if TYPE_CHECKING:  # imported only when a demo is served
    from panelist.metrics.upstream.sim import SimUpstream

WATCH = 0.25  # seconds between a watching host's looks at the owner lock
KEEP_REQUESTS = 1000  # a long demo keeps the simulator's memory flat
LOOPBACK = ("127.0.0.1", "localhost")


def _simulator(port: int) -> SimUpstream:
    from panelist.metrics.upstream.sim import SimUpstream

    return SimUpstream(port=port, keep_requests=KEEP_REQUESTS)


class DemoHost:
    """One process's part in serving a data folder's demo; ``close`` it when done."""

    def __init__(
        self, home: Home, make_sim: Callable[[int], SimUpstream] = _simulator, *, watch: bool = True
    ):
        """``make_sim(port)``: an unstarted simulated upstream on that port (0: any).
        ``watch``: take over when the owner goes (a server); a short command passes False."""
        self.home = home
        self.url: str | None = None
        self._make_sim = make_sim
        self._watch = watch
        self._record = home.demo_sim
        self._decide = home.demo_sim.with_name("demo-sim.lock")
        self._owner_path = home.demo_sim.with_name("demo-sim.owner")
        self._owner_fd: int | None = None
        self._sim: SimUpstream | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def owner(self) -> bool:
        """Whether this process's simulator is the one serving the demo."""
        return self._sim is not None

    def start(self, install: bool = True) -> str:
        """See that the demo is served (by a simulator started here if none is) and, with
        ``install``, that the roster has the demo models, collection and pins (without, a model
        a person removed stays removed); the demo endpoint's URL."""
        with self._lock:
            if self._stop.is_set():
                raise RuntimeError("this demo host was closed")
            self._serve(install)
            if self._watch and not self.owner and self._thread is None:
                self._thread = threading.Thread(
                    target=self._watching, name="demo-watch", daemon=True
                )
                self._thread.start()
            assert self.url is not None  # _serve sets it or raises
            return self.url

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._sim is None:
                return
            sim, self._sim = self._sim, None
            sim.stop()  # first: the port is free once another process may take the lock
            try:
                with configfile.flocked(self._decide):
                    record = self._read()
                    if record is not None and record.get("pid") == os.getpid():
                        self._write(record["url"], None)
            finally:
                if self._owner_fd is not None:  # always: the simulator's owner holds the lock
                    os.close(self._owner_fd)  # lets go of the owner lock
                self._owner_fd = None

    # -- deciding ---------------------------------------------------------------------------------
    def _serve(self, install: bool) -> None:
        """Own the demo if nobody does, else follow the owner's URL; caller holds ``_lock``."""
        with configfile.flocked(self._decide):
            record = self._read()
            if self._sim is None and self._take_lock():
                try:
                    sim = self._sim = self._bind(self._ports(record))
                except BaseException:
                    if self._owner_fd is not None:  # always: _take_lock just held it
                        os.close(self._owner_fd)
                    self._owner_fd = None
                    raise
                self._write(sim.url, os.getpid())
                url = sim.url
            elif self._sim is not None:
                url = self._sim.url
            elif record is not None and isinstance(record.get("url"), str):
                url = record["url"]
            else:  # a lock held and nothing recorded: only a hand-removed record gets here
                raise PanelistError(
                    f"{self._record} is missing while a process serves the "
                    "demo; stop the other demo server, then start again"
                )
            if install:
                demo.install(self.home, url)
            elif url != self.url:
                demo.point(self.home, url)  # written only if the simulator moved
            self.url = url

    def _take_lock(self) -> bool:
        self._owner_fd = flock.try_hold(self._owner_path)
        return self._owner_fd is not None

    def _ports(self, record: dict | None) -> list[int]:
        """The ports to try, in order: the recorded URL's, the roster's loopback demo URL's,
        then any."""
        urls = [record.get("url") if record else None]
        endpoint = Roster(self.home).view().endpoints.get(demo.ENDPOINT)
        urls.append(endpoint.base_url if endpoint is not None else None)
        ports = []
        for url in urls:
            try:
                parts = urlsplit(url) if isinstance(url, str) else None
                port = parts.port if parts is not None and parts.hostname in LOOPBACK else None
            except ValueError:
                port = None
            if port and port not in ports:
                ports.append(port)
        return ports + [0]

    def _bind(self, ports: list[int]) -> SimUpstream:
        for port in ports:
            try:
                return self._make_sim(port).start()
            except OSError:
                if port == 0:
                    raise
        raise AssertionError("unreachable: port 0 either binds or raises")

    def _watching(self) -> None:
        said = None
        while not self._stop.wait(WATCH):
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._serve(install=False)
                    if self.owner:
                        return  # took over: the simulator serves until close
                said = None
            except Exception as exc:  # a full disk, a removed folder: look again later
                if str(exc) != said:  # once per cause, not four times a second
                    said = str(exc)
                    print(
                        f"panelist: the demo's simulator could not be looked after: {exc}",
                        file=sys.stderr,
                    )

    # -- the record -------------------------------------------------------------------------------
    def _read(self) -> dict | None:
        try:
            record = jsonwire.loads(self._record.read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def _write(self, url: str, pid: int | None) -> None:
        configfile.write_atomic(
            self._record, {"v": SCHEMA, "url": url, "pid": pid, "ts": utc_iso(time.time())}
        )


def served_here(home: Home) -> bool:
    """Whether the roster's demo endpoint is the data folder's demo simulator (a server over
    it then keeps the demo served, as ``--demo`` would)."""
    try:
        record = jsonwire.loads(home.demo_sim.read_bytes())
        endpoint = Roster(home).view().endpoints.get(demo.ENDPOINT)
    except (FileNotFoundError, ValueError, PanelistError):
        return False  # no demo here, or a roster the server will refuse in its own words
    return (
        isinstance(record, dict) and endpoint is not None and record.get("url") == endpoint.base_url
    )
