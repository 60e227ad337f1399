"""Connections given up before their answer came, kept until the upstream is done with them
(``Settler``), and the once-only release a call hands the transport (``Release``).

Cutting a connection (a deadline, a cancel, an answer too big) tells the upstream we left, but
many upstreams finish the work they started anyway: a provider generates to its end before it
notices. A caller that counts the calls running on an upstream (admission's ``max_concurrent``)
must count such a call until the upstream has really ended it, or the upstream sees more calls
at once than the limit allows. So a connection cut mid-call is shut down (our side is closed)
but not yet let go: it settles until the upstream ends the call, by closing its side or by
answering (which our shut socket refuses with a reset), or until ``SETTLE`` seconds passed.
Only then is it closed and the call's ``Release`` run.

Invariants:

* a ``Release`` runs its function exactly once, after every holder let go of it: the exchange
  that made the call (when it ends, however) and the settling of its connection, if any;
* a connection settles at most ``SETTLE`` seconds, then is closed whatever the upstream does
  (the limit may be exceeded past that: said in docs/architecture.md);
* the end of an upstream's work is read from the connection's TCP state (``TCP_INFO``, Linux):
  established or ours half closed (FIN_WAIT1/2) means the upstream has not ended it. Where the
  system does not tell, a connection settles at once, as before this module existed;
* one thread per ``Settler`` looks at what settles every ``TICK`` seconds, and sleeps without a
  tick while nothing does.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

SETTLE = 30.0  # the longest a cut connection is kept for its upstream to end the call
TICK = 0.02  # how often the connections settling are looked at
# TCP states (linux/tcp_states.h) in which the upstream has not closed its side yet
_WORKING = frozenset({1, 4, 5})  # ESTABLISHED, FIN_WAIT1, FIN_WAIT2


class Release:
    """Runs ``fn`` once, when the last of its holders lets go (``hold`` / ``done``). Made with
    one holder: the exchange that carries it."""

    __slots__ = ("_fn", "_holders", "_lock")

    def __init__(self, fn: Callable[[], None]):
        self._fn, self._holders, self._lock = fn, 1, threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self._holders += 1

    def done(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            self._fn()


def upstream_working(sock: socket.socket) -> bool | None:
    """Whether the upstream may still be working on the call this connection carried (its side
    is still open); None when the system cannot tell."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
    except (AttributeError, OSError):
        return None
    return info[0] in _WORKING


class Settler:
    """Keeps cut connections until their upstream ends the call (see the module docstring)."""

    def __init__(self, settle: float = SETTLE):
        self.settle = settle
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._settling: list[tuple[socket.socket, float, Release]] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, sock: socket.socket, release: Release) -> None:
        """Keep ``sock`` (already shut down, or shut down here) until its upstream ends the call,
        then close it and let go of ``release``; at once when nothing tells the upstream's end
        or the settler is closed."""
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also for TLS
        except OSError:
            pass  # already shut, or already closed by the upstream
        if upstream_working(sock) is not True:
            sock.close()
            return
        release.hold()
        with self._lock:
            if self._closed:
                settled = True
            else:
                settled = False
                self._settling.append((sock, time.monotonic() + self.settle, release))
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="panelist-settle", daemon=True
                    )
                    self._thread.start()
                self._wake.notify()
        if settled:
            sock.close()
            release.done()

    @property
    def settling(self) -> int:
        """How many connections are kept now."""
        with self._lock:
            return len(self._settling)

    def close(self) -> None:
        """Let every connection go now (the transport closes)."""
        with self._lock:
            self._closed = True
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._settling and not self._closed:
                    self._wake.wait()
                if self._closed:
                    ended, self._settling = self._settling, []
                else:
                    now = time.monotonic()
                    ended = [
                        s
                        for s in self._settling
                        if now >= s[1] or upstream_working(s[0]) is not True
                    ]
                    self._settling = [s for s in self._settling if s not in ended]
            for sock, _, release in ended:
                sock.close()
                release.done()
            if self._closed:
                return
            with self._lock:
                if self._settling:
                    self._wake.wait(TICK)
