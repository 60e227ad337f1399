"""A part that needs its database to be built, standing in until the database answers
(``deferred``), so that an instance can start while its database is out of reach: it serves
what needs no database and builds the part on the first use after the database is back.

Invariants:

* ``deferred(build, ...)`` builds at once when it can; only a ``DatabaseUnreachable`` defers
  it (any other failure, a bug or a bad setting, goes up at start as before).
* While the part is not built, every use of it raises ``DatabaseUnreachable`` (503 with
  ``Retry-After``); a try to build is made at most once per ``PAUSE`` seconds, so requests
  meanwhile are answered at once instead of each waiting out a connect timeout.
* ``known`` attributes (what a holder reads before any use, such as the redacted URL) answer
  without a database; ``close`` never connects.
* Once built, the part is used as it is: the stand-in only forwards.
"""

from __future__ import annotations

import threading
import time

from panelist.metrics.errors import DatabaseUnreachable

PAUSE = 1.0  # seconds between two tries to build while the database is out of reach


def deferred(build, **known):
    """``build()``, or a stand-in that builds it once the database answers."""
    try:
        return build()
    except DatabaseUnreachable as exc:
        return Deferred(build, exc, **known)


class Deferred:
    """Stands in for ``build()`` until it succeeds (see the module)."""

    def __init__(self, build, why: DatabaseUnreachable, **known):
        self.__dict__.update(known)
        self._build = build
        self._why = why
        self._part = None
        self._tried = time.monotonic()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def built(self) -> bool:
        return self._part is not None

    def part(self):
        """The part, built now if the database answers; else ``DatabaseUnreachable``."""
        part = self._part
        if part is not None:
            return part
        with self._lock:
            if self._part is None:
                if self._closed:
                    raise self._why
                if time.monotonic() - self._tried < PAUSE:
                    raise self._why
                self._tried = time.monotonic()
                try:
                    self._part = self._build()
                except DatabaseUnreachable as exc:
                    self._why = exc
                    raise
            return self._part

    def __getattr__(self, name):
        # only names this object lacks come here: the part's, once built
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.part(), name)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            part = self._part
        if part is not None:
            part.close()
