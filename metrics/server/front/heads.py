"""New connections until their first request head has arrived, all on one thread (``Heads``).

A connection that is slow or silent costs a socket and at most ``MAX_HEAD`` bytes here, never a
thread, so trickling heads can use up neither the handler threads nor the listener. Nor do the
first moments of a small body that follows its head: it is awaited here, by the kernel, for up
to the server's ``body_hold`` seconds before the request takes a thread.
"""

from __future__ import annotations

import heapq
import logging
import math
import selectors
import socket
import sys
import threading
import time
import traceback
import re
from collections import deque
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, cast

from panelist.metrics.server.front.connection import MAX_HEAD, close_quietly
from panelist.metrics.server.front.memory import SMALL_BODY
from panelist.metrics.wire.errors import error_body

_HEALTH = re.compile(rb"(?:GET|HEAD) /health(?:[ ?]|/ )")
_WRITE = re.compile(rb"(?:POST|PUT|PATCH|DELETE) ")
_LENGTH = re.compile(rb"\ncontent-length:[ \t]*([0-9]{1,18})[ \t]*\r?\n", re.IGNORECASE)
_EXPECT = re.compile(rb"\nexpect:", re.IGNORECASE)
_FULL, _FULL_WHY = 503, "the server is at its connection limit; retry in a second"
# DEBUG records of connections before they have a thread (off unless logging turns them on)
log = logging.getLogger("panelist.server.heads")

if TYPE_CHECKING:  # the server imports this module
    from panelist.metrics.server.front.base import Server


class _Pending:
    __slots__ = ("addr", "deadline", "quiet", "buf", "scan")

    def __init__(self, addr, deadline: float, quiet: float):
        self.addr, self.deadline, self.quiet = addr, deadline, quiet
        self.buf, self.scan = bytearray(), 0


class Heads(threading.Thread):
    """New connections until their first request head has arrived, all on this one thread.

    A connection that is slow or silent costs a socket and at most ``MAX_HEAD`` bytes here,
    never a thread, so trickling heads cannot use up the handler threads nor make the listener
    wait. Invariants:

    * at most ``max_pending`` connections are pending; a newcomer past it drops the one pending
      longest (408 if any of its head came, else without a word);
    * a pending connection is closed ``head_timeout`` after its accept (408 if any of its head
      came), or without a word once it sent nothing for ``client_timeout``;
    * a complete head (or one over the cap, or cut by the client's end of input: its handler
      then refuses or answers it) goes to a handler thread as soon as one of ``max_connections``
      is free and the server is not ``saturated`` (connections it handed to threads still
      waiting to run: more would only compete for the interpreter lock), waiting in ``ready``
      meanwhile; past ``max_pending`` ready ones, a newly complete head gets 503 with
      Retry-After;
    * a complete head of a write with a body of at most ``SMALL_BODY`` bytes still to come (and
      no ``Expect``, whose client waits for a word first) waits here first, for the rest of its
      body or ``body_hold`` seconds, whichever comes first: the socket's low-water mark
      (``SO_RCVLOWAT``) lets the kernel gather it and wake this thread once, so a trickled body
      costs no thread in that time and no wake-up per piece. It counts as pending; making room,
      the one held longest goes on to a thread first. Its route's gate, cap and deadline then
      apply as to any request (the gate's answer comes at most ``body_hold`` late). One whose
      body did not come whole waits in ``late``, behind every request in ``ready``, and is the
      one refused (503) when a request in ``ready`` needs its place;
    * a complete ``GET /health`` head goes to one of the server's reserve threads at once when
      one is free, ahead of every head waiting in ``ready``;
    * a complete head of a write whose body the server's in-flight budget has no room for, even
      once the grants of requests already answered are back, gets 503 with Retry-After at once:
      it would only take a thread (and drop someone for it) to be told so;
    * once the server drains (``quiet_down``), a pending connection that has sent nothing is
      closed without a word (nothing was asked of it), while heads that began still arrive and
      go to a thread; ``busy`` says whether any connection is still here."""

    def __init__(self, server: "Server"):
        super().__init__(name="gateway-heads", daemon=True)
        self.server = server
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._inbox: deque = deque()  # (socket, address) from the listener
        self._pending: dict[socket.socket, _Pending] = {}  # in accept order: oldest first
        self._quiet: dict[socket.socket, _Pending] = {}  # the same, least recently heard first
        # complete heads whose bodies are awaited: (address, bytes read, when the wait ends)
        self._held: dict[socket.socket, tuple] = {}  # oldest first
        # (socket, address, head) waiting for a handler thread; in _late, of requests whose
        # bodies did not come whole
        self._ready: deque[tuple[socket.socket, Any, bytes]] = deque()
        self._late: deque[tuple[socket.socket, Any, bytes]] = deque()
        # answers a handler left to send later (``answer_later``): from handler threads, then
        # (when, order, socket, bytes) in time order, here alone
        self._later_in: deque = deque()
        self._later: list = []
        self._later_made = 0
        self._halt = False
        self._quiet_down = False

    def add(self, sock: socket.socket, addr) -> None:
        """From the listener: a new connection to read a head from."""
        self._inbox.append((sock, addr))
        self.wake()

    @property
    def holding(self) -> int:
        """How many complete heads wait here for the rest of their bodies."""
        return len(self._held)

    @property
    def answers_waiting(self) -> int:
        """How many answers wait here to be sent later (``answer_later``)."""
        return len(self._later) + len(self._later_in)

    @property
    def waiting(self) -> bool:
        """Whether complete heads wait for a handler thread."""
        return bool(self._ready or self._late)

    def answer_later(self, sock: socket.socket, data: bytes, pause: float) -> bool:
        """From a handler's thread: send ``data`` on ``sock`` ``pause`` seconds from now, then
        close it. False when this thread is not running or already holds ``max_pending``
        answers (the caller sends it now)."""
        if self._halt or not self.is_alive() or self.answers_waiting >= self.server.max_pending:
            return False
        self._later_in.append((time.monotonic() + pause, sock, data))
        self.wake()
        return True

    def wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # already awake (the buffer is full) or stopping
            pass

    @property
    def busy(self) -> bool:
        """Whether connections are still being read here, wait for a thread or for an answer
        left to send later."""
        return bool(
            self._inbox
            or self._pending
            or self._held
            or self._ready
            or self._late
            or self._later
            or self._later_in
        )

    def quiet_down(self) -> None:
        """The server drains: close the connections that have sent nothing, now and from now."""
        self._quiet_down = True
        self.wake()

    def stop(self) -> None:
        self._halt = True
        if self.ident is None:  # never started: nothing to wait for
            self._close_all()
            return
        self.wake()
        self.join(timeout=5)

    def run(self) -> None:
        try:
            while not self._halt:
                try:
                    self._turn()
                except Exception:  # one connection's fault must not stop new ones being read
                    print("[gateway] reading request heads:", file=sys.stderr)
                    traceback.print_exc()
        finally:
            self._close_all()

    def _turn(self) -> None:
        # besides the wake-ups, look again for a thread
        timeout = 0.25 if self._ready or self._late else None
        soonest = math.inf
        if self._pending:
            soonest = min(
                next(iter(self._pending.values())).deadline, next(iter(self._quiet.values())).quiet
            )
        if self._held:
            soonest = min(soonest, next(iter(self._held.values()))[2])
        if self._later:
            soonest = min(soonest, self._later[0][0])
        if soonest < math.inf:
            timeout = min(timeout or math.inf, max(0.0, soonest - time.monotonic()))
        for key, _ in self._sel.select(timeout):
            if key.fileobj is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
            elif key.fileobj in self._held:  # its body is in (or it ended): on to a thread
                self._unhold(key.fileobj, came=True)
            else:  # the selector holds only the wake socket and client sockets
                self._read(cast(socket.socket, key.fileobj))
        while self._inbox:
            self._take(*self._inbox.popleft())
        self._take_later()
        if self._quiet_down:
            self._send_later(math.inf)  # a drain sends what is owed now
            for sock in [s for s, p in self._pending.items() if not p.buf]:
                self._close(sock)
            while self._held:  # requests that began: answered, as every one is on a drain
                self._unhold(next(iter(self._held)))
        self._expire()
        waiting = len(self._ready) + len(self._late)
        server = self.server
        while (
            self._ready and not server.saturated and server.admit(*self._ready[0], waiting=waiting)
        ):
            self._ready.popleft()
            waiting -= 1
        while (
            not self._ready
            and self._late
            and not server.saturated
            and server.admit(*self._late[0], waiting=len(self._late))
        ):
            self._late.popleft()

    def _take_later(self) -> None:
        """Move the answers handed in by handler threads into the time-ordered heap."""
        while self._later_in:
            at, sock, data = self._later_in.popleft()
            self._later_made += 1
            heapq.heappush(self._later, (at, self._later_made, sock, data))

    def _send_later(self, now: float) -> None:
        """Send the answers due by ``now`` and close their connections."""
        while self._later and self._later[0][0] <= now:
            _, _, sock, data = heapq.heappop(self._later)
            try:
                sock.setblocking(False)
                sock.send(data)  # a small answer on a connection that sent nothing since
            except OSError:
                pass  # the client left while it waited: nobody to tell
            close_quietly(sock)

    def _close_all(self) -> None:
        self._take_later()
        self._send_later(math.inf)  # stopping: what is owed goes now
        for sock in [
            *self._pending,
            *self._held,
            *(r[0] for r in (*self._ready, *self._late)),
            *(i[0] for i in self._inbox),
        ]:
            sock.close()
        self._pending.clear()
        self._held.clear()
        self._quiet.clear()
        self._ready.clear()
        self._late.clear()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def _take(self, sock: socket.socket, addr) -> None:
        log.debug("connection %d: accepted, its first head awaited", sock.fileno())
        if self._held and len(self._pending) + len(self._held) >= self.server.max_pending:
            self._unhold(next(iter(self._held)))  # make room: its wait for a body ends early
        elif len(self._pending) >= self.server.max_pending:  # make room: the slowest goes
            oldest, p = next(iter(self._pending.items()))
            if p.buf:
                self._refuse(
                    oldest,
                    408,
                    "the server needed this connection for another "
                    "client while the request head was still arriving; send the "
                    "request line and headers at once",
                )
            else:
                self._close(oldest)
        sock.setblocking(False)
        now = time.monotonic()
        p = _Pending(addr, now + self.server.head_timeout, now + self.server.client_timeout)
        self._pending[sock] = self._quiet[sock] = p
        self._sel.register(sock, selectors.EVENT_READ)
        # most clients sent their head with the connection: read it now, before a burst of
        # newcomers behind it could make this one the oldest pending and so the one dropped
        self._read(sock)

    def _read(self, sock: socket.socket) -> None:
        p = self._pending[sock]
        try:
            data = sock.recv(min(65536, MAX_HEAD + 1 - len(p.buf)))
        except BlockingIOError:
            return
        except OSError:
            self._close(sock)
            return
        if not data:  # the client's end of input: its handler answers what came, if anything
            self._complete(sock) if p.buf else self._close(sock)
            return
        p.buf += data
        p.quiet = time.monotonic() + self.server.client_timeout
        del self._quiet[sock]  # to the back: the order stays that of the last byte heard
        self._quiet[sock] = p
        # the head ends with an empty line: a line feed, then CR LF or a bare LF (RFC 9112 §2.2)
        ended = p.buf.find(b"\n\r\n", p.scan) >= 0 or p.buf.find(b"\n\n", p.scan) >= 0
        p.scan = max(0, len(p.buf) - 2)
        if ended or len(p.buf) > MAX_HEAD:  # over the cap: its handler says 414 or 431
            self._complete(sock)

    def _complete(self, sock: socket.socket) -> None:
        self._sel.unregister(sock)
        p = self._pending.pop(sock)
        del self._quiet[sock]
        if _HEALTH.match(p.buf) and self.server.admit(sock, p.addr, bytes(p.buf), reserve=True):
            return
        size, end = _framing(p.buf)
        if size is not None and self._over_budget(size):  # told now, before it takes a thread
            self._refuse(sock, 503, self.server.in_flight.refusal(), retry_after=True)
            return
        left = 0 if size is None or not end else size - (len(p.buf) - end)  # still to come
        if 0 < left <= SMALL_BODY and not _EXPECT.search(p.buf, 0, end) and self._hold(sock, left):
            until = time.monotonic() + self.server.body_hold
            self._held[sock] = (p.addr, bytes(p.buf), until)
            return
        self._to_ready(sock, p.addr, bytes(p.buf))

    def _to_ready(self, sock: socket.socket, addr, head: bytes, late: bool = False) -> None:
        """Queue a request for a thread; ``late``: one whose body was awaited and did not come
        whole, which waits behind every other (a request sent at once is answered at once, so
        clients trickling bodies cannot make it queue behind them)."""
        if len(self._ready) + len(self._late) >= self.server.max_pending:  # a queue behind
            if late or not self._late:
                self._refuse(sock, _FULL, _FULL_WHY, retry_after=True)
                return
            self._refuse(self._late.popleft()[0], _FULL, _FULL_WHY, retry_after=True)
        (self._late if late else self._ready).append((sock, addr, head))
        log.debug(
            "connection %d: head complete, queued for a thread%s",
            sock.fileno(),
            " (behind the others: its body was late)" if late else "",
        )

    def _hold(self, sock: socket.socket, left: int) -> bool:
        """Wait here for the ``left`` bytes of a body still to come; False where the system
        cannot be told to wake us only once they are in."""
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, left)
            self._sel.register(sock, selectors.EVENT_READ)
        except (OSError, AttributeError, ValueError):
            _lowat_back(sock)
            return False
        return True

    def _unhold(self, sock: socket.socket, came: bool = False) -> None:
        """A held request's body came (``came``: the kernel woke us, the body whole or the
        input ended), or was waited for long enough: to a thread."""
        addr, head, _ = self._held.pop(sock)
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        if _lowat_back(sock):
            self._to_ready(sock, addr, head, late=not came)
        else:
            close_quietly(sock)

    def _over_budget(self, size: int) -> bool:
        """Whether a write's body of ``size`` bytes has no room in the in-flight budget now (and
        one day could have: a body past the caps is its handler's to refuse, with 413)."""
        budget = self.server.in_flight
        # grants of requests already answered are counted back: its thread waits for them
        return size <= self.server.max_body and not budget.fits(budget.cost(size), soon=True)

    def _expire(self) -> None:
        now = time.monotonic()
        self._send_later(now)
        while self._held and next(iter(self._held.values()))[2] <= now:
            self._unhold(next(iter(self._held)))
        while self._quiet:  # silent for client_timeout: most likely gone, as in a handler
            sock, p = next(iter(self._quiet.items()))
            if p.quiet > now:
                break
            self._close(sock)
        while self._pending:
            sock, p = next(iter(self._pending.items()))
            if p.deadline > now:
                return
            if p.buf:
                self._refuse(
                    sock,
                    408,
                    f"the request head did not arrive within "
                    f"{self.server.head_timeout:g} s; send the request line and "
                    "headers at once",
                )
            else:  # nothing was asked, so nothing is answered
                self._close(sock)

    def _refuse(
        self, sock: socket.socket, status: int, message: str, retry_after: bool = False
    ) -> None:
        log.debug("connection %d: refused with %d before it had a thread", sock.fileno(), status)
        body = error_body(message)
        common = "".join(f"{k}: {v}\r\n" for k, v in self.server.common_headers.items())
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
            + ("Retry-After: 1\r\n" if retry_after else "")
            + common
            + "\r\n"
        )
        try:
            sock.send(head.encode() + body)  # nothing was sent before: the buffer has room
        except OSError:
            pass
        self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        if self._pending.pop(sock, None) is not None:
            del self._quiet[sock]
            self._sel.unregister(sock)
        close_quietly(sock)


def _framing(buf: bytearray) -> tuple[int | None, int]:
    """A write's Content-Length, read from its head only (None for other requests or when it
    has none), and where its body begins in ``buf`` (0 if the head has no end there)."""
    ends = [(i, n) for i, n in ((buf.find(b"\n\r\n"), 3), (buf.find(b"\n\n"), 2)) if i >= 0]
    first, sep = min(ends) if ends else (len(buf), 0)  # no end: a head over its cap or cut
    if not _WRITE.match(buf):
        return None, first + sep
    found = _LENGTH.search(buf, 0, first + 1)
    return (int(found[1]) if found else None), (first + sep if sep else 0)


def _lowat_back(sock: socket.socket) -> bool:
    """Let a read on ``sock`` wake at its first byte again; False if the socket is gone."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
    except AttributeError:  # never set on this system
        pass
    except OSError:
        return False
    return True
