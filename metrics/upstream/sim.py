"""A simulated OpenAI-compatible provider, for tests and the gateway's ``--demo`` mode.

It is honest about being a simulation: the demo models are named ``sim-…``, every default answer
starts with ``[simulated <model id>]`` and every completion id with ``simcmpl-``. No language
model is consulted; answers are deterministic, and so is jitter (a seeded generator).

Each model follows a scripted behaviour (see ``BEHAVIOUR``) that can be replaced while the server
runs. A request with ``stream: true`` gets its answer as OpenAI's stream chunks (``simstream``); a
failure is still a status (or, for ``reset``, a stream cut halfway). Whatever the behaviour, a
history whose tool messages do not answer the tool calls of the assistant message before them is
refused with a 400, as OpenAI's API does. Invariants: every chat request is recorded in
``requests`` before it is answered; a client that goes away while its request is pending (latency
or ``hang``) is noticed and counted in ``disconnects``; ``stop()`` returns promptly even while
requests hang, and closes every connection it holds.

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
from typing import Any

from panelist.metrics.upstream import simanswers, simstream
from panelist.metrics.upstream.simanswers import (JUDGE_MODES, _after_tools, _contents,
                                                  _json_answer, _last_role, _reply, _ruled,
                                                  _tool_calls, _tool_history_error,
                                                  _unsupported, _wants_json, judged)

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
    "tools": "False: refuse a request that offers tools with a 400, as a model without tool "
             "support does; listed in GET /models' supported_parameters either way",
    "structured_output": "False: refuse a json_schema response_format with a 400 (json_object "
                         "still works); listed in supported_parameters either way",
    "max_output": "the most completion tokens an answer may have: a max_tokens or "
                  "max_completion_tokens above it is refused with a 400 that states it "
                  "(OpenAI's wording; 'message' replaces it); listed as "
                  "top_provider.max_completion_tokens",
    "price": "[in, out] in USD per million tokens: listed by GET /models as per-token "
             "'pricing' (as aggregators list it); the calls themselves are not billed",
    "close": "answer with 'Connection: close' and close the connection",
    "deaf": "true: work through the whole latency (or hold, with hold_after) even when the "
            "client has gone, as a provider that finishes generating does; counted in running "
            "until then, never in disconnects",
    "drip": "seconds between the answer's bytes (streamed: between its events): a server that "
            "sends slowly but never stops",
    "stream_usage": "false: a streamed answer carries no usage, even when asked for",
    "hold_stream": "true: a streamed answer sends its first piece, then waits until the test "
                   "calls release(model) (or the client goes) before the rest; counted in held",
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
             "no rule matches is answered as without rules",
    "json_rules": "as 'rules', for requests that ask for JSON: the first rule whose text occurs "
                  "in the last user message gives the JSON answer (an object, or a string sent "
                  "as it is), before 'json'",
    "judge": "a scripted judge of answers, for `panelist judge check`: {'mode': 'truth' (agree "
             "with each answer's hidden (truth=useful|poor) mark with probability 'agree'), "
             "'useful' (every answer useful, the first of two preferred) or 'longer' (useful "
             "from 'long' characters, the longer preferred), 'agree', 'long', 'seed'}",
    "refuse_params": "body keys the model refuses with a 400 naming the key, as reasoning "
                     "models refuse 'temperature': a list such as ['temperature', 'seed']",
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
        # requests of each model being worked on now, and the most ever at once: from arrival
        # to the first byte of the answer, a span inside any caller's wait for it
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.in_flight = 0        # the same over every model
        self.peak_in_flight = 0
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
        if self._thread is not None:   # set with the server, in start()
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
        for key in ("hold_stream", "stream_usage"):
            if not isinstance(behaviour.get(key, False), bool):
                raise ValueError(f"{key} for {model!r} must be true or false")
        price = behaviour.get("price")
        if price is not None and not (
                isinstance(price, (list, tuple)) and len(price) == 2
                and all(type(x) in (int, float) and x >= 0 for x in price)):
            raise ValueError(f"price for {model!r} must be [in, out], numbers >= 0")
        for key in ("tools", "structured_output"):
            if behaviour.get(key) is not None and not isinstance(behaviour[key], bool):
                raise ValueError(f"{key} for {model!r} must be true or false")
        for key in ("fail_every", "window", "hold_after", "max_output"):
            value = behaviour.get(key)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{key} for {model!r} must be a whole number >= 1")
        rules = behaviour.get("rules", [])
        if not isinstance(rules, list) or not all(
                isinstance(r, dict) and set(r) == {"contains", "answer"}
                and isinstance(r["contains"], str) and r["contains"]
                and isinstance(r["answer"], str) for r in rules):
            raise ValueError(f"rules for {model!r} must be a list of "
                             "{'contains': non-empty text, 'answer': text}")
        json_rules = behaviour.get("json_rules", [])
        if not isinstance(json_rules, list) or not all(
                isinstance(r, dict) and set(r) == {"contains", "answer"}
                and isinstance(r["contains"], str) and r["contains"]
                and isinstance(r["answer"], (str, dict)) for r in json_rules):
            raise ValueError(f"json_rules for {model!r} must be a list of "
                             "{'contains': non-empty text, 'answer': object or text}")
        judge = behaviour.get("judge")
        if judge is not None and not (
                isinstance(judge, dict) and judge.get("mode", "truth") in JUDGE_MODES
                and set(judge) <= {"mode", "agree", "long", "seed"}
                and type(judge.get("agree", 1.0)) in (int, float)
                and 0 <= judge.get("agree", 1.0) <= 1
                and type(judge.get("long", 1)) is int):
            raise ValueError(f"judge for {model!r} must be {{'mode': one of "
                             f"{', '.join(JUDGE_MODES)}, 'agree': 0..1, 'long': characters, "
                             "'seed': any}")
        refuse = behaviour.get("refuse_params", [])
        if not isinstance(refuse, list) or not all(isinstance(k, str) for k in refuse):
            raise ValueError(f"refuse_params for {model!r} must be a list of body keys")
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
            self.running[key] = self.running.get(key, 0) + 1
            self.peak[key] = max(self.peak.get(key, 0), self.running[key])
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            behaviour = self._models.get(key)
            delay = 0.0
            if behaviour is not None:
                delay = behaviour.get("latency", 0)
                if behaviour.get("jitter"):
                    delay = max(0.0, delay + self._rng.uniform(-1, 1) * behaviour["jitter"])
            return behaviour, n, delay, next(self._ids)

    def _answering(self, key: str) -> None:
        with self._lock:
            self.running[key] -= 1
            self.in_flight -= 1

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
        return {"object": "list",
                "data": [simanswers.listed(name, b) for name, b in models.items()]}


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has bytes (or its client's end of input) within ``timeout`` seconds; by
    ``poll`` where there is one, since ``select`` refuses a descriptor past 1,024."""
    if hasattr(select, "poll"):
        waiting = select.poll()
        waiting.register(sock, select.POLLIN)
        return bool(waiting.poll(max(0, math.ceil(timeout * 1000))))
    return bool(select.select([sock], [], [], timeout)[0])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False    # stop() must not wait for hanging requests
    request_queue_size = 128
    sim: SimUpstream

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall on a slow resolver
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]   # (host, port), with more for IPv6
        self.server_name, self.server_port = host, port

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):   # a client going away is no news
            super().handle_error(request, client_address)


class _Server6(_Server):
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


_MAX_FIELDS = 100   # http.client's bound on a head's field lines


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "panelist-sim"
    disable_nagle_algorithm = True
    server: _Server
    raw_requestline: bytes   # set by http.server's handle_one_request before parse_request
    _working: str | None = None   # the model of a request not yet answered

    def parse_request(self) -> bool:
        """http.server's, with the header fields read by hand: its ``email`` parser cost more
        CPU than the rest of a simulated answer, and the simulator stands in for an upstream
        that answers at once. Refuses what http.server refuses, with the same statuses."""
        self.command = ""   # none read yet (not HEAD, so an error has its body)
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
        if not version.startswith("HTTP/") or not dot or not (major + minor).isdigit() \
                or len(major) > 10 or len(minor) > 10:
            self.send_error(400, f"Bad request version ({version!r})")
            return False
        if int(major) >= 2:
            self.send_error(505, f"Invalid HTTP version ({version[5:]})")
            return False
        self.request_version = version
        self.close_connection = (int(major), int(minor)) < (1, 1)
        # http.server's guard against open redirects: '//x' is one absolute path, '/x'
        self.command, self.path = command, ("/" + path.lstrip("/") if path.startswith("//")
                                            else path)
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
        self.headers = fields   # type: ignore[assignment]  # read only through get and []
        connection = fields.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        if fields.get("Expect", "").lower() == "100-continue" and \
                self.request_version >= "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def setup(self) -> None:
        self.sim = self.server.sim
        # StreamRequestHandler.setup reads it from the instance: each simulator has its own
        self.timeout = self.sim.keepalive   # type: ignore[misc]  # a class attribute in typeshed
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
        # the name its behaviour was looked up by (a model that is no string, by its repr)
        name = self._working = model if isinstance(model, str) else repr(model)
        try:
            if behaviour is None:
                return self._error(404, f"The model `{model}` does not exist or you do not have "
                                   "access to it. (simulated)", "invalid_request_error",
                                   "model_not_found")
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
            self._wait(None)
            return
        if b.get("hold_after") and n > b["hold_after"]:
            released = self.sim._release_event(model)
            self.sim._hold(model, 1)
            try:
                if not (self._work(None, released) if b.get("deaf") else
                        self._wait(None, until=released)):
                    return
            finally:
                self.sim._hold(model, -1)
        if delay and not (self._work(delay) if b.get("deaf") else self._wait(delay)):
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
        unsupported = _unsupported(model, body, b)
        if unsupported:
            return self._error(400, unsupported[1] + " (simulated)", "invalid_request_error",
                               None, param=unsupported[0])
        if b.get("close"):
            self.close_connection = True
        for key in b.get("refuse_params") or ():
            if key in body:
                return self._error(400, f"Unsupported parameter: '{key}' is not supported with "
                                   "this model. (simulated)", "invalid_request_error",
                                   "unsupported_parameter", param=key)
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
        answer: dict[str, Any] = {"role": "assistant",
                                  "content": (text or None) if calls else text}
        if calls:
            answer["tool_calls"] = calls
        completion = {
            "id": f"simcmpl-{seq:08x}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "system_fingerprint": "simulated",
            "choices": [{"index": 0, "message": answer,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": estimate, "completion_tokens": math.ceil(len(text) / 4),
                      "total_tokens": estimate + math.ceil(len(text) / 4)}}
        if body.get("stream") is True:
            options = body.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True \
                and b.get("stream_usage", True)
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
            left = _POLL if end is None else min(end - time.monotonic(), _POLL)
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
                time.sleep(left)   # the client sent more already; wait without spinning on it
        self.close_connection = True
        return False

    def _work(self, seconds: float | None, until: threading.Event | None = None) -> bool:
        """Take ``seconds`` (None: until ``until`` is set) whatever the client does (a ``deaf``
        model); False if the server stops meanwhile."""
        end = None if seconds is None else time.monotonic() + seconds
        while not self.sim._stopping.is_set():
            if until is not None and until.is_set():
                return True
            left = _POLL if end is None else min(end - time.monotonic(), _POLL)
            if left <= 0:
                return True
            (until or self.sim._stopping).wait(left)
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
        self._answered()
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

    def _stream(self, events: list[bytes], b: dict, model: str, reset: bool) -> None:
        """``events`` as a chunked event stream, ``drip`` seconds apart; with ``hold_stream``
        the events after the first piece wait for ``release(model)``; ``reset`` cuts the
        connection halfway."""
        lines = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache",
                 "Transfer-Encoding: chunked"] + (["Connection: close"] if self.close_connection
                                                  else [])
        self._answered()
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        for i, data in enumerate(events):
            if reset and i == len(events) // 2:
                return self._reset(b"")
            if i and b.get("drip") and not self._wait(b["drip"]):
                return
            if i == 2 and b.get("hold_stream"):   # the role chunk and one piece are out
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
            self.wfile.write(self._head(200, len(payload), "application/json") +
                             payload[:len(payload) // 2])
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()


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
