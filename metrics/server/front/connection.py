"""One client connection as the server reads and writes it: its socket behind read deadlines
(``Wire``), its request's header fields (``RequestHeaders``), and the rules on what a connection
may cost.

* a request head (request line and header fields) arrives whole within ``head_timeout`` of its
  first byte (of the connection's opening, for its first request), and is at most ``MAX_HEAD``;
  a body within ``body_timeout`` plus one second per ``MIN_BODY_RATE`` bytes. Deadlines are
  re-armed before every read, so trickled bytes never extend them. A late head or body gets 408,
  then the close.
* a body being read costs its thread no wake-up per packet: the socket's low-water mark
  (``SO_RCVLOWAT``, where the system has one) makes a read wait until the rest of the body, or
  ``BODY_WAKE`` bytes of it, have come, so a body trickled in small pieces wakes its thread
  once per ``BODY_WAKE`` bytes (or at its deadline), never per piece.
* a ``Wire`` is in one phase at a time: ``IDLE`` between requests, ``HEAD`` while a head arrives,
  ``BODY`` while its route reads the body, ``BUSY`` otherwise once its head was read. To *take
  back* a connection is to shut its read side so that its thread ends it (``Wire.drop``) and
  serves a request waiting for a thread instead (connection reclaiming). The server
  may take back a HEAD, BODY or IDLE one for another client, never a BUSY one (the phase
  and the mark change together under ``Wire.state``): a connection that is only sending bytes
  holds no work worth protecting, one being answered does. Nor a HEAD one
  whose head has arrived ``whole`` (it waits for nothing from its client and is BUSY in moments),
  nor an IDLE one whose next head is waiting whole. Bytes of a head are read under the server's
  lock, so the server sees them waiting or read, never in between.
"""

from __future__ import annotations

import io
import logging
import math
import select
import socket
import threading
import time

# DEBUG records of a connection's phases (off unless the logging setup turns them on)
log = logging.getLogger("panelist.server.connection")

MAX_BODY = 20 * 1024 * 1024  # the tightest whole-request cap among the big providers (Gemini's)
MAX_HEADERS = 100  # header lines a request may carry (431 past it, as http.server)
MAX_HEAD = 64 * 1024  # request line and header lines together (431 past it)
MAX_LENGTH_DIGITS = 18  # a Content-Length longer than this is no size we would read
MIN_BODY_RATE = 16 * 1024  # bytes a second a body must average once body_timeout is spent
HEAD_TIMEOUT = 15.0
BODY_HOLD = 1.0  # seconds a small body may be awaited before its request takes a thread
BODY_TIMEOUT = 15.0
STALL_GRACE = 1.0  # seconds a body may come slower than MIN_BODY_RATE before it counts as stalled
MAX_CONNECTIONS = 512
# bytes of a body a read waits for at most: what STALL_GRACE lets a body lag at MIN_BODY_RATE,
# so a body counted in such steps is never taken for a stalled one (``Wire.stalled``)
BODY_WAKE = int(MIN_BODY_RATE * STALL_GRACE)
IDLE, HEAD, BUSY, BODY = 0, 1, 2, 3  # a Wire's phase; the server may drop all but a BUSY one
PHASES = ("IDLE", "HEAD", "BUSY", "BODY")  # their names, for the log


class RequestHeaders:
    """A request's header fields, read like ``email.message.Message``: ``get``, ``[]`` (None
    when absent) and ``in`` ignore the name's case; a repeated field gives its first value."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, str]):
        self._fields = fields  # lower-cased name -> value

    def get(self, name: str, default=None):
        return self._fields.get(name.lower(), default)

    def __getitem__(self, name: str):
        return self._fields.get(name.lower())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self):
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def items(self):
        return self._fields.items()


class Late(TimeoutError):
    """A read deadline passed (or the server took the connection back for another). A plain
    TimeoutError from a read means the client went quiet for a whole ``client_timeout``."""


class Wire(io.RawIOBase):
    """One connection's socket as its handler reads and writes it, and its entry in the
    server's table of open connections.

    Reads wait at most until the current deadline: the socket's timeout is set to the time left
    before every ``recv``, so a client sending one byte at a time cannot push the deadline back.
    In the body the deadline moves on by one second per ``MIN_BODY_RATE`` bytes received, so a
    body arriving at that rate or faster is never cut, and the whole wait is at most
    ``body_timeout + length / MIN_BODY_RATE``. Writes always get the server's ``client_timeout``
    per send, however little time a read had left."""

    def __init__(
        self,
        sock: socket.socket,
        stall: float,
        head_timeout: float,
        head: bytes = b"",
        *,
        room: threading.Lock | None = None,
    ):
        """``room``: the server's lock over its table of connections (a lock of its own if
        None), held while the bytes of a head are read."""
        super().__init__()
        self.sock = sock
        self.fd = sock.fileno()  # named in the DEBUG log; read once, as every record needs it
        self.room = room or threading.Lock()
        # guards ``phase`` and ``dropped`` together: the connection's own thread moves the phase,
        # the server's heads thread drops it, and neither may act on a state the other is
        # changing. One lock per connection, so requests never queue behind each other on it;
        # taken after ``room`` where both are held.
        self.state = threading.Lock()
        self.stall = stall  # seconds one read or write may block, and the wait for a next request
        self.head_timeout = head_timeout
        self._head = memoryview(head)  # what ``Heads`` read before this connection had a thread
        self.phase = HEAD
        self.since = time.monotonic()
        self.deadline = self.since + head_timeout
        self.per_byte = 0.0  # seconds each received byte adds to the deadline (bodies only)
        self.got = 0  # bytes received in this phase
        self.delivered = 0  # bytes handed to the reader over the connection's life
        self.body_left = 0  # bytes of the body being read still to come from the socket
        self._lowat = 1  # the socket's SO_RCVLOWAT now (0: the system has none)
        self.dropped = False  # the server took this connection back (under its lock)
        self.reserve = False  # answers one /health request from the server's own reserve
        self.whole = ends_head(head)  # the head being read has all arrived (HEAD only)
        self._tight = False  # the socket's timeout is a read deadline's, not ``stall``

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n] = self._head[:n]
            self._head = self._head[n:]
            self.delivered += n
            return n
        left = self.deadline + self.got * self.per_byte - time.monotonic()
        if left <= 0 or self.dropped:
            raise Late("the read deadline passed")
        self.sock.settimeout(min(left, self.stall))
        self._tight = True
        try:
            n = self._recv(buf, min(left, self.stall))
        except TimeoutError:
            if left <= self.stall:
                raise Late("the read deadline passed") from None
            raise  # silent for client_timeout: most likely gone
        if not n and self.dropped:  # the server shut our read side: not the client's EOF
            raise Late("the connection was taken back for another client")
        self.got += n
        self.delivered += n
        return n

    def _recv(self, buf, wait: float) -> int:
        """One ``recv``. Of a head's bytes (or a next request's first), once they are there,
        under the server's lock, with ``whole`` and the phase set before it is let go: choosing
        whom to take back under that lock, the server sees those bytes still waiting or read and
        accounted for, never read by a thread that has not yet run on to say so."""
        if self.phase == BODY and self.body_left > 1:
            return self._recv_body(buf)
        if self.phase not in (IDLE, HEAD):
            return self.sock.recv_into(buf)
        if not has_input(self.sock, wait):
            raise TimeoutError("no bytes came in time")
        with self.room:  # taken back meanwhile, it still reads what came: a 408 follows
            n = self.sock.recv_into(buf)
            if n:
                self.whole = ends_head(buf[:n])
            if n and self.phase == IDLE:  # a next request begins: its head is now due
                with self.state:
                    self.phase, self.since = HEAD, time.monotonic()
                self.deadline = self.since + self.head_timeout
                self.got = 0
                log.debug("connection %d: a next request's head begins", self.fd)
        return n

    def _recv_body(self, buf) -> int:
        """One read of a body: woken once the rest of it (or ``BODY_WAKE`` bytes) is here, or
        at the time the caller allowed (``TimeoutError``, unless some bytes came: those are
        taken, so the deadline is judged on every byte that arrived)."""
        self._set_lowat(min(self.body_left, BODY_WAKE, len(buf)))
        try:
            n = self.sock.recv_into(buf)
        except TimeoutError:
            if not self._lowat:
                raise
            self.sock.settimeout(0)  # what came short of the mark, without another wait
            try:
                n = self.sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                raise TimeoutError("no bytes came in time") from None
        self.body_left -= n
        return n

    def _set_lowat(self, n: int) -> None:
        if self._lowat in (0, n):  # none to set, or set already
            return
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, max(1, n))
            self._lowat = max(1, n)
        except (OSError, AttributeError):  # not on this system: a wake-up per packet, as ever
            self._lowat = 0

    def write(self, data) -> int:
        if self._tight:
            self.sock.settimeout(self.stall)
            self._tight = False
        self.sock.sendall(data)
        return len(data)

    def fileno(self) -> int:
        return self.sock.fileno()

    def await_request(self) -> None:
        """Between requests on a kept connection: wait up to ``stall`` for the next one."""
        self.whole = False
        with self.state:
            self.phase, self.since = IDLE, time.monotonic()
        log.debug("connection %d: idle, waiting for its next request", self.fd)
        self.deadline, self.per_byte, self.got = self.since + self.stall, 0.0, 0

    def expect_body(self, grace: float, left: int) -> None:
        """A body is due: ``grace`` seconds plus one per ``MIN_BODY_RATE`` bytes received, of
        which ``left`` bytes are still to come from this wire (the rest is in the reader's
        buffer). Its phase (BODY, under the server's lock) is the server's to set."""
        self.since = time.monotonic()
        self.deadline, self.per_byte, self.got = self.since + grace, 1 / MIN_BODY_RATE, 0
        self.body_left = max(0, left - len(self._head))  # what ``Heads`` read is no socket's

    def stalled(self, now: float) -> bool:
        """A body that has come slower than ``MIN_BODY_RATE`` for more than ``STALL_GRACE``
        seconds: a trickler's, or a link too slow to hold a thread for while others wait."""
        return self.phase == BODY and self.got < (now - self.since - STALL_GRACE) * MIN_BODY_RATE

    def no_deadline(self) -> None:
        self.deadline, self.per_byte = math.inf, 0.0
        self.body_left = 0
        self._set_lowat(1)  # heads and the next request's first byte wake a read at once

    def drop(self) -> bool:
        """Wake the handler's read with an end of input it will take as ``Late``. Called by the
        server, under its lock, for an IDLE, HEAD or BODY wire: one that turned busy meanwhile
        is never cut (False)."""
        with self.state:
            if self.phase == BUSY or self.dropped:
                return False
            self.dropped = True
        log.debug("connection %d: taken back in phase %s", self.fd, PHASES[self.phase])
        try:
            self.sock.shutdown(socket.SHUT_RD)  # the write side stays: a 408 can still go out
        except OSError:
            pass
        return True

    def turn(self, phase: int) -> bool:
        """Move to ``phase`` (BUSY or BODY) unless the server took this connection back first
        (False). Under ``state``, so ``drop`` sees either the old phase or the new one, never a
        connection dropped just after it turned busy."""
        with self.state:
            if self.dropped:
                return False
            self.phase = phase
        return True


def too_large(size: int, cap: int) -> str:
    """Why a body of ``size`` bytes is refused on a route that takes at most ``cap``."""
    if cap >= 2**20:
        return (
            f"the body is {size} bytes, over the {cap // 2**20} MB cap; send images as "
            "https:// URLs or smaller images"
        )
    return (
        f"the body is {size} bytes; this route takes at most {cap // 1024 or 1} KB, so send "
        "only the fields it reads"
    )


def ends_head(data) -> bool:
    """Whether ``data`` holds the empty line that ends a request head (after CR LF or a bare LF,
    RFC 9112 §2.2). A head whose end came in another read is not seen as whole: the server may
    then take it back, as one still arriving."""
    data = bytes(data)
    return b"\n\r\n" in data or b"\n\n" in data


def has_input(sock: socket.socket, timeout: float = 0.0) -> bool:
    """Whether ``sock`` has bytes, or its peer's end of input, to read within ``timeout``
    seconds. By ``poll`` where the system has one: ``select`` refuses a descriptor past
    FD_SETSIZE (1,024), and a server under a few thousand connections holds many. Raises
    OSError or ValueError for a closed socket."""
    if hasattr(select, "poll"):
        waiting = select.poll()
        waiting.register(sock, select.POLLIN)
        return bool(waiting.poll(math.ceil(timeout * 1000)))
    return bool(select.select([sock], [], [], timeout)[0])


def close_quietly(sock: socket.socket) -> None:
    """End a connection so that a reply already written reaches the client: half-close, then
    discard what the client sent and we never read (up to 1 MB, without waiting), because
    closing over unread bytes sends a reset that can destroy the reply (RFC 9112 §9.6)."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.setblocking(False)
        for _ in range(16):
            if not sock.recv(65536):
                break
    except OSError:
        pass
    sock.close()
