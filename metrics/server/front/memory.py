"""What the requests in flight may hold in memory (``InFlight``), and handing freed memory back
to the system (``keep_heap_small``).

Invariants:

* a request body over ``SMALL_BODY`` bytes is read only once ``InFlight`` granted it
  ``GRANT_FACTOR`` (5) times its size: what a panel holds of it at its peak, measured by
  ``scripts/bench_memory.py`` (the parsed text, the one encoding of its messages every seat
  shares, and when the panel is logged the prompt as written and its line as text and bytes).
  The grant is held until the request is answered and goes back only after a collection has
  freed the run's objects (they form cycles). Smaller bodies need no grant: the connection
  cap bounds them (``max_connections × SMALL_BODY``).
* the seats' large answers draw from the same budget as they arrive (``upstream/http11``,
  ``panel/held``): held until the panel's reply is written and its line logged; a seat whose
  answer finds no room fails with kind ``memory``. Answers up to ``SMALL_BODY`` are not charged.
* past the budget a request gets 503 with ``Retry-After`` before any of its body is read (as
  soon as its head has arrived, without a thread: ``Heads`` asks ``fits`` first); a body that
  could never fit gets 413.
* a grant whose request is answered but not yet given back (its reply written, the collection
  still to come) is *settling* (``settle``): a request that would fit once the settling grants
  are back waits for them (``take``'s ``wait``, at most ``SETTLE_WAIT``) instead of being
  refused, so a client that sends its next large body the moment it has its reply is not told
  to retry because of its own last one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time

SMALL_BODY = 64 * 1024
MAX_IN_FLIGHT = 128 * 1024 * 1024  # bytes the grants may add up to (PANELIST_MAX_INFLIGHT_MB)
GRANT_FACTOR = 5
SETTLE_WAIT = 1.0  # seconds a request waits for answered requests' grants to come back


class InFlight:
    """A byte budget shared by every request of one server."""

    def __init__(self, limit: int = MAX_IN_FLIGHT):
        if limit < 1:
            raise ValueError("the in-flight budget must be at least one byte")
        self.limit = limit
        self.held = 0
        self.settling = 0  # of ``held``: grants of requests already answered
        self._lock = threading.Condition(threading.Lock())

    @staticmethod
    def cost(size: int) -> int:
        """What a body of ``size`` bytes must be granted before it is read (0: no grant)."""
        return 0 if size <= SMALL_BODY else size * GRANT_FACTOR

    def fits(self, n: int, *, soon: bool = False) -> bool:
        """Whether a grant of ``n`` bytes would be made now (nothing is taken); ``soon``: once
        the settling grants are back."""
        return n <= 0 or self.held - (self.settling if soon else 0) + n <= self.limit

    def refusal(self) -> str:
        """What a request past the budget is told (with 503 and ``Retry-After: 1``)."""
        return (
            f"the server is holding as many request bodies and answers in memory as it may "
            f"({self.limit // 2**20} MB, PANELIST_MAX_INFLIGHT_MB); retry in a second, or "
            "send images as https:// URLs"
        )

    def take(self, n: int, *, wait: float = 0.0) -> bool:
        """Grant ``n`` bytes; when they do not fit now but would once the settling grants are
        back, wait for that up to ``wait`` seconds."""
        if n <= 0:
            return True
        with self._lock:
            end = None
            while self.held + n > self.limit:
                if self.held - self.settling + n > self.limit:
                    return False  # not even once the answered ones are back
                now = time.monotonic()
                end = now + wait if end is None else end
                if now >= end:
                    return False
                self._lock.wait(end - now)
            self.held += n
            return True

    def settle(self, n: int) -> None:
        """``n`` bytes of a grant whose request is answered: back soon (``give``)."""
        if n > 0:
            with self._lock:
                self.settling += n

    def give(self, n: int, *, settled: int = 0) -> None:
        """``n`` bytes back, ``settled`` of them marked by ``settle``."""
        if n > 0:
            with self._lock:
                self.held -= n
                self.settling -= settled
                self._lock.notify_all()


_pinned = False


def keep_heap_small() -> None:
    """Make glibc give large freed blocks back to the system at once (once per process).

    glibc serves a block over its mmap threshold (128 KB at start) with its own mapping, but each
    time such a block is freed it raises the threshold to that block's size (up to 32 MB). After
    one 20 MB prompt, later big buffers come from the heaps of the threads' arenas, which keep the
    memory when it is freed: an idle server stayed at several hundred MB. Pinning the threshold
    (which turns the adjustment off) keeps every big buffer in its own mapping, returned on free.
    Elsewhere (musl, macOS, Windows) nothing is done: their allocators do not behave this way."""
    global _pinned
    if _pinned:
        return
    _pinned = True
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None)
        if mallopt is None or not hasattr(libc, "gnu_get_libc_version"):
            return
        m_mmap_threshold = -3  # <malloc.h>
        mallopt(m_mmap_threshold, 256 * 1024)
    except OSError:
        pass
