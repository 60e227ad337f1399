"""The simulated provider's HTTP side: its threaded server and the handler that reads each
request the way a strict provider does and answers it as the model's script says
(``metrics.upstream.sim``), the answers' text from ``simanswers``, a stream's chunks from
``simstream``.

Invariants: a request head with more field lines than ``http.client`` allows is refused with
431, and a body that is not a JSON object with 400, as a provider would; a pending request
(latency or ``hang``) polls every ``POLL`` seconds for its client having gone, counted as a
disconnect, or for the server stopping; the server never waits for a hanging request to close.
"""

from __future__ import annotations

import http
import json
import math
import select
import socket
import socketserver
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from panelist.metrics.upstream import simstream
from panelist.metrics.upstream.simanswers import (
    _after_tools,
    _contents,
    _json_answer,
    _last_role,
    _reply,
    _ruled,
    _tool_calls,
    _tool_history_error,
    _unsupported,
    _wants_json,
    judged,
)

if TYPE_CHECKING:  # the simulator starts its server and hands it itself
    from panelist.metrics.upstream.sim import SimUpstream

POLL = 0.05  # how often a pending request looks for its client having gone, or a stop


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has bytes (or its client's end of input) within ``timeout`` seconds; by
    ``poll`` where there is one, since ``select`` refuses a descriptor past 1,024."""
    if hasattr(select, "poll"):
        waiting = select.poll()
        waiting.register(sock, select.POLLIN)
        return bool(waiting.poll(max(0, math.ceil(timeout * 1000))))
    return bool(select.select([sock], [], [], timeout)[0])


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for hanging requests
    request_queue_size = 128
    sim: SimUpstream

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall on a slow resolver
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]  # (host, port), with more for IPv6
        self.server_name, self.server_port = host, port

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client going away is no news
            super().handle_error(request, client_address)


class Server6(Server):
    address_family = socket.AF_INET6


class _Fields(dict):
    """A request's header fields under the names they were sent with (the first of a repeated
    one), read like ``email.message.Message``: ``get`` and ``[]`` ignore the name's case."""

    def __init__(self):
        super().__init__()
        self._lower: dict[str, str] = {}

    def add(self, name: str, value: str) -> None:
        if name.lower() not in self._lower:
            self._lower[name.lower()] = value
            self[name] = value

    def get(self, name: str, default=None):
        return self._lower.get(name.lower(), default)

    def __getitem__(self, name: str):
        return self._lower.get(name.lower())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.lower() in self._lower


_MAX_FIELDS = 100  # http.client's bound on a head's field lines


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "panelist-sim"
    disable_nagle_algorithm = True
    server: Server
    raw_requestline: bytes  # set by http.server's handle_one_request before parse_request
    _working: str | None = None  # the model of a request not yet answered

    def parse_request(self) -> bool:
        """http.server's, with the header fields read by hand: its ``email`` parser cost more
        CPU than the rest of a simulated answer, and the simulator stands in for an upstream
        that answers at once. Refuses what http.server refuses, with the same statuses."""
        self.command = ""  # none read yet (not HEAD, so an error has its body)
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3:
            if words:
                self.send_error(400, f"Bad request syntax ({self.requestline!r})")
            return False
        command, path, version = words
        major, dot, minor = version[5:].partition(".")
        if (
            not version.startswith("HTTP/")
            or not dot
            or not (major + minor).isdigit()
            or len(major) > 10
            or len(minor) > 10
        ):
            self.send_error(400, f"Bad request version ({version!r})")
            return False
        if int(major) >= 2:
            self.send_error(505, f"Invalid HTTP version ({version[5:]})")
            return False
        self.request_version = version
        self.close_connection = (int(major), int(minor)) < (1, 1)
        # http.server's guard against open redirects: '//x' is one absolute path, '/x'
        self.command, self.path = (
            command,
            ("/" + path.lstrip("/") if path.startswith("//") else path),
        )
        fields = _Fields()
        for _ in range(_MAX_FIELDS + 1):
            line = self.rfile.readline(65537)
            if len(line) > 65536:
                self.send_error(431, "Line too long")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = str(line, "iso-8859-1").partition(":")
            fields.add(name.strip(), value.strip())
        else:
            self.send_error(431, "Too many headers")
            return False
        self.headers = fields  # type: ignore[assignment]  # read only through get and []
        connection = fields.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        if (
            fields.get("Expect", "").lower() == "100-continue"
            and self.request_version >= "HTTP/1.1"
        ):
            return self.handle_expect_100()
        return True

    def setup(self) -> None:
        self.sim = self.server.sim
        # StreamRequestHandler.setup reads it from the instance: each simulator has its own
        self.timeout = self.sim.keepalive  # type: ignore[misc]  # a class attribute in typeshed
        super().setup()
        self.sim._connected(self.connection)

    def finish(self) -> None:
        self.sim._disconnected(self.connection)
        super().finish()

    def log_message(self, format, *args) -> None:
        pass  # quiet: a test run or a demo does not want a line per request

    # -- routes -----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            key = self.sim.listing_key
            if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                return self._error(
                    401,
                    "Incorrect API key provided. (simulated)",
                    "invalid_request_error",
                    "invalid_api_key",
                )
            self._json(200, self.sim._listing())
        else:
            self._error(
                404,
                f"no route GET {self.path} (simulated); try /v1/models",
                "invalid_request_error",
                "not_found",
            )

    def do_POST(self) -> None:
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        except ValueError:
            self.close_connection = True  # without a length the next request cannot be found
            return self._error(
                400, "Content-Length is not a number (simulated)", "invalid_request_error", None
            )
        if self.path not in ("/v1/chat/completions", "/chat/completions"):
            return self._error(
                404,
                f"no route POST {self.path} (simulated); try /v1/chat/completions",
                "invalid_request_error",
                "not_found",
            )
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._error(
                400, "the body is not a JSON object (simulated)", "invalid_request_error", None
            )
        model = body.get("model")
        behaviour, n, delay, seq = self.sim._arrive(model, body, dict(self.headers))
        # the name its behaviour was looked up by (a model that is no string, by its repr)
        name = self._working = model if isinstance(model, str) else repr(model)
        try:
            if behaviour is None:
                return self._error(
                    404,
                    f"The model `{model}` does not exist or you do not have "
                    "access to it. (simulated)",
                    "invalid_request_error",
                    "model_not_found",
                )
            self._chat(name, body, behaviour, n, delay, seq)
        finally:
            self._answered()

    def _answered(self) -> None:
        """The request's answer begins: it leaves ``running``, once."""
        working, self._working = self._working, None
        if working is not None:
            self.sim._answering(working)

    def _chat(self, model: str, body: dict, b: dict, n: int, delay: float, seq: int) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            messages = []
        refused = _tool_history_error(messages)
        if refused:
            return self._error(
                400, refused + " (simulated)", "invalid_request_error", None, param="messages"
            )
        texts, asked, images = _contents(messages)
        estimate = math.ceil(sum(map(len, texts)) / 4)
        fail = b.get("fail")
        if fail and b.get("fail_every") and n % b["fail_every"]:
            fail = None
        window = b.get("window")
        if fail is None and window and estimate > window:
            fail = "context_length"
        if fail == "hang":
            self._wait(None)
            return
        if b.get("hold_after") and n > b["hold_after"]:
            released = self.sim._release_event(model)
            self.sim._hold(model, 1)
            try:
                if not (
                    self._work(None, released)
                    if b.get("deaf")
                    else self._wait(None, until=released)
                ):
                    return
            finally:
                self.sim._hold(model, -1)
        if delay and not (self._work(delay) if b.get("deaf") else self._wait(delay)):
            return
        auth = self.headers.get("Authorization")
        if fail == "auth" or "require_key" in b and auth != f"Bearer {b['require_key']}":
            said = (
                f"Incorrect API key provided: {auth or '(none)'}."
                if b.get("echo_auth")
                else ("Incorrect API key provided.")
            )
            return self._error(
                401,
                b.get("message") or said + " (simulated)",
                "invalid_request_error",
                "invalid_api_key",
            )
        if images and not b.get("vision"):
            return self._error(
                400,
                f"{model} does not support image inputs (simulated); send text only",
                "invalid_request_error",
                "image_not_supported",
            )
        unsupported = _unsupported(model, body, b)
        if unsupported:
            return self._error(
                400,
                unsupported[1] + " (simulated)",
                "invalid_request_error",
                None,
                param=unsupported[0],
            )
        if b.get("close"):
            self.close_connection = True
        for key in b.get("refuse_params") or ():
            if key in body:
                return self._error(
                    400,
                    f"Unsupported parameter: '{key}' is not supported with this model. (simulated)",
                    "invalid_request_error",
                    "unsupported_parameter",
                    param=key,
                )
        message = b.get("message")
        if fail == "rate_limit":
            wait = b.get("retry_after", 30)
            return self._error(
                429,
                message
                or f"Rate limit reached for {model} (simulated). Please try again in {wait}s.",
                "requests",
                "rate_limit_exceeded",
                extra=(f"Retry-After: {wait}",),
            )
        if fail == "quota":
            return self._error(
                429,
                message
                or "You exceeded your current quota, please check "
                "your plan and billing details. (simulated)",
                "insufficient_quota",
                "insufficient_quota",
            )
        if fail == "not_found":
            return self._error(
                404,
                message or f"The model '{model}' does not exist (simulated).",
                "invalid_request_error",
                "model_not_found",
            )
        if fail == "gone":
            return self._error(
                410,
                message or f"The model '{model}' has been withdrawn (simulated).",
                "invalid_request_error",
                "model_withdrawn",
            )
        if fail == "server_error":
            return self._error(
                500,
                message or "The server had an error while processing your request. (simulated)",
                "server_error",
                None,
            )
        if fail == "context_length":
            return self._error(
                400,
                message
                or "This model's maximum context length is "
                f"{window or 4096} tokens. However, your messages resulted in "
                f"{estimate} tokens. Please reduce the length of the messages. "
                "(simulated)",
                "invalid_request_error",
                "context_length_exceeded",
                param="messages",
            )
        if fail == "error_body":
            return self._error(
                200,
                message or "The model is overloaded (simulated); please retry.",
                "server_error",
                None,
            )
        if fail == "garbage":
            return self._send(
                200,
                b"<html><body><h1>Bad Gateway</h1>simulated garbage, not JSON</body></html>",
                "text/html",
            )
        calls = [] if fail == "empty" else _tool_calls(b, body, messages, seq)
        ruled = _ruled(b, asked)
        verdict = judged(b["judge"], body, messages) if b.get("judge") is not None else None
        if fail == "empty":
            text = ""
        elif calls:
            text = b.get("answer") or ""
        elif verdict is not None:
            text = verdict
        elif _wants_json(body):
            text = _json_answer(b, body, n, asked)
        elif ruled is not None:
            text = ruled
        elif b.get("answers"):
            text = b["answers"][(n - 1) % len(b["answers"])]
        elif _last_role(messages) == "tool" and not b.get("answer"):
            text = _after_tools(model, messages)
        else:
            text = b.get("answer") or _reply(model, asked, images)
        if text and b.get("echo_auth_answer"):
            text += f" Called with Authorization: {auth or '(none)'}."
        answer: dict[str, Any] = {"role": "assistant", "content": (text or None) if calls else text}
        if calls:
            answer["tool_calls"] = calls
        completion = {
            "id": f"simcmpl-{seq:08x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "simulated",
            "choices": [
                {"index": 0, "message": answer, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": estimate,
                "completion_tokens": math.ceil(len(text) / 4),
                "total_tokens": estimate + math.ceil(len(text) / 4),
            },
        }
        if body.get("stream") is True:
            options = body.get("stream_options")
            usage = (
                isinstance(options, dict)
                and options.get("include_usage") is True
                and b.get("stream_usage", True)
            )
            return self._stream(simstream.events(completion, usage), b, model, fail == "reset")
        if fail == "reset":
            return self._reset(json.dumps(completion).encode())
        if b.get("drip"):
            return self._drip(json.dumps(completion).encode(), b["drip"])
        self._json(200, completion)

    # -- waiting ----------------------------------------------------------------------------------
    def _wait(self, seconds: float | None, until: threading.Event | None = None) -> bool:
        """Wait ``seconds`` (None: until the client goes, or ``until`` is set), watching the
        socket for its EOF.

        Returns False when the client went away (counted in ``disconnects``) or the server stops.
        """
        conn = self.connection
        end = None if seconds is None else time.monotonic() + seconds
        while not self.sim._stopping.is_set():
            if until is not None and until.is_set():
                return True
            left = POLL if end is None else min(end - time.monotonic(), POLL)
            if left <= 0:
                return True
            if _readable(conn, left):
                try:
                    peeked = conn.recv(1, socket.MSG_PEEK)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    peeked = b""
                if not peeked:
                    self.close_connection = True
                    if not self.sim._stopping.is_set():
                        self.sim._client_gone()
                    return False
                time.sleep(left)  # the client sent more already; wait without spinning on it
        self.close_connection = True
        return False

    def _work(self, seconds: float | None, until: threading.Event | None = None) -> bool:
        """Take ``seconds`` (None: until ``until`` is set) whatever the client does (a ``deaf``
        model); False if the server stops meanwhile."""
        end = None if seconds is None else time.monotonic() + seconds
        while not self.sim._stopping.is_set():
            if until is not None and until.is_set():
                return True
            left = POLL if end is None else min(end - time.monotonic(), POLL)
            if left <= 0:
                return True
            (until or self.sim._stopping).wait(left)
        self.close_connection = True
        return False

    # -- writing ----------------------------------------------------------------------------------
    def _error(
        self,
        status: int,
        message: str,
        kind: str,
        code: str | None,
        *,
        param: str | None = None,
        extra: tuple = (),
    ) -> None:
        self._json(
            status,
            {"error": {"message": message, "type": kind, "param": param, "code": code}},
            extra,
        )

    def _json(self, status: int, obj: dict, extra: tuple = ()) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", extra)

    def _send(self, status: int, payload: bytes, ctype: str, extra: tuple = ()) -> None:
        self.wfile.write(self._head(status, len(payload), ctype, extra) + payload)

    def _head(self, status: int, length: int, ctype: str, extra: tuple = ()) -> bytes:
        # one write per answer: building it by hand skips send_header's buffering and Date
        self._answered()
        lines = [
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
            f"Content-Type: {ctype}",
            f"Content-Length: {length}",
            *extra,
        ]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _drip(self, payload: bytes, seconds: float) -> None:
        self.wfile.write(self._head(200, len(payload), "application/json"))
        for i in range(len(payload)):
            if not self._wait(seconds):
                return
            self.wfile.write(payload[i : i + 1])

    def _stream(self, events: list[bytes], b: dict, model: str, reset: bool) -> None:
        """``events`` as a chunked event stream, ``drip`` seconds apart; with ``hold_stream``
        the events after the first piece wait for ``release(model)``; ``reset`` cuts the
        connection halfway."""
        lines = [
            "HTTP/1.1 200 OK",
            "Content-Type: text/event-stream",
            "Cache-Control: no-cache",
            "Transfer-Encoding: chunked",
        ] + (["Connection: close"] if self.close_connection else [])
        self._answered()
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        for i, data in enumerate(events):
            if reset and i == len(events) // 2:
                return self._reset(b"")
            if i and b.get("drip") and not self._wait(b["drip"]):
                return
            if i == 2 and b.get("hold_stream"):  # the role chunk and one piece are out
                self.sim._hold(model, 1)
                try:
                    if not self._wait(None, until=self.sim._release_event(model)):
                        return
                finally:
                    self.sim._hold(model, -1)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")

    def _reset(self, payload: bytes) -> None:
        """Send the head and half the body (no head: only reset a stream under way), then
        reset the connection (linger 0 sends RST)."""
        if payload:
            self.wfile.write(
                self._head(200, len(payload), "application/json") + payload[: len(payload) // 2]
            )
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()
