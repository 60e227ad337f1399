"""The gateway: an OpenAI-compatible HTTP front for panels. Thin: parse, call the domain, reply.

    python gateway.py [--host H] [--port P] [--demo] [--data DIR]   (same as `panelist gateway`)

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream: true`` for server-sent
events), ``POST /v1/responses`` (OpenAI's Responses format), ``POST /v1/messages`` (Anthropic's
Messages format), ``POST /bench/verdict``, ``GET /bench/pending``, ``GET /bench/panels/<panel
id>``, ``GET /health``. Every error is OpenAI's error shape (Anthropic's on ``/v1/messages``) with
the right status; anything unexpected is a 500 carrying a request id, with the traceback on stderr.
Every reply of a seated panel (a reply, a stream, or an error such as a panel in which no seat
answered) carries ``X-Panelist-Panel: <panel id>``.

What a connection may cost is bounded (``Wire``, ``Heads`` and ``GatewayServer`` hold the rules):

* a request head (request line and header fields) arrives whole within ``head_timeout`` of its
  first byte (of the connection's opening, for its first request), and is at most 64 KB; a body
  within ``body_timeout`` plus one second per ``MIN_BODY_RATE`` bytes. Deadlines are re-armed before
  every read, so trickled bytes never extend them. A late head or body gets 408, then the close.
* a new connection gets a thread only once its first head has arrived: until then ``Heads``
  holds it on one thread, at most ``max_pending`` of them (a newcomer past that closes the one
  waiting longest). At most ``max_connections`` connections have a thread; when a complete head
  finds them all taken, the one whose next head has been arriving the longest, or else the one
  idle longest between requests, is closed to make room; one busy answering never is. The
  listener itself never waits, so slow or idle clients cannot keep ``/health`` (or anyone) out.
"""

from __future__ import annotations

import io
import math
import re
import select
import selectors
import socket
import sys
import threading
import time
import traceback
import uuid
from collections import deque
from concurrent.futures import TimeoutError as FutureTimeout
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bootstrap  # noqa: F401

from panelist.metrics.wire import models, messages, responses
from panelist.metrics.upkeep import onboarding_worker, schedule
from panelist.metrics.race import registry
from panelist.metrics.ledger import verdict
from panelist.metrics.store import jsonwire
from panelist.metrics.wire.errors import body_of, refusal, shaped, status_of
from panelist.metrics.errors import (BadRequest, MethodNotAllowed, NotFound, PanelistError,
                                     PayloadTooLarge, RequestTimeout)
from panelist.metrics.server.guard import LOCAL, Guard, Settings
from panelist.metrics.home import Home, open_home
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.panel.panel import Panels, section
from panelist.metrics.upstream.proxy import environment_proxies

MAX_BODY = 20 * 1024 * 1024
ROUTES_HELP = ("GET /v1/models, POST /v1/chat/completions, POST /v1/responses, "
               "POST /v1/messages, POST /bench/verdict, GET /bench/pending, "
               "GET /bench/panels/<panel>")
PANEL_HEADER = "X-Panelist-Panel"   # on every reply of a seated panel: its id, to judge it by
MAX_HEADERS = 100   # header lines a request may carry (431 past it, as http.server)
MAX_HEAD = 64 * 1024   # request line and header lines together (431 past it)
MAX_LENGTH_DIGITS = 18   # a Content-Length longer than this is no size we would read
MIN_BODY_RATE = 16 * 1024   # bytes a second a body must average once body_timeout is spent
HEAD_TIMEOUT = 15.0
BODY_TIMEOUT = 15.0
MAX_CONNECTIONS = 512
IDLE, HEAD, BUSY = 0, 1, 2   # a Wire's phase; the server may drop a HEAD one, then an IDLE one
_VERSION = re.compile(r"HTTP/([0-9]{1,10})\.([0-9]{1,10})")
_FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")   # a token (RFC 9110 §5.1)
# two of these make a request ambiguous: which host, where the body ends (RFC 9112 §3.2, §6.3)
_ONCE = frozenset({"host", "content-length", "transfer-encoding"})


class _Headers:
    """A request's header fields, read like ``email.message.Message``: ``get``, ``[]`` (None
    when absent) and ``in`` ignore the name's case; a repeated field gives its first value."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, str]):
        self._fields = fields   # lower-cased name -> value

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

    def __init__(self, sock: socket.socket, stall: float, head_timeout: float, head: bytes = b""):
        super().__init__()
        self.sock = sock
        self.stall = stall   # seconds one read or write may block, and the wait for a next request
        self.head_timeout = head_timeout
        self._head = memoryview(head)   # what ``Heads`` read before this connection had a thread
        self.phase = HEAD
        self.since = time.monotonic()
        self.deadline = self.since + head_timeout
        self.per_byte = 0.0  # seconds each received byte adds to the deadline (bodies only)
        self.got = 0         # bytes received in this phase
        self.dropped = False   # the server took this connection back (under its lock)
        self._tight = False    # the socket's timeout is a read deadline's, not ``stall``

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        left = self.deadline + self.got * self.per_byte - time.monotonic()
        if left <= 0 or self.dropped:
            raise Late("the read deadline passed")
        self.sock.settimeout(min(left, self.stall))
        self._tight = True
        try:
            n = self.sock.recv_into(buf)
        except TimeoutError:
            if left <= self.stall:
                raise Late("the read deadline passed") from None
            raise   # silent for client_timeout: most likely gone
        if not n and self.dropped:   # the server shut our read side: not the client's EOF
            raise Late("the connection was taken back for another client")
        if n and self.phase == IDLE:   # a next request begins: its head is now due
            self.phase, self.since = HEAD, time.monotonic()
            self.deadline = self.since + self.head_timeout
            self.got = 0
        self.got += n
        return n

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
        self.phase, self.since = IDLE, time.monotonic()
        self.deadline, self.per_byte, self.got = self.since + self.stall, 0.0, 0

    def expect_body(self, grace: float) -> None:
        self.deadline, self.per_byte, self.got = time.monotonic() + grace, 1 / MIN_BODY_RATE, 0

    def no_deadline(self) -> None:
        self.deadline, self.per_byte = math.inf, 0.0

    def drop(self) -> None:
        """Wake the handler's read with an end of input it will take as ``Late``. Called by the
        server, under its lock, only for an IDLE or HEAD wire: a busy one is never cut."""
        self.dropped = True
        try:
            self.sock.shutdown(socket.SHUT_RD)   # the write side stays: a 408 can still go out
        except OSError:
            pass


def error_body(message: str) -> bytes:
    return jsonwire.encode(refusal(message))


class _Pending:
    __slots__ = ("addr", "deadline", "quiet", "buf", "scan")

    def __init__(self, addr, deadline: float, quiet: float):
        self.addr, self.deadline, self.quiet = addr, deadline, quiet
        self.buf, self.scan = bytearray(), 0


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
      is free, waiting in ``ready`` meanwhile; past ``max_pending`` ready ones, a newly complete
      head gets 503 with Retry-After."""

    def __init__(self, server: "GatewayServer"):
        super().__init__(name="gateway-heads", daemon=True)
        self.server = server
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._inbox: deque = deque()   # (socket, address) from the listener
        self._pending: dict[socket.socket, _Pending] = {}   # in accept order: oldest first
        self._quiet: dict[socket.socket, _Pending] = {}     # the same, least recently heard first
        self._ready: deque = deque()   # (socket, address, head) waiting for a handler thread
        self._halt = False

    def add(self, sock: socket.socket, addr) -> None:
        """From the listener: a new connection to read a head from."""
        self._inbox.append((sock, addr))
        self.wake()

    @property
    def waiting(self) -> bool:
        """Whether complete heads wait for a handler thread."""
        return bool(self._ready)

    def wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:   # already awake (the buffer is full) or stopping
            pass

    def stop(self) -> None:
        self._halt = True
        if self.ident is None:   # never started: nothing to wait for
            self._close_all()
            return
        self.wake()
        self.join(timeout=5)

    def run(self) -> None:
        try:
            while not self._halt:
                try:
                    self._turn()
                except Exception:   # one connection's fault must not stop new ones being read
                    print("[gateway] reading request heads:", file=sys.stderr)
                    traceback.print_exc()
        finally:
            self._close_all()

    def _turn(self) -> None:
        timeout = 0.25 if self._ready else None   # besides the wake-ups, look again for a thread
        if self._pending:
            soonest = min(next(iter(self._pending.values())).deadline,
                          next(iter(self._quiet.values())).quiet)
            timeout = min(timeout or math.inf, max(0.0, soonest - time.monotonic()))
        for key, _ in self._sel.select(timeout):
            if key.fileobj is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
            else:
                self._read(key.fileobj)
        while self._inbox:
            self._take(*self._inbox.popleft())
        self._expire()
        while self._ready and self.server.admit(*self._ready[0]):
            self._ready.popleft()

    def _close_all(self) -> None:
        for sock in [*self._pending, *(r[0] for r in self._ready), *(i[0] for i in self._inbox)]:
            sock.close()
        self._pending.clear()
        self._quiet.clear()
        self._ready.clear()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def _take(self, sock: socket.socket, addr) -> None:
        if len(self._pending) >= self.server.max_pending:   # make room: the slowest goes
            oldest, p = next(iter(self._pending.items()))
            if p.buf:
                self._refuse(oldest, 408, "the server needed this connection for another "
                             "client while the request head was still arriving; send the "
                             "request line and headers at once")
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
        if not data:   # the client's end of input: its handler answers what came, if anything
            self._complete(sock) if p.buf else self._close(sock)
            return
        p.buf += data
        p.quiet = time.monotonic() + self.server.client_timeout
        del self._quiet[sock]   # to the back: the order stays that of the last byte heard
        self._quiet[sock] = p
        # the head ends with an empty line: a line feed, then CR LF or a bare LF (RFC 9112 §2.2)
        ended = p.buf.find(b"\n\r\n", p.scan) >= 0 or p.buf.find(b"\n\n", p.scan) >= 0
        p.scan = max(0, len(p.buf) - 2)
        if ended or len(p.buf) > MAX_HEAD:   # over the cap: its handler says 414 or 431
            self._complete(sock)

    def _complete(self, sock: socket.socket) -> None:
        self._sel.unregister(sock)
        p = self._pending.pop(sock)
        del self._quiet[sock]
        if len(self._ready) >= self.server.max_pending:   # every handler busy, a queue behind
            self._refuse(sock, 503, "the server is at its connection limit; retry in a second",
                         retry_after=True)
            return
        self._ready.append((sock, p.addr, bytes(p.buf)))

    def _expire(self) -> None:
        now = time.monotonic()
        while self._quiet:   # silent for client_timeout: most likely gone, as in a handler
            sock, p = next(iter(self._quiet.items()))
            if p.quiet > now:
                break
            self._close(sock)
        while self._pending:
            sock, p = next(iter(self._pending.items()))
            if p.deadline > now:
                return
            if p.buf:
                self._refuse(sock, 408, f"the request head did not arrive within "
                             f"{self.server.head_timeout:g} s; send the request line and "
                             "headers at once")
            else:   # nothing was asked, so nothing is answered
                self._close(sock)

    def _refuse(self, sock: socket.socket, status: int, message: str,
                retry_after: bool = False) -> None:
        body = error_body(message)
        common = "".join(f"{k}: {v}\r\n" for k, v in self.server.common_headers.items())
        head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: "
                f"application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
                + ("Retry-After: 1\r\n" if retry_after else "") + common + "\r\n")
        try:
            sock.send(head.encode() + body)   # nothing was sent before: the buffer has room
        except OSError:
            pass
        self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        if self._pending.pop(sock, None) is not None:
            del self._quiet[sock]
            self._sel.unregister(sock)
        close_quietly(sock)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "panelist"
    sys_version = ""
    server: "GatewayServer"

    def setup(self):
        # StreamRequestHandler's, with the connection's Wire as both files
        self.connection = self.request
        self.connection.settimeout(self.server.client_timeout)
        # headers and body leave in separate writes; with Nagle on, the body waits ~40 ms for
        # the client's delayed ACK on every reply
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.wire = self.server.wire_of(self.request)
        self.rfile = io.BufferedReader(self.wire)
        self.wfile = self.wire
        self._expect_continue = False

    def log_message(self, format, *args):  # noqa: A002 - the call log is the record of use
        pass

    def handle(self):
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            self.wire.await_request()
            self.server.idle_now()
            self.handle_one_request()

    def handle_one_request(self):
        """http.server's, with the head's deadline: a head that is late (or that the server
        took back to make room) gets 408 if any of it arrived, and the connection closes."""
        self.raw_requestline = b""
        self.command, self.request_version = None, self.default_request_version
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return   # refused, and answered
            if not self.server.begin_work(self.wire):
                raise Late("taken back as the head completed")
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            method()
        except Late:
            self.close_connection = True
            if self.raw_requestline or self.wire.got:   # a request began: say why it ends here
                why = (f"the request head did not arrive within {self.server.head_timeout:g} s"
                       if not self.wire.dropped else "the server needed this connection for "
                       "another client while the request head was still arriving")
                try:
                    self.send_error(408, f"{why}; send the request line and headers at once")
                except OSError:
                    pass
        except TimeoutError:   # silent for client_timeout, or not reading: most likely gone
            self.close_connection = True

    def parse_request(self):
        """http.server's ``parse_request`` with the same refusals, but header fields read by hand:
        its ``email``-based parsing cost more CPU than the rest of a request's reading. Stricter
        where RFC 9112 allows it (§5.1, §5.2, §6.3): a field line that is not ``name: value``, a
        field name followed by whitespace, a CR or NUL in a value, a folded first line and a
        repeated Host, Content-Length or Transfer-Encoding are refused with 400 instead of ending
        the header section early or taking the first of two framings; so are Content-Length
        beside Transfer-Encoding and a Content-Length that is not plain ASCII digits. A head
        over ``MAX_HEAD`` bytes in all gets 431."""
        self.command = None   # set in case of error on the first line
        self.request_version = self.default_request_version
        self.close_connection = True
        self._expect_continue = False
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = line
        words = line.split()
        if not words:
            return False
        version = (0, 9)
        if len(words) >= 3:
            match = _VERSION.fullmatch(words[-1])
            if match is None:
                self.send_error(400, "Bad request version (%r)" % words[-1])
                return False
            version = int(match[1]), int(match[2])
            if version >= (2, 0):
                self.send_error(505, "Invalid HTTP version (%s)" % words[-1][5:])
                return False
            self.request_version = words[-1]
        if not 2 <= len(words) <= 3:
            self.send_error(400, "Bad request syntax (%r)" % line)
            return False
        if len(words) == 2 and words[0] != "GET":
            self.send_error(400, "Bad HTTP/0.9 request type (%r)" % words[0])
            return False
        if version < (1, 0):   # HTTP/0.9 replies have no status line
            self.send_error(505, "HTTP/0.9 is not served; send HTTP/1.1")
            return False
        self.close_connection = version < (1, 1)
        self.command, self.path = words[0], words[1]
        if self.path.startswith("//"):   # gh-87389: never an open redirect to another host
            self.path = "/" + self.path.lstrip("/")

        fields: dict[str, str] = {}
        name = None
        readline = self.rfile.readline
        room = MAX_HEAD - len(self.raw_requestline)
        for _ in range(MAX_HEADERS + 1):
            raw = readline(65537)   # a late head ends in handle_one_request
            if len(raw) > 65536:
                self.send_error(431, "Line too long")
                return False
            room -= len(raw)
            if room < 0:
                self.send_error(431, f"the request head is over {MAX_HEAD // 1024} KB; send "
                                "fewer or shorter header fields")
                return False
            if raw == b"\r\n" or raw == b"\n" or not raw:
                break
            text = raw.decode("iso-8859-1").removesuffix("\n").removesuffix("\r")
            if "\r" in text or "\0" in text:   # RFC 9110 §5.5: never passed on as a value
                self.send_error(400, "a header line holds a CR or NUL; remove it")
                return False
            if text and text[0] in " \t":   # obs-fold (RFC 9112 §5.2): joined to the last by SP
                if name is None:
                    self.send_error(400, "a header section may not start with whitespace")
                    return False
                value = text.strip(" \t")
                if name and value:
                    fields[name] = f"{fields[name]} {value}" if fields[name] else value
                continue
            field, _, value = text.partition(":")
            if not _FIELD_NAME.fullmatch(field):
                self.send_error(400, "a header line is not 'name: value'; send each field as "
                                "Name: value on its own line")
                return False
            value = value.strip(" \t")
            name = field.lower()
            if name not in fields:   # a repeated field: the first wins, as with email.message
                fields[name] = value
            elif name in _ONCE:
                self.send_error(400, f"the {field} header is repeated; send it once")
                return False
            else:
                name = ""   # a continuation of an ignored repeat is ignored with it
        else:
            self.send_error(431, "Too many headers")
            return False
        length = fields.get("content-length")
        if length is not None:
            if "transfer-encoding" in fields:   # RFC 9112 §6.1: never guess which one frames it
                self.send_error(400, "Content-Length and Transfer-Encoding were both sent; send "
                                "the body with Content-Length only")
                return False
            # RFC 9112 §6.3 wants 1*DIGIT; int() would also take '7_0', '+70' or '٧٠'
            if not (length.isascii() and length.isdigit()) or len(length) > MAX_LENGTH_DIGITS:
                self.send_error(400, "Content-Length must be the body's size in bytes, written "
                                f"with the digits 0-9 only (at most {MAX_LENGTH_DIGITS})")
                return False
        self.headers = _Headers(fields)

        tokens = [t.strip() for t in fields.get("connection", "").lower().split(",")]
        if "close" in tokens:
            self.close_connection = True
        elif "keep-alive" in tokens:
            self.close_connection = False
        # answered in read_json, once every check passed and the body is really wanted
        self._expect_continue = (version >= (1, 1)
                                 and fields.get("expect", "").lower() == "100-continue")
        return True

    def send_error(self, code, message=None, explain=None):
        # http.server's own refusals (a bad request line, oversized headers, an unknown method)
        # in OpenAI's error shape like every other reply, instead of its HTML page
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # a garbled line: still answer with a status line
            self.request_version = "HTTP/1.0"
        # once the request line is read, its path says which shape to answer in
        data = jsonwire.encode(shaped(self.path if self.command else "", code,
                                      refusal(message or f"the request could not be read "
                                              f"({code})")))
        self.send_response(code)  # the standard reason phrase: no request bytes in the status line
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in self.server.common_headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_OPTIONS(self):
        self._dispatch("OPTIONS")

    # -- plumbing ---------------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        self._sent = False
        self._cors: dict = {}
        self.caller = LOCAL
        guard = self.server.guard
        # a body nobody reads would be taken for the next request: such a reply closes instead
        self._unread_body = guard.has_body(self.headers)
        try:
            path = urlsplit(self.path).path.rstrip("/") or "/"
            self._cors = guard.screen(method, path, self.headers)   # 403: foreign host / origin
            if method == "OPTIONS":
                allow = guard.preflight(path, self.headers)
                if allow is not None:
                    self.send_preflight(allow)
                    return
            route, params = self.server.route(path)
            # every route passes its gate; a path no route serves passes the gate its prefix
            # would have, so a 404 never tells a caller without a key what exists
            self.server.admit_caller(self, route.gate if route else gate_of(path), path)
            if route is None:
                raise NotFound(f"no route {method} {path}; {self.server.routes_help}")
            action = route.actions.get(method)
            if action is None:
                allowed = ", ".join(sorted(route.actions))
                raise MethodNotAllowed(f"{method} is not allowed on {path}; use {allowed}",
                                       headers={"Allow": allowed})
            guard.check_body(method, self.headers)                  # 415 / 413
            action(self, params)
        except PanelistError as exc:
            self._fail(status_of(exc), body_of(exc), exc.headers)
        except (ConnectionError, TimeoutError):
            self.close_connection = True  # the client went away or stopped reading: no one to tell
        except Exception:
            self._fail(500, fault(f"{method} {self.path}", "internal error"), {})

    def _fail(self, status: int, body: dict, headers: dict) -> None:
        if self._sent:  # the reply already started: nothing more can be said on this connection
            self.close_connection = True
            return
        try:
            self.send_json(status, shaped(self.path, status, body), headers)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def send_json(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = jsonwire.encode(payload)
        self._sent = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_common()
        if self._unread_body:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_common(self) -> None:
        """The headers every reply of this server carries (a dashboard's CSP), and CORS."""
        for k, v in self.server.common_headers.items():
            self.send_header(k, v)
        for k, v in self._cors.items():
            self.send_header(k, v)

    def read_json(self):
        """The body, parsed by ``jsonwire`` (lone surrogates made U+FFFD, nesting bounded). A
        caller that sent ``Expect: 100-continue`` hears ``100 Continue`` here, after every check
        passed, and never when the request is refused first."""
        length = self.headers.get("Content-Length")   # ASCII digits only: parse_request saw to it
        self._unread_body = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise BadRequest("chunked request bodies are not accepted; send Content-Length")
        if length is None:
            raise BadRequest("a JSON body with Content-Length is required")
        size = int(length)
        if size > MAX_BODY:
            raise PayloadTooLarge(f"the body is {size} bytes, over the {MAX_BODY // 2**20} MB "
                                  "cap; send images as https:// URLs or smaller images")
        if self._expect_continue and size:
            self._expect_continue = False
            self.send_response_only(100)
            self.end_headers()
        grace = self.server.body_timeout
        self.wire.expect_body(grace)
        try:
            raw = self.rfile.read(size)
        except Late:
            raise RequestTimeout(f"the body did not arrive in time (allowed: {grace:g} s plus "
                                 f"1 s per {MIN_BODY_RATE // 1024} KB); send the whole body at "
                                 "once") from None
        except TimeoutError:
            raise RequestTimeout(f"the body stopped arriving for {self.server.client_timeout:g} s "
                                 "before Content-Length bytes; send the whole body at once") \
                from None
        finally:
            self.wire.no_deadline()
        self._unread_body = len(raw) < size
        if self._unread_body:
            raise BadRequest("the body ended before Content-Length bytes arrived")
        try:
            return jsonwire.loads(raw, strict=True)
        except UnicodeDecodeError:
            raise BadRequest("the body must be UTF-8 JSON") from None
        except jsonwire.JSONRefused as exc:
            if str(exc).startswith("the JSON nests"):
                raise BadRequest(f"{exc}; send a flatter body (a chat request needs about six "
                                 "levels)") from None
            raise BadRequest(f"the body is not valid JSON: {exc}") from None

    def client_alive(self) -> bool:
        """False once the caller has closed its end (a readable socket with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return not readable or self.connection.recv(1, socket.MSG_PEEK) != b""
        except (OSError, ValueError):
            return False

    def send_preflight(self, headers: dict) -> None:
        """A CORS preflight's answer: 204, no body (Fetch standard, CORS-preflight fetch)."""
        self._sent = True
        self.send_response(204)
        for k, v in {**self.server.common_headers, **headers}.items():
            self.send_header(k, v)
        if self._unread_body:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()

    def base_url(self) -> str:
        """Where the caller reaches us: the public URL behind a proxy, else the Host it used."""
        public = self.server.guard.settings.public_url
        if public:
            return public.rstrip("/")
        host = self.headers.get("Host") or f"{self.server.host}:{self.server.port}"
        return f"http://{host}"

    # -- SSE --------------------------------------------------------------------------------
    def start_events(self, headers: dict | None = None) -> None:
        self._sent = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_common()
        self.end_headers()

    def send_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def send_event(self, payload, event: str | None = None) -> None:
        data = payload if isinstance(payload, str) else jsonwire.dumps(payload)
        self.send_chunk((f"event: {event}\n" if event else "") + f"data: {data}\n\n")

    def end_events(self, done: bool = True) -> None:
        """End the stream, after ``data: [DONE]`` unless ``done`` is False (formats without it)."""
        if done:
            self.send_event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def fault(context: str, what: str) -> dict:
    """An unexpected fault: its traceback to stderr under a fresh request id, and the OpenAI
    error body that gives the caller that id to report."""
    rid = "req_" + uuid.uuid4().hex[:16]
    print(f"[{rid}] {context}", file=sys.stderr)
    traceback.print_exc()
    return {"error": {"message": f"{what}; report request id {rid}", "type": "server_error",
                      "param": None, "code": rid}}


# -- routes -------------------------------------------------------------------------------------
def get_models_listing(h: Handler) -> dict:
    """The collections this caller may use, each in both reply modes."""
    panels = h.server.panels
    view = panels.known.view()
    states = panels.ledger.states(view.models.keys(), "general")
    mine = {n: c for n, c in panels.collections.all().items() if h.caller.may_use(n)}
    return models.models_list(mine, view, panels.collections.limits(), states)


def get_models(h: Handler, _):
    h.send_json(200, get_models_listing(h))


def get_model(h: Handler, params: dict):
    """One collection as ``GET /v1/models`` lists it (``client.models.retrieve``)."""
    wanted = params["rest"]
    listed = get_models_listing(h)
    for entry in listed["data"]:
        if entry["id"] == wanted:
            h.send_json(200, entry)
            return
    raise NotFound(f"no model '{wanted}' here; the models are collections, listed by "
                   "GET /v1/models (bench/<name>, bench/<name>:merged)", param="model",
                   code="model_not_found")


def post_chat(h: Handler, _):
    body = h.read_json()
    h.caller.check_model(body.get("model") if isinstance(body, dict) else None)  # 403
    panels = h.server.panels
    req = panels.parse(body)
    seating = panels.seat(req)  # every refusal happens here, before anything is sent
    run = panels.start(req, seating, key=h.caller.name)
    # from here on every answer names its panel, errors included, so any client can find it
    mark = {PANEL_HEADER: run.panel}
    try:
        if req.stream:
            stream_panel(h, run, mark)
            return
        reply = panels.complete(run, verdict_url=h.base_url(), alive=h.client_alive)
    except PanelistError as exc:
        exc.headers = {**exc.headers, **mark}
        raise
    if reply is None:  # the caller left; the panel was cancelled and logged
        h.close_connection = True
        return
    # written before the reply goes out, so a caller that has it finds it owed a verdict
    run.delivered_reply(reply)
    h.send_json(200, reply, mark)


def stream_panel(h: Handler, run, mark: dict) -> None:
    """Server-sent events. The 200 head waits until there is something to say: the first seat
    that answered (all mode), the picked answer (pick) or the merge (merged), so a panel that
    fails whole is a real error status, not a stream. Meanwhile the client is checked on, and
    a caller that leaves gives the panel up. Then: all mode sends each seat's section as it
    finishes (keep-alive comments while seats work); pick and merged send the one answer in
    OpenAI's chunk shapes (content, then tool calls); ``bench`` and ``usage`` ride on the final
    chunk."""
    base = {"id": f"chatcmpl-{run.panel}", "object": "chat.completion.chunk",
            "created": int(run.started), "model": run.req.collection.model_id}

    def delta(d: dict, finish=None, **extra):
        return dict(base, choices=[{"index": 0, "delta": d, "finish_reason": finish}], **extra)

    def begin() -> None:
        h.start_events(mark)
        h.send_event(delta({"role": "assistant"}))

    if run.req.reply_mode != "all":
        # the whole answer first (an error is raised before any byte of the stream is sent)
        reply = whole_reply(h, run)
        if reply is None:
            h.close_connection = True
            return
        (choice,) = reply["choices"]
        message = choice["message"]
        try:
            begin()
            if message.get("content"):
                h.send_event(delta({"content": message["content"]}))
            if message.get("tool_calls"):
                h.send_event(delta({"tool_calls": [
                    dict(call, index=i) for i, call in enumerate(message["tool_calls"])]}))
            run.delivered_reply(reply)   # before the last event: see post_chat
            h.send_event(delta({}, choice["finish_reason"], usage=reply["usage"],
                               bench=reply["bench"]))
            h.end_events()
        except OSError:
            h.close_connection = True
        return

    results, waiting = [], []   # waiting: sections of seats that failed before any answered
    sent = []   # the text as the caller received it, in the order it was sent
    quiet_since = time.monotonic()
    tick = min(0.25, h.server.keepalive)
    started = False

    def still_there() -> None:
        nonlocal quiet_since
        if not h.client_alive():
            raise ConnectionResetError("the caller closed the stream")
        if started and time.monotonic() - quiet_since >= h.server.keepalive:
            h.send_chunk(": seats still working\n\n")
            quiet_since = time.monotonic()

    try:
        for result in run.progress(tick=tick):
            if result is None:
                still_there()
                continue
            results.append(result)
            waiting.append(delta({"content": section(result, run.seat_number(result)) + "\n"}))
            if not started and result.answered:
                begin()
                started = True
            if started:
                for event in waiting:
                    h.send_event(event)
                    sent.append(event["choices"][0]["delta"]["content"])
                waiting.clear()
                quiet_since = time.monotonic()
    except OSError:  # the caller went away: stop the seats still running and log the panel
        run.give_up(results)
        h.close_connection = True
        return
    if not started:   # no seat answered: recorded, and a real error status
        run.record(results)
        raise run.failure(results)
    try:
        run.record(results)
        run.delivered("".join(sent))   # every section is out; before the last event
        h.send_event(delta({}, "stop", usage=run.usage(results),
                           bench=run.bench(results, verdict_url=h.base_url())))
    except OSError:
        h.close_connection = True
        return
    except Exception:
        h.send_event(fault(f"streaming {run.panel}", "internal error after the stream began"))
    h.end_events()


def whole_reply(h: Handler, run) -> dict | None:
    """A pick or merged panel's reply, for a stream that has not begun; None when the caller
    left meanwhile (the panel is then given up and logged). The merge runs on a seat thread,
    so the caller can be checked on while it works."""
    panels = h.server.panels
    if run.req.reply_mode == "pick":
        return panels.complete(run, verdict_url=h.base_url(), alive=h.client_alive)
    results = []
    for result in run.progress(tick=min(0.25, h.server.keepalive)):
        if result is not None:
            results.append(result)
        elif not h.client_alive():
            run.give_up(results)
            return None
    merging = run.finish_later(results, verdict_url=h.base_url())
    while True:
        try:
            return merging.result(timeout=0.25)
        except FutureTimeout:
            if not h.client_alive():
                run.abandon()   # cuts the merger's call; the merge then records the panel
                try:
                    merging.result()
                except PanelistError:
                    pass
                return None


# -- other wire formats: thin adapters over the same panel ----------------------------------------
def open_panel(h: Handler, chat: dict):
    """Seat and start the panel a translated request asks for, as ``post_chat`` does."""
    h.caller.check_model(chat.get("model"))  # 403
    panels = h.server.panels
    req = panels.parse(chat)
    seating = panels.seat(req)  # every refusal happens here, before anything is sent
    return panels.start(req, seating, key=h.caller.name)


def answer_of(h: Handler, run, alive):
    """``panels.complete`` as ``post_chat`` calls it; a failure names the panel in its head."""
    try:
        return h.server.panels.complete(run, verdict_url=h.base_url(), alive=alive)
    except PanelistError as exc:
        exc.headers.setdefault(PANEL_HEADER, run.panel)
        raise


def post_responses(h: Handler, _):
    body = h.read_json()
    chat, stream = responses.to_chat(body)
    run = open_panel(h, chat)
    if stream:
        held_stream(h, run, responses.Events(body, run.panel, run.req.collection.model_id,
                                                  int(run.started)))
        return
    reply = answer_of(h, run, h.client_alive)
    if reply is None:  # the caller left; the panel was cancelled and logged
        h.close_connection = True
        return
    run.delivered_reply(reply)
    h.send_json(200, responses.from_chat(reply, body, run.panel), {PANEL_HEADER: run.panel})


def post_messages(h: Handler, _):
    body = h.read_json()
    chat, stream = messages.to_chat(body)
    run = open_panel(h, chat)
    if stream:
        held_stream(h, run, messages.Events(run.panel, run.req.collection.model_id))
        return
    reply = answer_of(h, run, h.client_alive)
    if reply is None:
        h.close_connection = True
        return
    run.delivered_reply(reply)
    h.send_json(200, messages.from_chat(reply, run.panel), {PANEL_HEADER: run.panel})


def held_stream(h: Handler, run, events) -> None:
    """A stream in another format, sent once the panel's reply is known: its 200 head waits for
    the reply, so a panel that fails is a real error status. Only if the seats are still working
    after ``keepalive`` seconds does the stream open early, keeping the client (and proxies) alive
    with the format's keep-alive events; a failure after that is the format's error event.
    ``events`` makes the format's events (see ``wire_messages.Events``)."""
    opened = False

    def send(items) -> None:
        for name, data in items:
            if name is None:   # an SSE comment
                h.send_chunk(f"{data}\n\n")
            else:
                h.send_event(data, event=name)

    def begin() -> None:
        nonlocal opened
        h.start_events({PANEL_HEADER: run.panel})
        opened = True

    def keep_alive() -> None:
        if not opened:
            begin()
            send(events.opening())
        send(events.keepalive())

    reply = None
    try:
        reply = await_reply(h, run, keep_alive)
        if reply is None:  # the caller left; the panel was cancelled and logged
            h.close_connection = True
            return
        # made before the head goes out, so a fault in them is still a plain 500
        ending = ([] if opened else events.opening()) + events.closing(reply)
    except PanelistError as exc:
        if not opened:
            exc.headers.setdefault(PANEL_HEADER, run.panel)
            raise
        ending = events.failure(status_of(exc), body_of(exc))
    except Exception:
        if not opened:
            raise
        ending = events.failure(500, fault(f"streaming {run.panel}", "internal error after the "
                                           "stream began"))
    try:
        if not opened:
            begin()
        if reply is not None:
            run.delivered_reply(reply)   # before the last events: see post_chat
        send(ending)
        h.end_events(done=False)
    except OSError:
        h.close_connection = True


def await_reply(h: Handler, run, keep_alive) -> dict | None:
    """``panels.complete`` on a helper thread while this one watches the caller: ``keep_alive()``
    after every ``keepalive`` seconds of quiet, and a caller that left (or a write that failed)
    cancels the panel, merge included, which is then logged abandoned; None then."""
    gone = threading.Event()
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["reply"] = answer_of(h, run, lambda: not gone.is_set())
        except BaseException as exc:   # handed to the handler's thread, which answers it
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=f"reply-{run.panel}", daemon=True)
    worker.start()
    tick = min(0.25, h.server.keepalive)
    quiet_since = time.monotonic()
    while True:
        worker.join(tick)
        if not worker.is_alive():
            break
        try:
            if not h.client_alive():
                raise ConnectionResetError("the caller closed the stream")
            if time.monotonic() - quiet_since >= h.server.keepalive:
                keep_alive()
                quiet_since = time.monotonic()
        except OSError:
            gone.set()
            run.abandon()   # stops the seats and a merge under way, not only what is to come
            worker.join()
            return None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]


def post_verdict(h: Handler, _):
    """A verdict on a call id, or on a panel id and the model's alias (``merger`` for the
    merged answer)."""
    v = verdict.check(h.read_json())
    ledger = h.server.panels.ledger
    if v["call"] is None and h.caller.keyed:
        h.caller.check_owner(ledger.panel(v["panel"]), f"panel '{v['panel']}'")
    call = verdict.call_of(v, ledger, key=h.caller.scope)
    if h.caller.keyed:  # a key judges only its own calls
        h.caller.check_owner(ledger.call(call), f"call '{call}'")
    result = ledger.record_verdict(call, useful=v["useful"], note=v["note"], real=v["real"],
                                   false=v["false"], by=h.caller.name)
    h.send_json(200, result)


def get_pending(h: Handler, _):
    """Calls owed a verdict (``data``), and apart from them the panels whose reply never
    reached the caller (``abandoned``): their seats are owed nothing."""
    query = parse_qs(urlsplit(h.path).query)
    try:
        limit = int(query.get("limit", ["50"])[0])
    except ValueError:
        raise BadRequest("'limit' must be a whole number", param="limit") from None
    if not 1 <= limit <= 500:
        raise BadRequest("'limit' must be between 1 and 500", param="limit")
    ledger = h.server.panels.ledger
    owed = ledger.pending(key=h.caller.scope, limit=limit)
    left = ledger.undelivered(key=h.caller.scope, limit=limit)
    h.send_json(200, {"object": "list", "data": [verdict.owed(r) for r in owed],
                      "abandoned": [verdict.not_owed(p) for p in left]})


def get_panel(h: Handler, params: dict):
    panel_id = params["panel"]
    found = h.server.panels.ledger.panel(panel_id)
    if found is None:
        raise NotFound(f"unknown panel '{panel_id}'; panel ids are bench.panel in a reply")
    h.caller.check_owner(found, f"panel '{panel_id}'")
    h.send_json(200, found)


def post_race(h: Handler, _):
    registry.admit(h.caller)
    race = registry.of(h.server.panels).start(h.read_json())
    h.send_json(202, race, {"Location": f"/bench/race/{race['race']}"})


def get_race(h: Handler, params: dict):
    registry.admit(h.caller)
    h.send_json(200, registry.of(h.server.panels).get(params["race"]))


def get_races(h: Handler, _):
    registry.admit(h.caller)
    query = {k: v[0] for k, v in parse_qs(urlsplit(h.path).query).items()}
    h.send_json(200, registry.of(h.server.panels).listing(query.get("limit"), query.get("before")))


# -- the route table ----------------------------------------------------------------------------
OPEN, KEYS, ADMIN = "open", "keys", "admin"   # the gates a route may declare


class Route:
    """One path pattern, its actions by method, and the gate every request to it passes.

    ``{name}`` matches one path segment (given to the action percent-decoded, in ``params``);
    a trailing ``*`` matches the rest of the path (``params["rest"]``). The gate is required:
    ``keys`` (gateway keys, when keys are required), ``admin`` (the dashboard's login, when an
    admin token is set) or ``open`` (answered for anyone; only what reveals nothing)."""

    __slots__ = ("pattern", "actions", "gate", "_regex")

    def __init__(self, pattern: str, actions: dict, *, gate: str):
        if gate not in (OPEN, KEYS, ADMIN):
            raise ValueError(f"unknown gate {gate!r} for {pattern}")
        self.pattern, self.actions, self.gate = pattern, actions, gate
        regex = re.escape(pattern.removesuffix("*"))
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", regex)
        self._regex = re.compile(regex + ("(?P<rest>.*)" if pattern.endswith("*") else ""))

    def match(self, path: str) -> dict | None:
        m = self._regex.fullmatch(path)
        return None if m is None else {k: unquote(v) for k, v in m.groupdict().items()}


def gate_of(path: str) -> str:
    """The gate of a path no route serves: that of the routes under its prefix."""
    return KEYS if Guard.gated(path) else ADMIN


def get_health(h: Handler, _):
    h.send_json(200, {"ok": True, "time": time.time()})


GATEWAY_ROUTES = (
    Route("/v1/models", {"GET": get_models}, gate=KEYS),
    # an id holds a "/" (bench/name), which clients send as it is or percent-encoded
    Route("/v1/models/*", {"GET": get_model}, gate=KEYS),
    Route("/v1/chat/completions", {"POST": post_chat}, gate=KEYS),
    Route("/bench/verdict", {"POST": post_verdict}, gate=KEYS),
    Route("/bench/pending", {"GET": get_pending}, gate=KEYS),
    Route("/bench/panels/{panel}", {"GET": get_panel}, gate=KEYS),
    Route("/health", {"GET": get_health}, gate=OPEN),
    Route("/v1/responses", {"POST": post_responses}, gate=KEYS),
    Route("/v1/messages", {"POST": post_messages}, gate=KEYS),
    Route("/bench/race", {"POST": post_race}, gate=KEYS),
    Route("/bench/race/{race}", {"GET": get_race}, gate=KEYS),
    Route("/bench/races", {"GET": get_races}, gate=KEYS),
)


class GatewayServer(ThreadingHTTPServer):
    """The gateway's HTTP server: a connection gets a thread once its first head has arrived
    (``Heads`` reads it), and at most ``max_connections`` have one.

    Each handled socket has a ``Wire`` in ``_wires`` from just before its thread starts until the
    thread ends, so the table counts exactly the threads that hold a connection. Only the heads
    thread adds to it (``admit``) and drops from it (``_drop_one``); phases move to BUSY under the
    same lock, so a connection is never dropped once its head was read."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # bursts of concurrent panels queue instead of being refused

    def __init__(self, panels: Panels, host: str, port: int, *, keepalive: float = 10.0,
                 settings: Settings | None = None, client_timeout: float = 60.0,
                 head_timeout: float = HEAD_TIMEOUT, body_timeout: float = BODY_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS, max_pending: int | None = None):
        if max_connections < 1 or (max_pending is not None and max_pending < 1):
            raise ValueError("max_connections and max_pending must be at least 1")
        self.panels = panels
        self.keepalive = keepalive  # seconds between SSE comments while seats are working
        # seconds one read or write may block, and a kept connection may wait for its next request
        self.client_timeout = client_timeout
        self.head_timeout = head_timeout   # seconds a request head may take to arrive, in all
        self.body_timeout = body_timeout   # seconds a body may take, plus 1 s per MIN_BODY_RATE
        self.max_connections = max_connections   # connections with a thread
        # connections still sending their first head, and complete ones waiting for a thread
        self.max_pending = max_pending or max_connections
        _fit_descriptors(self)
        self._wires: dict[socket.socket, Wire] = {}
        self._room = threading.Lock()
        self._leaving = 0       # dropped wires whose threads have not ended yet
        self._heads = Heads(self)
        self._serving = False
        self.started = threading.Event()   # set once serving, its helper threads running
        self.routes: dict[str, Route] = {}   # exact paths
        self.patterns: list[Route] = []      # the rest, tried in order
        self.routes_help = f"the gateway serves {ROUTES_HELP}"
        self.common_headers: dict[str, str] = {}
        for route in GATEWAY_ROUTES:
            self.add_route(route)
        settings = settings or Settings()
        settings.check_bind(host)  # refused before the port is taken
        jobs = schedule.settings(panels.home)   # a broken schedule too
        super().__init__((host, port), Handler)
        self.host, self.port = self.server_address[:2]
        self.guard = Guard.for_server(settings, panels.home, port=self.port, bound=host,
                                      max_body=MAX_BODY)
        # both started by serve_forever: a server built and never served runs no job
        self.schedule = schedule.Scheduler(panels.home, panels, jobs=jobs)
        self.onboarding = onboarding_worker.attach(panels)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add_route(self, route: Route) -> None:
        if "{" in route.pattern or route.pattern.endswith("*"):
            self.patterns.append(route)
        else:
            self.routes[route.pattern] = route

    def route(self, path: str) -> tuple[Route | None, dict]:
        route = self.routes.get(path)
        if route is not None:
            return route, {}
        for route in self.patterns:
            params = route.match(path)
            if params is not None:
                return route, params
        return None, {}

    def admit_caller(self, h: "Handler", gate: str, path: str) -> None:
        """Pass a request through its route's gate (401 / 429), setting ``h.caller``."""
        if gate == KEYS:
            h.caller = self.guard.identify(path, h.headers)
        elif gate == ADMIN:
            self.check_admin(h)

    def check_admin(self, h: "Handler") -> None:
        """The dashboard's gate; a gateway has no admin routes, so none may pass."""
        raise NotFound(f"no route {h.command} {h.path}; {self.routes_help}")

    # -- connections ----------------------------------------------------------------------------
    def serve_forever(self, poll_interval=0.5):
        self._serving = True   # before the loop starts, so close() knows to stop it
        if not self._heads.is_alive() and not self._heads.ident:
            self._heads.start()
        self.schedule.start()
        self.onboarding.start()
        self.started.set()
        super().serve_forever(poll_interval)

    def process_request(self, request, client_address):
        """The listener's part: hand the new connection over; it never waits here."""
        self._heads.add(request, client_address)

    def admit(self, request, client_address, head: bytes) -> bool:
        """Give a connection whose head arrived a thread, if one of ``max_connections`` is free;
        else drop an idle or slow one to free it (the heads thread retries when it has gone)."""
        with self._room:
            if len(self._wires) >= self.max_connections:
                if not self._leaving:
                    self._drop_one()
                return False
            self._wires[request] = Wire(request, self.client_timeout, self.head_timeout, head)
        try:
            super().process_request(request, client_address)   # ThreadingMixIn: the thread
        except Exception:
            self._release(request)
            self.shutdown_request(request)
            self.handle_error(request, client_address)
        return True

    def _drop_one(self) -> bool:
        """Drop the connection whose next head has been arriving the longest (a whole head comes
        in one packet, so a slow one is most likely a trickler), else the one idle longest
        between requests. Called with ``_room`` held."""
        victim = min((w for w in self._wires.values() if w.phase != BUSY and not w.dropped),
                     key=lambda w: (w.phase != HEAD, w.since), default=None)
        if victim is None:
            return False
        victim.drop()
        self._leaving += 1
        return True

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)   # closes the socket
        finally:
            self._release(request)

    def _release(self, request) -> None:
        with self._room:
            wire = self._wires.pop(request, None)
            if wire is not None and wire.dropped:
                self._leaving -= 1
        self._heads.wake()   # a thread is free: a waiting head may have it

    def shutdown_request(self, request) -> None:
        close_quietly(request)

    def idle_now(self) -> None:
        """A handler waits for its connection's next request: a complete head waiting for a
        thread may have this one."""
        if self._heads.waiting:
            self._heads.wake()

    def wire_of(self, request) -> Wire:
        return self._wires[request]

    def begin_work(self, wire: Wire) -> bool:
        """Mark a connection busy now its head is read; False if it was dropped first."""
        with self._room:
            if wire.dropped:
                return False
            wire.phase = BUSY
        wire.no_deadline()
        return True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # a client going away is no news
            super().handle_error(request, client_address)

    def close(self) -> None:
        """Stop serving (if it ever started: ``shutdown`` would wait forever otherwise), hang up
        every connection not busy with a request, and close the domain; always returns."""
        if self._serving:
            self.shutdown()
        self.server_close()
        self._heads.stop()   # closes every connection still sending its first head
        with self._room:   # connections between requests end now, not after client_timeout
            for wire in self._wires.values():
                if wire.phase != BUSY and not wire.dropped:
                    wire.drop()
        self.schedule.close()   # joined before the upstream and seats it uses close
        self.onboarding.close()   # likewise; an entry it cut short resumes at the next start
        registry.close_of(self.panels)   # races cancelled and joined before their upstream closes
        self.panels.close()
        self.guard.close()


def _fit_descriptors(server: GatewayServer) -> None:
    """Make room in the process's file-descriptor limit for every connection the limits allow:
    raise the soft limit toward the hard one, and if that is not enough, allow fewer pending
    and served connections. Out of descriptors, ``accept`` would fail in a busy loop and seats
    could not reach their upstreams."""
    try:
        import resource
    except ImportError:   # not a Unix: the limit is the system's business
        return
    # a served connection: its own socket and its seats' upstream connections (max_calls is 5
    # by default); 128 for logs, the listener and the upstreams' idle pools
    per_served, spare = 6, 128
    need = server.max_pending + server.max_connections * per_served + spare
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (need if hard == resource.RLIM_INFINITY else min(need, hard), hard))
    except (ValueError, OSError):
        pass
    room = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - spare
    if server.max_pending + server.max_connections * per_served > room:
        server.max_pending = max(1, min(server.max_pending, room // 4))
        server.max_connections = max(1, min(server.max_connections,
                                            (room - server.max_pending) // per_served))


def panels_for(home: Home, env=None) -> Panels:
    """The domain a server runs over; its upstream proxies come from ``env`` when given (as
    the server's settings do), else from the process environment."""
    if env is None:
        return Panels(home)
    return Panels(home, upstream=Upstream(proxies=environment_proxies(env)))


def make_gateway(data_dir, host: str = "127.0.0.1", port: int = 0, *,
                 panels: Panels | None = None, keepalive: float = 10.0,
                 settings: Settings | None = None, env=None,
                 client_timeout: float = 60.0, head_timeout: float = HEAD_TIMEOUT,
                 body_timeout: float = BODY_TIMEOUT, max_connections: int = MAX_CONNECTIONS,
                 max_pending: int | None = None) -> GatewayServer:
    """Build (not start) a gateway over one data folder; call ``serve_forever`` to run it.

    Who may call comes from ``settings``, else from ``env`` (a mapping), else from the process
    environment, read now: a bad setting, or a non-loopback ``host`` without an admin token,
    raises ConfigInvalid before anything is opened. The timeouts, ``max_connections`` and
    ``max_pending`` (default: as many as ``max_connections``) bound what connections may cost
    (see the module docstring); tests pass small ones."""
    settings = settings or Settings.from_env(env)
    settings.check_bind(host)
    home = data_dir if isinstance(data_dir, Home) else open_home(data_dir)
    schedule.settings(home)   # a broken schedule is refused before the panels open
    return GatewayServer(panels or panels_for(home, env), host, port, keepalive=keepalive,
                         settings=settings, client_timeout=client_timeout,
                         head_timeout=head_timeout, body_timeout=body_timeout,
                         max_connections=max_connections, max_pending=max_pending)


if __name__ == "__main__":
    from panelist.metrics.cli.main import Runtime, main
    from panelist.metrics.upstream.sim import SimUpstream
    sys.exit(main(["gateway", *sys.argv[1:]], Runtime(make_gateway=make_gateway,
                                                      simulator=SimUpstream)))
