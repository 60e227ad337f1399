"""A simulated OpenAI-compatible provider, for tests and the gateway's ``--demo`` mode.

It is honest about being a simulation: the demo models are named ``sim-…``, every default answer
starts with ``[simulated <model id>]`` and every completion id with ``simcmpl-``. No language
model is consulted; answers are deterministic, and so is jitter (a seeded generator).

Each model follows a scripted behaviour (see ``BEHAVIOUR``) that can be replaced while the server
runs. Whatever the behaviour, a history whose tool messages do not answer the tool calls of the
assistant message before them is refused with a 400, as OpenAI's API does. Invariants: every chat request is recorded in ``requests`` before it is answered; a client
that goes away while its request is pending (latency or ``hang``) is noticed and counted in
``disconnects``; ``stop()`` returns promptly even while requests hang, and closes every
connection it holds.

Run it on its own::

    python scripts/sim_upstream.py [--host H] [--port P] [--models FILE.json]

The first line printed on stdout is the base URL (``http://127.0.0.1:PORT/v1``); it serves until
SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import copy
import http
import itertools
import json
import math
import random
import select
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DEMO_MODELS: dict[str, dict] = {
    "sim-swift": {"latency": 0.05, "window": 32_000},
    "sim-steady": {"latency": 0.3, "window": 128_000},
    "sim-careful": {"latency": 0.8, "jitter": 0.2, "window": 200_000},
    "sim-flaky": {"latency": 0.1, "fail": "server_error", "fail_every": 3, "window": 64_000},
    "sim-vision": {"latency": 0.2, "vision": True, "window": 128_000},
}

FAILS = frozenset({"rate_limit", "quota", "server_error", "context_length", "empty", "hang", "auth",
                   "garbage", "error_body", "reset", "not_found", "gone"})

BEHAVIOUR = {
    "latency": "seconds before answering (default 0)",
    "jitter": "seconds, uniform ± around latency, from a seeded generator",
    "answer": "the answer's text (default: '[simulated <model>] ' and a reply quoting the prompt)",
    "fail": "None or one of: " + ", ".join(sorted(FAILS)),
    "fail_every": "fail only on every Nth call to the model, answer normally otherwise",
    "window": "context window in tokens (chars/4): refuse longer prompts; states it in errors",
    "retry_after": "the Retry-After a rate_limit sends: seconds, or a string sent as it is (30)",
    "message": "replaces the error message of a failure",
    "require_key": "401 unless 'Authorization: Bearer <this>' is sent",
    "echo_auth": "a 401 repeats the Authorization header it received (to test scrubbing)",
    "echo_auth_answer": "a normal answer ends with the Authorization header it received "
                        "(to test scrubbing)",
    "vision": "accept image parts; a model without it refuses them with a 400",
    "price": "[in, out] in USD per million tokens: listed by GET /models as per-token "
             "'pricing' (as aggregators list it); the calls themselves are not billed",
    "close": "answer with 'Connection: close' and close the connection",
    "drip": "seconds between the answer's bytes: a server that sends slowly but never stops",
    "tool_calls": "calls to make when the request offers tools and its last message is not a "
                  "tool result: a list of {'name', 'arguments'}; a call whose tool is not "
                  "offered is left out. After tool results the model answers with text quoting "
                  "them",
    "json": "the answer when the request asks for JSON (response_format): an object, sent as "
            "JSON, or a string sent as it is (to script invalid JSON), or a list of those "
            "given in turn, one per call (cycling). Without it, a json_schema request gets an "
            "object made from the schema's required keys (local $refs followed)",
    "answers": "a list of answers given in turn, one per call (cycling); overrides 'answer'",
    "hold_after": "calls after the Nth to the model wait until the test calls release(model) "
                  "(or the client goes), then are answered as usual",
    "rules": "a list of {'contains': text, 'answer': text}: the first rule whose text occurs in "
             "the last user message gives the answer (before 'answers' and 'answer'); a request "
             "no rule matches is answered as without rules. A rule {'contains': text, 'json': "
             "value} answers a request that asks for JSON instead (before 'json'): an object "
             "sent as JSON, or a string sent as it is",
}

_POLL = 0.05   # how often a pending request looks for its client having gone, or a stop


class SimUpstream:
    """A simulated provider on its own port; ``start()`` it, or use it as a context manager."""

    def __init__(self, models: dict[str, dict] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, keepalive: float | None = None, seed: int = 0,
                 keep_requests: int | None = None, listing_key: str | None = None):
        """``keepalive``: seconds an idle connection stays open (default: until the client closes
        it). ``keep_requests``: keep only about that many recent records in ``requests``, for a
        long-running demo (default: keep all). ``listing_key``: ``GET /models`` answers 401
        unless 'Authorization: Bearer <this>' is sent, as a provider refuses a wrong key
        (default: it lists for anyone)."""
        self.host, self.port = host, port
        self.listing_key = listing_key
        self.keepalive = keepalive
        self.keep_requests = keep_requests
        self.url = ""
        self.requests: list[dict] = []
        self.connections = 0
        self.disconnects = 0
        self._lock = threading.Lock()
        self._gone = threading.Condition(threading.Lock())
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)
        self._models: dict[str, dict] = {}
        self._counts: dict[str, int] = {}
        self._open: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._released: dict[str, threading.Event] = {}
        self._holding = threading.Condition(threading.Lock())
        self.held: dict[str, int] = {}   # requests each model holds right now (hold_after)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        for name, behaviour in (DEMO_MODELS if models is None else models).items():
            self.script(name, **behaviour)

    # -- control ----------------------------------------------------------------------------------
    def start(self) -> "SimUpstream":
        if self._server is not None:
            return self
        self._stopping.clear()
        server_class = _Server6 if ":" in self.host else _Server
        self._server = server_class((self.host, self.port), _Handler)
        self._server.sim = self
        self.port = self._server.server_address[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(_POLL,),
                                        name="sim-upstream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()   # first, so pending requests do not count the stop as a disconnect
        server.shutdown()
        server.server_close()
        with self._lock:
            for conn in self._open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)   # wakes handlers waiting for a next request
                except OSError:
                    pass
        self._thread.join(timeout=2)

    def __enter__(self) -> "SimUpstream":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def script(self, model: str, **behaviour) -> None:
        """Add a model, or replace its whole behaviour; safe while requests are being served."""
        unknown = set(behaviour) - set(BEHAVIOUR)
        if unknown:
            raise ValueError(f"unknown behaviour {sorted(unknown)} for {model!r}; use any of: "
                             + ", ".join(BEHAVIOUR))
        fail = behaviour.get("fail")
        if fail is not None and fail not in FAILS:
            raise ValueError(f"unknown fail {fail!r} for {model!r}; use None or one of: "
                             + ", ".join(sorted(FAILS)))
        for key in ("latency", "jitter", "drip"):
            if not isinstance(behaviour.get(key, 0), (int, float)) or behaviour.get(key, 0) < 0:
                raise ValueError(f"{key} for {model!r} must be a number of seconds >= 0")
        price = behaviour.get("price")
        if price is not None and not (
                isinstance(price, (list, tuple)) and len(price) == 2
                and all(type(x) in (int, float) and x >= 0 for x in price)):
            raise ValueError(f"price for {model!r} must be [in, out], numbers >= 0")
        for key in ("fail_every", "window", "hold_after"):
            value = behaviour.get(key)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{key} for {model!r} must be a whole number >= 1")
        rules = behaviour.get("rules", [])
        if not isinstance(rules, list) or not all(
                isinstance(r, dict) and isinstance(r.get("contains"), str) and r["contains"]
                and (set(r) == {"contains", "answer"} and isinstance(r["answer"], str)
                     or set(r) == {"contains", "json"} and isinstance(r["json"], (dict, str)))
                for r in rules):
            raise ValueError(f"rules for {model!r} must be a list of "
                             "{'contains': non-empty text, 'answer': text} or "
                             "{'contains': non-empty text, 'json': object or text}")
        with self._lock:
            self._models[model] = copy.deepcopy(behaviour)

    def release(self, model: str) -> None:
        """Answer the requests ``model`` holds (``hold_after``), and every later one."""
        self._release_event(model).set()

    def _release_event(self, model: str) -> threading.Event:
        with self._lock:
            return self._released.setdefault(model, threading.Event())

    def wait_held(self, model: str, n: int, timeout: float) -> bool:
        """Wait until ``model`` holds at least ``n`` requests at once; False on timeout."""
        with self._holding:
            return self._holding.wait_for(lambda: self.held.get(model, 0) >= n, timeout)

    def _hold(self, model: str, delta: int) -> None:
        with self._holding:
            self.held[model] = self.held.get(model, 0) + delta
            self._holding.notify_all()

    def count(self, model: str) -> int:
        """How many chat requests named ``model`` arrived (answered or not)."""
        with self._lock:
            return self._counts.get(model, 0)

    def wait_disconnects(self, n: int, timeout: float) -> bool:
        """Wait until at least ``n`` clients went away with a request pending; False on timeout."""
        with self._gone:
            return self._gone.wait_for(lambda: self.disconnects >= n, timeout)

    # -- called by the handler --------------------------------------------------------------------
    def _arrive(self, model, body: dict, headers: dict) -> tuple[dict | None, int, float, int]:
        """Record a request; its model's behaviour, its call number, its delay and its id."""
        record = {"model": model, "body": body, "headers": headers, "ts": time.time()}
        with self._lock:
            self.requests.append(record)
            if self.keep_requests and len(self.requests) > 2 * self.keep_requests:
                del self.requests[:-self.keep_requests]
            key = model if isinstance(model, str) else repr(model)
            n = self._counts[key] = self._counts.get(key, 0) + 1
            behaviour = self._models.get(key)
            delay = 0.0
            if behaviour is not None:
                delay = behaviour.get("latency", 0)
                if behaviour.get("jitter"):
                    delay = max(0.0, delay + self._rng.uniform(-1, 1) * behaviour["jitter"])
            return behaviour, n, delay, next(self._ids)

    def _connected(self, conn: socket.socket) -> None:
        with self._lock:
            self.connections += 1
            self._open.add(conn)

    def _disconnected(self, conn: socket.socket) -> None:
        # under the lock, so stop() never shuts down a socket that is being closed
        with self._lock:
            self._open.discard(conn)

    def _client_gone(self) -> None:
        with self._gone:
            self.disconnects += 1
            self._gone.notify_all()

    def _listing(self) -> dict:
        with self._lock:
            models = copy.deepcopy(self._models)
        return {"object": "list", "data": [_listed(name, b) for name, b in models.items()]}


def _listed(name: str, b: dict) -> dict:
    """One model's entry in ``GET /models``: what the behaviour scripts, in the fields many
    providers use (``context_length``, per-token ``pricing``, input modalities)."""
    entry = {"id": name, "object": "model", "created": 0, "owned_by": "panelist-simulation"}
    if b.get("window"):
        entry["context_length"] = b["window"]
    if b.get("price") is not None:
        entry["pricing"] = {"prompt": f"{b['price'][0] / 1e6:.12g}",
                            "completion": f"{b['price'][1] / 1e6:.12g}"}
    if b.get("vision") is not None:
        entry["architecture"] = {"input_modalities": ["text", "image"] if b["vision"]
                                 else ["text"]}
    return entry


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False    # stop() must not wait for hanging requests
    request_queue_size = 128
    sim: SimUpstream

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall on a slow resolver
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):   # a client going away is no news
            super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "panelist-sim"
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        self.sim = self.server.sim
        self.timeout = self.sim.keepalive
        super().setup()
        self.sim._connected(self.connection)

    def finish(self) -> None:
        self.sim._disconnected(self.connection)
        super().finish()

    def log_message(self, format, *args) -> None:
        pass   # quiet: a test run or a demo does not want a line per request

    # -- routes -----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            key = self.sim.listing_key
            if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                return self._error(401, "Incorrect API key provided. (simulated)",
                                   "invalid_request_error", "invalid_api_key")
            self._json(200, self.sim._listing())
        else:
            self._error(404, f"no route GET {self.path} (simulated); try /v1/models",
                        "invalid_request_error", "not_found")

    def do_POST(self) -> None:
        try:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        except ValueError:
            self.close_connection = True   # without a length the next request cannot be found
            return self._error(400, "Content-Length is not a number (simulated)",
                               "invalid_request_error", None)
        if self.path not in ("/v1/chat/completions", "/chat/completions"):
            return self._error(404, f"no route POST {self.path} (simulated); try "
                               "/v1/chat/completions", "invalid_request_error", "not_found")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._error(400, "the body is not a JSON object (simulated)",
                               "invalid_request_error", None)
        model = body.get("model")
        behaviour, n, delay, seq = self.sim._arrive(model, body, dict(self.headers))
        if behaviour is None:
            return self._error(404, f"The model `{model}` does not exist or you do not have access "
                               "to it. (simulated)", "invalid_request_error", "model_not_found")
        self._chat(model, body, behaviour, n, delay, seq)

    def _chat(self, model: str, body: dict, b: dict, n: int, delay: float, seq: int) -> None:
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        refused = _tool_history_error(messages)
        if refused:
            return self._error(400, refused + " (simulated)", "invalid_request_error", None,
                               param="messages")
        texts, asked, images = _contents(messages)
        estimate = math.ceil(sum(map(len, texts)) / 4)
        fail = b.get("fail")
        if fail and b.get("fail_every") and n % b["fail_every"]:
            fail = None
        window = b.get("window")
        if fail is None and window and estimate > window:
            fail = "context_length"
        if fail == "hang":
            return self._wait(None)
        if b.get("hold_after") and n > b["hold_after"]:
            released = self.sim._release_event(model)
            self.sim._hold(model, 1)
            try:
                if not self._wait(None, until=released):
                    return
            finally:
                self.sim._hold(model, -1)
        if delay and not self._wait(delay):
            return
        auth = self.headers.get("Authorization")
        if fail == "auth" or "require_key" in b and auth != f"Bearer {b['require_key']}":
            said = f"Incorrect API key provided: {auth or '(none)'}." if b.get("echo_auth") else (
                "Incorrect API key provided.")
            return self._error(401, b.get("message") or said + " (simulated)",
                               "invalid_request_error", "invalid_api_key")
        if images and not b.get("vision"):
            return self._error(400, f"{model} does not support image inputs (simulated); send "
                               "text only", "invalid_request_error", "image_not_supported")
        if b.get("close"):
            self.close_connection = True
        message = b.get("message")
        if fail == "rate_limit":
            wait = b.get("retry_after", 30)
            return self._error(429, message or f"Rate limit reached for {model} (simulated). "
                               f"Please try again in {wait}s.", "requests", "rate_limit_exceeded",
                               extra=(f"Retry-After: {wait}",))
        if fail == "quota":
            return self._error(429, message or "You exceeded your current quota, please check "
                               "your plan and billing details. (simulated)", "insufficient_quota",
                               "insufficient_quota")
        if fail == "not_found":
            return self._error(404, message or f"The model '{model}' does not exist (simulated).",
                               "invalid_request_error", "model_not_found")
        if fail == "gone":
            return self._error(410, message or f"The model '{model}' has been withdrawn "
                               "(simulated).", "invalid_request_error", "model_withdrawn")
        if fail == "server_error":
            return self._error(500, message or "The server had an error while processing your "
                               "request. (simulated)", "server_error", None)
        if fail == "context_length":
            return self._error(400, message or "This model's maximum context length is "
                               f"{window or 4096} tokens. However, your messages resulted in "
                               f"{estimate} tokens. Please reduce the length of the messages. "
                               "(simulated)", "invalid_request_error", "context_length_exceeded",
                               param="messages")
        if fail == "error_body":
            return self._error(200, message or "The model is overloaded (simulated); please "
                               "retry.", "server_error", None)
        if fail == "garbage":
            return self._send(200, b"<html><body><h1>Bad Gateway</h1>simulated garbage, not "
                              b"JSON</body></html>", "text/html")
        calls = [] if fail == "empty" else _tool_calls(b, body, messages, seq)
        ruled = _ruled(b, asked)
        if fail == "empty":
            text = ""
        elif calls:
            text = b.get("answer") or ""
        elif _wants_json(body):
            text = _ruled(b, asked, "json")
            text = _json_answer(b, body, n) if text is None else \
                text if isinstance(text, str) else json.dumps(text)
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
        said = {"role": "assistant", "content": (text or None) if calls else text}
        if calls:
            said["tool_calls"] = calls
        completion = {
            "id": f"simcmpl-{seq:08x}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": "simulated",
            "choices": [{"index": 0, "message": said,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": estimate, "completion_tokens": math.ceil(len(text) / 4),
                      "total_tokens": estimate + math.ceil(len(text) / 4)}}
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
            left = _POLL if end is None else min(end - time.monotonic(), _POLL)
            if left <= 0:
                return True
            if select.select([conn], [], [], left)[0]:
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
                time.sleep(left)   # the client sent more already; wait without spinning on it
        self.close_connection = True
        return False

    # -- writing ----------------------------------------------------------------------------------
    def _error(self, status: int, message: str, kind: str, code: str | None, *,
               param: str | None = None, extra: tuple = ()) -> None:
        self._json(status, {"error": {"message": message, "type": kind, "param": param,
                                      "code": code}}, extra)

    def _json(self, status: int, obj: dict, extra: tuple = ()) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json", extra)

    def _send(self, status: int, payload: bytes, ctype: str, extra: tuple = ()) -> None:
        self.wfile.write(self._head(status, len(payload), ctype, extra) + payload)

    def _head(self, status: int, length: int, ctype: str, extra: tuple = ()) -> bytes:
        # one write per answer: building it by hand skips send_header's buffering and Date
        lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}", f"Content-Type: {ctype}",
                 f"Content-Length: {length}", *extra]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _drip(self, payload: bytes, seconds: float) -> None:
        self.wfile.write(self._head(200, len(payload), "application/json"))
        for i in range(len(payload)):
            if not self._wait(seconds):
                return
            self.wfile.write(payload[i:i + 1])

    def _reset(self, payload: bytes) -> None:
        """Send the head and half the body, then reset the connection (linger 0 sends RST)."""
        self.wfile.write(self._head(200, len(payload), "application/json") +
                         payload[:len(payload) // 2])
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()


def _contents(messages: list) -> tuple[list[str], str, int]:
    """The text of every message, the last user message's text, and how many images they hold."""
    texts, last, images = [], "", 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        mine = []
        if isinstance(content, str):
            mine.append(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") in ("image_url", "input_image", "image"):
                    images += 1
                elif isinstance(part.get("text"), str):
                    mine.append(part["text"])
        texts += mine
        if message.get("role") == "user":
            last = " ".join(mine)
    return texts, last, images


def _tool_history_error(messages: list) -> str | None:
    """Why a history breaks the tool-call rule OpenAI's API enforces, or None: each ``tool``
    message answers a call of the assistant message just before the tool messages, and every
    call of an assistant message is answered before the conversation goes on."""
    unanswered: list = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            tid = message.get("tool_call_id")
            if tid not in unanswered:
                return (f"messages[{i}]: a message with role 'tool' must answer a tool call of "
                        f"the assistant message before it; tool_call_id {tid!r} was not issued "
                        "there or was answered already")
            unanswered.remove(tid)
            continue
        if unanswered:
            return (f"messages[{i}]: an assistant message with 'tool_calls' must be followed by "
                    f"tool messages answering each tool_call_id; not answered: "
                    f"{', '.join(map(str, unanswered))}")
        calls = message.get("tool_calls") if role == "assistant" else None
        unanswered = [c.get("id") for c in calls if isinstance(c, dict)] \
            if isinstance(calls, list) else []
    if unanswered:
        return ("the last message calls tools: send the tool messages answering "
                f"{', '.join(map(str, unanswered))} before asking again")
def _ruled(b: dict, asked: str, kind: str = "answer"):
    """The ``kind`` (answer, or json) of the first rule of that kind whose text the last user
    message contains, if any."""
    for rule in b.get("rules") or ():
        if kind in rule and rule["contains"] in asked:
            return rule[kind]
    return None


def _last_role(messages: list) -> str | None:
    last = messages[-1] if messages else None
    return last.get("role") if isinstance(last, dict) else None


def _tool_calls(b: dict, body: dict, messages: list, seq: int) -> list[dict]:
    """The scripted tool calls this request gets: only tools it offers, and only before any
    tool result came back (a model that called once answers the results with text)."""
    script = b.get("tool_calls")
    tools = body.get("tools")
    if not script or not isinstance(tools, list) or _last_role(messages) == "tool":
        return []
    offered = {t.get("function", {}).get("name") for t in tools
               if isinstance(t, dict) and isinstance(t.get("function"), dict)}
    calls = []
    for i, call in enumerate(script):
        if call.get("name") not in offered:
            continue
        args = call.get("arguments", {})
        calls.append({"id": f"call_sim{seq:06x}_{i}", "type": "function",
                      "function": {"name": call["name"],
                                   "arguments": args if isinstance(args, str)
                                   else json.dumps(args)}})
    return calls


def _after_tools(model: str, messages: list) -> str:
    said = [m.get("content") for m in messages
            if isinstance(m, dict) and m.get("role") == "tool"]
    quoted = "; ".join(str(s) for s in said[-3:])
    return f"[simulated {model}] The tools said: {quoted}."


def _wants_json(body: dict) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def _json_answer(b: dict, body: dict, n: int) -> str:
    scripted = b.get("json")
    if isinstance(scripted, list) and scripted:
        scripted = scripted[(n - 1) % len(scripted)]
    if isinstance(scripted, str):
        return scripted
    if scripted is not None:
        return json.dumps(scripted)
    fmt = body["response_format"]
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt["type"] == "json_schema" else None
    schema = schema or {"type": "object"}
    return json.dumps(_from_schema(schema, body.get("model"), 0, schema))


def _from_schema(schema, model, depth: int, root=None):
    """A small value that satisfies ``schema``'s types and required keys; local refs
    (``#/$defs/...``, as pydantic writes nested models) are followed."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and isinstance(root, dict):
        target = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _from_schema(target, model, depth + 1, root)
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _from_schema(schema[key][0], model, depth + 1, root)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        keys = schema.get("required") or list(props)
        return {k: _from_schema(props.get(k, {}), model, depth + 1, root) for k in keys}
    if kind == "array":
        return []
    return {"string": f"simulated {model}", "integer": 1, "number": 1.0, "boolean": True,
            "null": None}.get(kind, f"simulated {model}")


def _reply(model: str, asked: str, images: int) -> str:
    words = asked.split()
    quoted = " ".join(words[:6]) + (" …" if len(words) > 6 else "")
    said = f"You asked: \"{quoted}\"." if words else "You sent no text."
    seen = f" I was shown {images} image{'s' if images != 1 else ''}." if images else ""
    return (f"[simulated {model}] {said}{seen} This is a scripted reply from a simulated model; "
            "no language model read your prompt.")


# -- command line ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sim_upstream", description="Serve simulated OpenAI-compatible models "
        "(default: the sim-… demo set) until SIGINT or SIGTERM. Prints the base URL first.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--models", type=Path, metavar="FILE.json",
                        help='a JSON object {"model id": {behaviour…}, …}; behaviour keys: '
                        + ", ".join(BEHAVIOUR))
    args = parser.parse_args(argv)
    models = None
    if args.models:
        try:
            models = json.loads(args.models.read_text())
        except (OSError, ValueError) as exc:
            print(f"sim_upstream: cannot read {args.models}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(models, dict) or not all(isinstance(b, dict) for b in models.values()):
            print(f"sim_upstream: {args.models} must hold a JSON object of model id → behaviour "
                  "object", file=sys.stderr)
            return 2
    try:
        sim = SimUpstream(models, host=args.host, port=args.port, keep_requests=1000).start()
    except ValueError as exc:
        print(f"sim_upstream: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sim_upstream: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
              "pick another --port", file=sys.stderr)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(sim.url, flush=True)
    names = ", ".join(model["id"] for model in sim._listing()["data"])
    print(f"simulating {names} (Ctrl-C stops)", file=sys.stderr, flush=True)
    stop.wait()
    sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
