"""What upstream failures teach about a model, written into the catalog beside typed facts.

The seats core calls ``heard(model, error)`` on every upstream failure (the gateway's panels,
races, suite runs, probes and the decider alike). A context-length error
that states a window, and a rate limit that states a Retry-After, become ``learned`` facts of the
model's endpoint and served id (``Catalog.learn``), where ``panelist catalog show`` lists them
and seating reads the window (``KnownRoster``).

Invariants:
- Never fails a seat: a catalog that cannot be written (a broken hand edit, a full disk) is
  reported once on stderr and the seat's own failure goes on as it was.
- Cheap on a storm of failures: a window is written only when lower than the lowest this
  process has written for that model; a Retry-After at most once per ``RETRY_EVERY`` seconds
  per model, so a rate-limited endpoint does not rewrite the catalog on every call.
"""

from __future__ import annotations

import math
import sys
import threading
import time

from panelist.metrics.catalog import Catalog
from panelist.metrics.errors import ContextTooLong, PanelistError, RateLimited
from panelist.metrics.home import Home
from panelist.metrics.roster import Model

RETRY_EVERY = 60.0


class LearnedFacts:
    def __init__(self, home: Home):
        self.catalog = Catalog(home)
        self._lock = threading.Lock()
        self._windows: dict[tuple, int] = {}
        self._retry_at: dict[tuple, float] = {}
        self._warned = False

    def heard(self, model: Model, exc: Exception) -> None:
        if isinstance(exc, ContextTooLong) and exc.window:
            fact, value, origin = "context", int(exc.window), "context-length error"
        elif isinstance(exc, RateLimited) and exc.retry_after:
            fact, value, origin = "retry_after", max(1, math.ceil(exc.retry_after)), \
                "429 Retry-After"
        else:
            return
        key = (model.endpoint, model.served)
        now = time.monotonic()
        with self._lock:
            if fact == "context":
                if self._windows.get(key, value + 1) <= value:
                    return
                self._windows[key] = value
            else:
                if now - self._retry_at.get(key, -RETRY_EVERY) < RETRY_EVERY:
                    return
                self._retry_at[key] = now
        try:
            self.catalog.learn(model.endpoint, model.served, fact, value, origin)
        except (PanelistError, OSError) as exc2:
            if not self._warned:
                self._warned = True
                print(f"panelist: could not keep a learned {fact} in the catalog "
                      f"({getattr(exc2, 'message', exc2)}); seating goes on without it",
                      file=sys.stderr)
