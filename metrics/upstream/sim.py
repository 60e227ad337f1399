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

This module holds the models' scripts, what the simulator counted and its start and stop; the
HTTP server and the handler that answers each request are ``simhttp``'s.

Run it on its own::

    python scripts/sim_upstream.py [--host H] [--port P] [--models FILE.json]

The first line printed on stdout is the base URL (``http://127.0.0.1:PORT/v1``); it serves until
SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import random
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from panelist.metrics.upstream import simanswers
from panelist.metrics.upstream.simanswers import JUDGE_MODES
from panelist.metrics.upstream.simhttp import POLL, Handler, Server, Server6

DEMO_MODELS: dict[str, dict] = {
    "sim-swift": {"latency": 0.05, "window": 32_000},
    "sim-steady": {"latency": 0.3, "window": 128_000},
    "sim-careful": {"latency": 0.8, "jitter": 0.2, "window": 200_000},
    "sim-flaky": {"latency": 0.1, "fail": "server_error", "fail_every": 3, "window": 64_000},
    "sim-vision": {"latency": 0.2, "vision": True, "window": 128_000},
}

FAILS = frozenset(
    {
        "rate_limit",
        "quota",
        "server_error",
        "context_length",
        "empty",
        "hang",
        "auth",
        "garbage",
        "error_body",
        "reset",
        "not_found",
        "gone",
    }
)

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


class SimUpstream:
    """A simulated provider on its own port; ``start()`` it, or use it as a context manager."""

    def __init__(
        self,
        models: dict[str, dict] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        keepalive: float | None = None,
        seed: int = 0,
        keep_requests: int | None = None,
        listing_key: str | None = None,
    ):
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
        self.held: dict[str, int] = {}  # requests each model holds right now (hold_after)
        # requests of each model being worked on now, and the most ever at once: from arrival
        # to the first byte of the answer, a span inside any caller's wait for it
        self.running: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.in_flight = 0  # the same over every model
        self.peak_in_flight = 0
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        for name, behaviour in (DEMO_MODELS if models is None else models).items():
            self.script(name, **behaviour)

    # -- control ----------------------------------------------------------------------------------
    def start(self) -> "SimUpstream":
        if self._server is not None:
            return self
        self._stopping.clear()
        server_class = Server6 if ":" in self.host else Server
        self._server = server_class((self.host, self.port), Handler)
        self._server.sim = self
        self.port = self._server.server_address[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL,), name="sim-upstream", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # first, so pending requests do not count the stop as a disconnect
        server.shutdown()
        server.server_close()
        with self._lock:
            for conn in self._open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)  # wakes handlers waiting for a next request
                except OSError:
                    pass
        if self._thread is not None:  # set with the server, in start()
            self._thread.join(timeout=2)

    def __enter__(self) -> "SimUpstream":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def script(self, model: str, **behaviour) -> None:
        """Add a model, or replace its whole behaviour; safe while requests are being served."""
        unknown = set(behaviour) - set(BEHAVIOUR)
        if unknown:
            raise ValueError(
                f"unknown behaviour {sorted(unknown)} for {model!r}; use any of: "
                + ", ".join(BEHAVIOUR)
            )
        fail = behaviour.get("fail")
        if fail is not None and fail not in FAILS:
            raise ValueError(
                f"unknown fail {fail!r} for {model!r}; use None or one of: "
                + ", ".join(sorted(FAILS))
            )
        for key in ("latency", "jitter", "drip"):
            if not isinstance(behaviour.get(key, 0), (int, float)) or behaviour.get(key, 0) < 0:
                raise ValueError(f"{key} for {model!r} must be a number of seconds >= 0")
        for key in ("hold_stream", "stream_usage"):
            if not isinstance(behaviour.get(key, False), bool):
                raise ValueError(f"{key} for {model!r} must be true or false")
        price = behaviour.get("price")
        if price is not None and not (
            isinstance(price, (list, tuple))
            and len(price) == 2
            and all(type(x) in (int, float) and x >= 0 for x in price)
        ):
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
            isinstance(r, dict)
            and set(r) == {"contains", "answer"}
            and isinstance(r["contains"], str)
            and r["contains"]
            and isinstance(r["answer"], str)
            for r in rules
        ):
            raise ValueError(
                f"rules for {model!r} must be a list of "
                "{'contains': non-empty text, 'answer': text}"
            )
        json_rules = behaviour.get("json_rules", [])
        if not isinstance(json_rules, list) or not all(
            isinstance(r, dict)
            and set(r) == {"contains", "answer"}
            and isinstance(r["contains"], str)
            and r["contains"]
            and isinstance(r["answer"], (str, dict))
            for r in json_rules
        ):
            raise ValueError(
                f"json_rules for {model!r} must be a list of "
                "{'contains': non-empty text, 'answer': object or text}"
            )
        judge = behaviour.get("judge")
        if judge is not None and not (
            isinstance(judge, dict)
            and judge.get("mode", "truth") in JUDGE_MODES
            and set(judge) <= {"mode", "agree", "long", "seed"}
            and type(judge.get("agree", 1.0)) in (int, float)
            and 0 <= judge.get("agree", 1.0) <= 1
            and type(judge.get("long", 1)) is int
        ):
            raise ValueError(
                f"judge for {model!r} must be {{'mode': one of "
                f"{', '.join(JUDGE_MODES)}, 'agree': 0..1, 'long': characters, "
                "'seed': any}"
            )
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
                del self.requests[: -self.keep_requests]
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
        return {
            "object": "list",
            "data": [simanswers.listed(name, b) for name, b in models.items()],
        }


# -- command line ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sim_upstream",
        description="Serve simulated OpenAI-compatible models "
        "(default: the sim-… demo set) until SIGINT or SIGTERM. Prints the base URL first.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument(
        "--models",
        type=Path,
        metavar="FILE.json",
        help='a JSON object {"model id": {behaviour…}, …}; behaviour keys: ' + ", ".join(BEHAVIOUR),
    )
    args = parser.parse_args(argv)
    models = None
    if args.models:
        try:
            models = json.loads(args.models.read_text())
        except (OSError, ValueError) as exc:
            print(f"sim_upstream: cannot read {args.models}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(models, dict) or not all(isinstance(b, dict) for b in models.values()):
            print(
                f"sim_upstream: {args.models} must hold a JSON object of model id → behaviour "
                "object",
                file=sys.stderr,
            )
            return 2
    try:
        sim = SimUpstream(models, host=args.host, port=args.port, keep_requests=1000).start()
    except ValueError as exc:
        print(f"sim_upstream: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"sim_upstream: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
            "pick another --port",
            file=sys.stderr,
        )
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
