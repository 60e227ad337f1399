"""One connection's requests, as ``http.server`` reads them, with our rules on top: the head's
deadline and field rules (RFC 9112), routing through the server's table and the route's gate,
the one catch-all, JSON and server-sent-event replies.

Invariants: every request gets an answer (an error in the route's wire format, with the right
status) unless its client went away; anything unexpected is a 500 carrying a request id, with
the traceback on stderr (``fault``); a body is read only by ``read_json``, within the body
deadline and the server's size cap, and a reply to a request whose body was not read closes the
connection (the unread body would be taken for the next request).
"""

from __future__ import annotations

import gc
import io
import json
import re
import socket
import sys
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from panelist.metrics.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PanelistError,
    PayloadTooLarge,
    RequestTimeout,
    Unavailable,
)
from panelist.metrics.server.front.connection import (
    MAX_HEAD,
    MAX_HEADERS,
    MAX_LENGTH_DIGITS,
    MIN_BODY_RATE,
    Late,
    RequestHeaders,
    has_input,
    too_large,
)
from panelist.metrics.server.front.memory import SETTLE_WAIT
from panelist.metrics.server.guard import LOCAL
from panelist.metrics.server.routing import gate_of
from panelist.metrics.store import jsonwire
from panelist.metrics.wire.errors import body_of, refusal, shaped, status_of

_VERSION = re.compile(r"HTTP/([0-9]{1,10})\.([0-9]{1,10})")
_FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a token (RFC 9110 §5.1)
# two of these make a request ambiguous: which host, where the body ends (RFC 9112 §3.2, §6.3)
_ONCE = frozenset({"host", "content-length", "transfer-encoding"})
_DATE = [(0, "")]  # (second, its Date header): shared by every handler thread

if TYPE_CHECKING:  # the server imports this module
    from panelist.metrics.server.front.base import Server


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "panelist"
    sys_version = ""
    server: "Server"

    def version_string(self) -> str:
        # http.server joins the two with a space, which an empty sys_version leaves trailing
        return self.server_version

    def setup(self):
        # StreamRequestHandler's, with the connection's Wire as both files
        self.connection = self.request
        self.connection.settimeout(self.server.client_timeout)
        # headers and body leave in separate writes; with Nagle on, the body waits ~40 ms for
        # the client's delayed ACK on every reply
        if self.connection.family != socket.AF_UNIX:  # a route called in process has no TCP
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.wire = self.server.wire_of(self.request)
        self.rfile = io.BufferedReader(self.wire)
        self.wfile = self.wire
        self._expect_continue = False
        # bytes taken from rfile over the connection's life: beside what the wire handed it,
        # they say how much of a body the reader already holds
        self._consumed = 0

    def log_message(self, format, *args):  # noqa: A002 - the call log is the record of use
        pass

    def handle(self):
        self.close_connection = True
        self.handle_one_request()
        while (
            not self.close_connection and not self.wire.reserve and not self.server.draining
        ):  # the reserve: one request; a drain: this one
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
            self._consumed += len(self.raw_requestline)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return  # refused, and answered
            if not self.server.begin_work(self.wire):
                raise Late("taken back as the head completed")
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            method()
        except Late:
            self.close_connection = True
            if self.raw_requestline or self.wire.got:  # a request began: say why it ends here
                why = (
                    f"the request head did not arrive within {self.server.head_timeout:g} s"
                    if not self.wire.dropped
                    else "the server needed this connection for "
                    "another client while the request head was still arriving"
                )
                try:
                    self.send_error(408, f"{why}; send the request line and headers at once")
                except OSError:
                    pass
        except TimeoutError:  # silent for client_timeout, or not reading: most likely gone
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
        self.command = None  # set in case of error on the first line
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
        if version < (1, 0):  # HTTP/0.9 replies have no status line
            self.send_error(505, "HTTP/0.9 is not served; send HTTP/1.1")
            return False
        self.close_connection = version < (1, 1)
        self.command, self.path = words[0], words[1]
        if self.path.startswith("//"):  # gh-87389: never an open redirect to another host
            self.path = "/" + self.path.lstrip("/")

        fields: dict[str, str] = {}
        name = None
        readline = self.rfile.readline
        room = MAX_HEAD - len(self.raw_requestline)
        for _ in range(MAX_HEADERS + 1):
            raw = readline(65537)  # a late head ends in handle_one_request
            self._consumed += len(raw)
            if len(raw) > 65536:
                self.send_error(431, "Line too long")
                return False
            room -= len(raw)
            if room < 0:
                self.send_error(
                    431,
                    f"the request head is over {MAX_HEAD // 1024} KB; send "
                    "fewer or shorter header fields",
                )
                return False
            if raw == b"\r\n" or raw == b"\n" or not raw:
                break
            text = raw.decode("iso-8859-1").removesuffix("\n").removesuffix("\r")
            if "\r" in text or "\0" in text:  # RFC 9110 §5.5: never passed on as a value
                self.send_error(400, "a header line holds a CR or NUL; remove it")
                return False
            if text and text[0] in " \t":  # obs-fold (RFC 9112 §5.2): joined to the last by SP
                if name is None:
                    self.send_error(400, "a header section may not start with whitespace")
                    return False
                value = text.strip(" \t")
                if name and value:
                    fields[name] = f"{fields[name]} {value}" if fields[name] else value
                continue
            field, _, value = text.partition(":")
            if not _FIELD_NAME.fullmatch(field):
                self.send_error(
                    400,
                    "a header line is not 'name: value'; send each field as "
                    "Name: value on its own line",
                )
                return False
            value = value.strip(" \t")
            name = field.lower()
            if name not in fields:  # a repeated field: the first wins, as with email.message
                fields[name] = value
            elif name in _ONCE:
                self.send_error(400, f"the {field} header is repeated; send it once")
                return False
            else:
                name = ""  # a continuation of an ignored repeat is ignored with it
        else:
            self.send_error(431, "Too many headers")
            return False
        length = fields.get("content-length")
        if length is not None:
            if "transfer-encoding" in fields:  # RFC 9112 §6.1: never guess which one frames it
                self.send_error(
                    400,
                    "Content-Length and Transfer-Encoding were both sent; send "
                    "the body with Content-Length only",
                )
                return False
            # RFC 9112 §6.3 wants 1*DIGIT; int() would also take '7_0', '+70' or '٧٠'
            if not (length.isascii() and length.isdigit()) or len(length) > MAX_LENGTH_DIGITS:
                self.send_error(
                    400,
                    "Content-Length must be the body's size in bytes, written "
                    f"with the digits 0-9 only (at most {MAX_LENGTH_DIGITS})",
                )
                return False
        self.headers = RequestHeaders(fields)

        tokens = [t.strip() for t in fields.get("connection", "").lower().split(",")]
        if "close" in tokens:
            self.close_connection = True
        elif "keep-alive" in tokens:
            self.close_connection = False
        # answered in read_json, once every check passed and the body is really wanted
        self._expect_continue = (
            version >= (1, 1) and fields.get("expect", "").lower() == "100-continue"
        )
        return True

    def send_error(self, code, message=None, explain=None):
        # http.server's own refusals (a bad request line, oversized headers, an unknown method)
        # in OpenAI's error shape like every other reply, instead of its HTML page
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # a garbled line: still answer with a status line
            self.request_version = "HTTP/1.0"
        # once the request line is read, its path says which shape to answer in
        data = jsonwire.encode(
            shaped(
                self.path if self.command else "",
                code,
                refusal(message or f"the request could not be read ({code})"),
            )
        )
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
        self._pause = 0.0  # the route's refusal_pause, once the route is known
        self._after: list = []  # after_reply's work
        self._cors: dict = {}
        self.caller = LOCAL
        self._granted = 0  # bytes of the server's in-flight budget this request holds
        self._settled = 0  # of them, marked settling: the reply is written (``InFlight``)
        self._body_cap = self.server.max_body
        guard = self.server.guard
        # a body nobody reads would be taken for the next request: such a reply closes instead
        self._unread_body = guard.has_body(self.headers)
        try:
            path = urlsplit(self.path).path.rstrip("/") or "/"
            self._cors = guard.screen(method, path, self.headers)  # 403: foreign host / origin
            if method == "OPTIONS":
                allow = guard.preflight(path, self.headers)
                if allow is not None:
                    self.send_preflight(allow)
                    return
            route, params = self.server.routes.match(path)
            self._pause = route.refusal_pause if route is not None else 0.0
            # every route passes its gate; a path no route serves passes the gate its prefix
            # would have, so a 404 never tells a caller without a key what exists
            self.server.admit_caller(self, route.gate if route else gate_of(path), path)
            if route is None:
                raise NotFound(f"no route {method} {path}; {self.server.routes_help}")
            action = route.actions.get(method)
            if action is None:
                allowed = ", ".join(sorted(route.actions))
                raise MethodNotAllowed(
                    f"{method} is not allowed on {path}; use {allowed}", headers={"Allow": allowed}
                )
            if route.max_body is not None:
                self._body_cap = min(route.max_body, self._body_cap)
            guard.check_body(method, self.headers, self._body_cap)  # 415 / 413
            action(self, params)
        except PanelistError as exc:
            self._fail(status_of(exc), body_of(exc), exc.headers)
        except (ConnectionError, TimeoutError):
            self.close_connection = True  # the client went away or stopped reading: no one to tell
        except Exception:
            self._fail(500, fault(f"{method} {self.path}", "internal error"), {})
        finally:
            if self._granted:
                # a panel's run and its seats refer to each other (hooks, evidence), so the
                # body's copies they hold die only at a collection: made now, before the grant
                # goes back, so the budget bounds what is really held
                gc.collect()
                self.server.in_flight.give(self._granted, settled=self._settled)
                self._granted = self._settled = 0
            while self._after:
                self._after.pop(0)()

    def after_reply(self, fn) -> None:
        """Run ``fn()`` once this request is answered and its share of the memory budget is
        back: work its caller need not wait for. ``fn`` handles its own errors."""
        self._after.append(fn)

    def _fail(self, status: int, body: dict, headers: dict) -> None:
        if self._sent:  # the reply already started: nothing more can be said on this connection
            self.close_connection = True
            return
        later = self._pause > 0 and 400 <= status < 500
        try:
            self.send_json(status, shaped(self.path, status, body), headers, later=later)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def send_json(
        self, status: int, payload: dict, headers: dict | None = None, *, later: bool = False
    ) -> None:
        """``later``: the reply is handed whole to the server, which sends it after the
        route's ``refusal_pause`` and then closes the connection (``Server.answer_later``)."""
        self.send_bytes(status, jsonwire.encode(payload), "application/json", headers, later=later)

    def send_bytes(
        self,
        status: int,
        data: bytes,
        content_type: str,
        headers: dict | None = None,
        *,
        later: bool = False,
    ) -> None:
        """One whole reply of ``data`` as ``content_type`` (``send_json``'s ``later``)."""
        self._sent = True
        # the head is made in one piece (send_header's per-line buffering costs more than the
        # rest of a small reply's head): the same lines send_response and send_header write
        phrase = self.responses[status][0] if status in self.responses else ""
        head = [
            f"{self.protocol_version} {status} {phrase}\r\nServer: {self.version_string()}"
            f"\r\nDate: {self.date_time_string()}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(data)}\r\n"
        ]
        for k, v in (headers or {}).items():
            head.append(f"{k}: {v}\r\n")
            if k.lower() == "connection":
                self.close_connection = v.lower() == "close" or (
                    self.close_connection and v.lower() != "keep-alive"
                )
        for k, v in self.server.common_headers.items():
            head.append(f"{k}: {v}\r\n")
        for k, v in self._cors.items():
            head.append(f"{k}: {v}\r\n")
        if self.server.draining or (later or self._unread_body or self.wire.reserve):
            head.append("Connection: close\r\n")  # the reserve answers one request each
            self.close_connection = True
        # the blank line and the body go out with the head in one write: one segment for a
        # small reply, so the caller wakes once
        head.append("\r\n")
        reply = "".join(head).encode("latin-1")
        if self.command != "HEAD":
            reply += data
        if self._granted > self._settled:  # answered: a request waiting for room may count it
            self.server.in_flight.settle(self._granted - self._settled)
            self._settled = self._granted
        if later and self.server.answer_later(self.connection, reply, self._pause):
            return
        self.wfile.write(reply)

    def date_time_string(self, timestamp=None):
        """The Date header, formatted once a second rather than once a reply."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        now = int(time.time())
        cached = _DATE[0]
        if cached[0] != now:
            cached = _DATE[0] = (now, super().date_time_string(now))
        return cached[1]

    def send_common(self) -> None:
        """The headers every reply of this server carries (a dashboard's CSP), and CORS; while
        the server drains, that this reply is the connection's last."""
        for k, v in self.server.common_headers.items():
            self.send_header(k, v)
        for k, v in self._cors.items():
            self.send_header(k, v)
        if self.server.draining:
            self.send_header("Connection", "close")
            self.close_connection = True

    def read_json(self):
        """The body, parsed by ``jsonwire`` (lone surrogates made U+FFFD, nesting bounded), read
        only now that the route's gate passed, within the route's size cap, the body deadline
        and a grant of the server's in-flight budget. A caller that sent ``Expect:
        100-continue`` hears ``100 Continue`` here, after every check passed, and never when
        the request is refused first."""
        length = self.headers.get("Content-Length")  # ASCII digits only: parse_request saw to it
        self._unread_body = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise BadRequest("chunked request bodies are not accepted; send Content-Length")
        if length is None:
            raise BadRequest("a JSON body with Content-Length is required")
        size = int(length)
        if size > self._body_cap:
            raise PayloadTooLarge(too_large(size, self._body_cap))
        budget = self.server.in_flight
        cost = budget.cost(size)
        if not budget.take(cost, wait=SETTLE_WAIT):
            raise Unavailable(budget.refusal(), headers={"Retry-After": "1"})
        self._granted += cost
        if self._expect_continue and size:
            self._expect_continue = False
            self.send_response_only(100)
            self.end_headers()
        grace = self.server.body_timeout
        held = self.wire.delivered - self._consumed  # read ahead with the head
        self.server.begin_body(self.wire, grace, max(0, size - held))
        try:
            raw = self.rfile.read(size)
            self._consumed += len(raw)
        except Late:
            if self.wire.dropped:
                raise RequestTimeout(
                    "the server needed this connection for another client while "
                    "the body was still arriving; send the whole body at once"
                ) from None
            raise RequestTimeout(
                f"the body did not arrive in time (allowed: {grace:g} s plus "
                f"1 s per {MIN_BODY_RATE // 1024} KB); send the whole body at "
                "once"
            ) from None
        except TimeoutError:
            raise RequestTimeout(
                f"the body stopped arriving for {self.server.client_timeout:g} s "
                "before Content-Length bytes; send the whole body at once"
            ) from None
        finally:
            self.server.end_body(self.wire)
        self._unread_body = len(raw) < size
        if self._unread_body:
            raise BadRequest("the body ended before Content-Length bytes arrived")
        if self.wire.dropped:  # read whole, but its connection was given away: the reply closes
            self.close_connection = True
        found = json.detect_encoding(raw) if raw else "utf-8"
        if found not in ("utf-8", "utf-8-sig"):
            raise BadRequest(
                "the body must be UTF-8 JSON (it looks like UTF-16 or UTF-32); "
                "send it encoded as UTF-8"
            )
        try:
            # the bytes go before the parse: a large body is held twice at most, not three times
            text = raw.decode(found)
            del raw
            return jsonwire.loads(text, strict=True)
        except UnicodeDecodeError:
            raise BadRequest("the body must be UTF-8 JSON") from None
        except jsonwire.JSONRefused as exc:
            if str(exc).startswith("the JSON nests"):
                raise BadRequest(
                    f"{exc}; send a flatter body (a chat request needs about six levels)"
                ) from None
            raise BadRequest(f"the body is not valid JSON: {exc}") from None

    def send_cached(self, data: bytes, kind: str, etag: str) -> None:
        """A file the client may keep: 304 when its ``If-None-Match`` names ``etag``."""
        self._sent = True
        fresh = self.headers.get("If-None-Match") == etag
        self.send_response(304 if fresh else 200)
        self.send_header("ETag", etag)
        self.send_header("Cache-Control", "no-cache")  # revalidated on every use: never stale
        if not fresh:
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
        self.send_common()
        self.end_headers()
        if not fresh and self.command != "HEAD":
            self.wfile.write(data)

    def client_alive(self) -> bool:
        """False once the caller has closed its end (a readable socket with nothing to read)."""
        try:
            return not has_input(self.connection) or self.connection.recv(1, socket.MSG_PEEK) != b""
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
    def start_events(
        self, headers: dict | None = None, content_type: str = "text/event-stream; charset=utf-8"
    ) -> None:
        self._sent = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
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
    return {
        "error": {
            "message": f"{what}; report request id {rid}",
            "type": "server_error",
            "param": None,
            "code": rid,
        }
    }
