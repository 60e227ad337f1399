"""What upstream failures teach about a model, written into the catalog beside typed facts.

The seats core calls ``heard(model, error)`` on every upstream failure (the gateway's panels,
races, suite runs, probes and the decider alike). A context-length error that states a window,
a refused output budget that states the model's cap, and a rate limit that states a
Retry-After become ``learned`` facts of the model's endpoint and served id (``Catalog.learn``),
where ``panelist catalog show`` lists them; seating reads the window and the seats core the
cap (``KnownRoster``). So does a 400 that says the model does not support tools
(``TOOLS_REFUSED``): ``tools: false``, after which seating leaves the model out of requests
that offer tools.

Invariants:
- Never slows a seat in a server: there (``background=True``) facts are handed to one writer
  thread, so a seat never waits on the catalog's lock or its fsync; ``close`` writes what is
  queued and joins it. Elsewhere (a race, a suite run, a probe from the CLI) they are written at
  once, so nothing is left unwritten when the command ends.
- Never fails a seat: a catalog that cannot be written (a broken hand edit, a full disk) is
  reported once on stderr and the seat's own failure goes on as it was.
- Cheap on a storm of failures: a window or a cap is written only when lower than the lowest
  this process has written for that model; a Retry-After at most once per ``RETRY_EVERY`` seconds
  per model, so a rate-limited endpoint does not rewrite the catalog on every call.
"""

from __future__ import annotations

import math
import queue
import re
import sys
import threading
import time

from panelist.metrics.roster.catalog import Catalog
from panelist.metrics.errors import ContextTooLong, OutputCapExceeded, RateLimited, UpstreamBadReply
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import Model

RETRY_EVERY = 60.0
JOIN = 30.0  # seconds a closing server waits for the queued facts to be written
# How providers word a refusal of tools (Ollama, llama.cpp and LiteLLM-fronted servers, vLLM
# without a tool parser, OpenRouter with no endpoint that takes them), read only from a 400.
TOOLS_REFUSED = re.compile(
    r"does(?: not|n't) support (?:tools|tool use|tool calling|function calling)"
    r"|(?:tools|tool use|tool calling|function calling) (?:is |are )?not supported"
    r"|no endpoints found that support tool use"
    r"|tool choice requires --enable-auto-tool-choice",
    re.I,
)


class LearnedFacts:
    def __init__(self, home: Home, *, background: bool = False):
        self.catalog = Catalog(home)
        self._lock = threading.Lock()
        self._lowest: dict[tuple, int] = {}  # (endpoint, served, fact): window or cap
        self._retry_at: dict[tuple, float] = {}
        self._warned = False
        self._queue: queue.SimpleQueue | None = queue.SimpleQueue() if background else None
        self._writer: threading.Thread | None = None
        self._closed = False

    def heard(self, model: Model, exc: Exception) -> None:
        if isinstance(exc, ContextTooLong) and exc.window:
            fact, value, origin = "context", int(exc.window), "context-length error"
        elif isinstance(exc, OutputCapExceeded) and exc.max_output:
            fact, value, origin = "max_output", int(exc.max_output), "max_tokens refusal"
        elif isinstance(exc, RateLimited) and exc.retry_after:
            fact, value, origin = (
                "retry_after",
                max(1, math.ceil(exc.retry_after)),
                "429 Retry-After",
            )
        elif (
            isinstance(exc, UpstreamBadReply)
            and exc.upstream_status == 400
            and TOOLS_REFUSED.search(exc.message)
        ):
            fact, value, origin = "tools", False, "tools refusal (400)"
        else:
            return
        key = (model.endpoint, model.served)
        now = time.monotonic()
        with self._lock:
            if fact == "tools":  # once per process: the catalog keeps it from then on
                if key + (fact,) in self._lowest:
                    return
                self._lowest[key + (fact,)] = 0
            elif fact != "retry_after":
                if self._lowest.get(key + (fact,), value + 1) <= value:
                    return
                self._lowest[key + (fact,)] = value
            else:
                if now - self._retry_at.get(key, -RETRY_EVERY) < RETRY_EVERY:
                    return
                self._retry_at[key] = now
            if self._queue is not None and not self._closed:
                if self._writer is None:
                    self._writer = threading.Thread(
                        target=self._write_queued, name="learned-facts", daemon=True
                    )
                    self._writer.start()
                self._queue.put((model.endpoint, model.served, fact, value, origin))
                return
        self._write(model.endpoint, model.served, fact, value, origin)

    def _write_queued(self) -> None:
        pending = self._queue
        assert pending is not None  # the writer is started only beside a queue (background)
        while (item := pending.get()) is not None:
            self._write(*item)

    def _write(self, endpoint: str, served: str, fact: str, value: int | bool, origin: str) -> None:
        try:
            self.catalog.learn(endpoint, served, fact, value, origin)
        except Exception as exc2:  # noqa: BLE001 - a fact not kept must never fail a call
            if not self._warned:
                self._warned = True
                print(
                    f"panelist: could not keep a learned {fact} in the catalog "
                    f"({getattr(exc2, 'message', exc2)}); seating goes on without it",
                    file=sys.stderr,
                )

    def close(self, timeout: float = JOIN) -> None:
        """Write what is still queued, then stop the writer (a server's, at its close)."""
        with self._lock:
            self._closed = True
            writer = self._writer
        if writer is not None:
            assert self._queue is not None  # a writer exists only beside its queue
            self._queue.put(None)
            writer.join(timeout)
