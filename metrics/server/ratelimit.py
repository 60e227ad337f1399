"""Requests a minute per gateway key, counted once across every process on one data folder.

A key's limit of ``n`` requests a minute holds over *every* 60 s, not only over clock minutes:
a request is admitted only if fewer than ``n`` were admitted in the 60 s before it. Each limited
key has a file ``DATA/runs/gateway/rate/<key name>`` holding a ring of its last admission times
(a header: a mark, the ring's size, the slot of the oldest; then the times, 0 for none yet):
the ``n``-th newest is the only one the check needs, since ``n`` admissions within 60 s means
that one is within 60 s.

Invariants:

* At most ``n`` requests of a key are admitted in any 60 s (an estimate from two clock minutes,
  which let up to twice the limit through across a minute's edge, is not used). A refused
  request is not counted, and its ``Retry-After`` is when the oldest of the last ``n`` leaves
  the window: a caller that waits it out gets in. A request that fans out to many upstream
  calls is admitted as that many at once (``cost``), all or none.
* Each check is one ``flock``, two ``pread`` and two ``pwrite`` on a descriptor kept open, so two
  gateway processes on one data folder count each request exactly once and a check costs a few
  microseconds whatever the limit; only a raised limit rewrites the ring (once). The ring may
  be larger than the limit (a limit lowered): the check reads the limit-th newest time. A thread lock
  covers the threads of one process, which a ``flock`` on a shared descriptor would not hold
  apart.
* Times are wall-clock (``time.time``), the one clock every process on the machine shares. A
  file without the mark (an older layout) starts empty.
"""

from __future__ import annotations

import fcntl
import math
import os
import struct
import threading
import time
from pathlib import Path

_HEAD = struct.Struct("<8sqq")  # mark, ring size n, slot of the oldest time
_TIME = struct.Struct("<d")
MARK = b"pnlring1"
WINDOW = 60.0


class RateCounter:
    """Admits or refuses requests for keys by name; one per server, sharing a data folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fds: dict[str, tuple[int, threading.Lock]] = {}
        self._open_lock = threading.Lock()

    def _fd(self, name: str) -> tuple[int, threading.Lock]:
        got = self._fds.get(name)
        if got is None:
            with self._open_lock:
                got = self._fds.get(name)
                if got is None:
                    fd = os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o600)
                    got = self._fds[name] = (fd, threading.Lock())
        return got

    def admit(self, name: str, limit: int, now: float | None = None, cost: int = 1) -> float | None:
        """Count ``cost`` requests for ``name`` at once (a request that fans out counts as the
        upstream calls it plans; ``cost <= limit``): None if admitted, else the seconds to
        wait."""
        t = time.time() if now is None else now
        fd, lock = self._fd(name)
        with lock:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                raw = os.pread(fd, _HEAD.size, 0)
                mark, size, head = _HEAD.unpack(raw) if len(raw) == _HEAD.size else (b"", 0, 0)
                kept = mark == MARK and 0 <= head < size
                if not kept or size < limit:  # new, an older layout, or a raised limit
                    size, head = _grow(fd, limit, t, kept, size)
                # ``cost`` more fit iff the (limit - cost + 1)-th newest admission is out of the
                # window (for one request: the limit-th newest)
                at = _HEAD.size + (head - (limit - cost + 1)) % size * _TIME.size
                raw = os.pread(fd, _TIME.size, at)
                nth = _TIME.unpack(raw)[0] if len(raw) == _TIME.size else 0.0
                if nth > t - WINDOW:
                    return nth + WINDOW - t
                for i in range(cost):
                    os.pwrite(fd, _TIME.pack(t), _HEAD.size + (head + i) % size * _TIME.size)
                os.pwrite(fd, _HEAD.pack(MARK, size, (head + cost) % size), 0)
                return None
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    @staticmethod
    def retry_after(seconds: float) -> str:
        """The ``Retry-After`` value: whole seconds, rounded up, at least one."""
        return str(max(1, math.ceil(seconds)))

    def close(self) -> None:
        with self._open_lock:
            fds, self._fds = self._fds, {}
        for fd, _ in fds.values():
            os.close(fd)


def _grow(fd: int, limit: int, t: float, kept: bool, size: int) -> tuple[int, int]:
    """Write the ring anew with room for ``limit`` times (a new key, a raised limit, an older
    layout), keeping the admissions of the last 60 s; ``(size, slot of the oldest)``. A lowered
    limit keeps the ring as it is: the check reads the limit-th newest time whatever the size."""
    times = []
    if kept:
        raw = os.pread(fd, size * _TIME.size, _HEAD.size)
        times = sorted(x for (x,) in _TIME.iter_unpack(raw[: len(raw) // 8 * 8]) if x > t - WINDOW)
    ring = times + [0.0] * (limit - len(times))
    head = len(times) % limit
    os.ftruncate(fd, 0)
    os.pwrite(fd, _HEAD.pack(MARK, limit, head) + b"".join(_TIME.pack(x) for x in ring), 0)
    return limit, head


def of_home(home):
    """The counter every process on ``home`` shares: its database's when it has one (so a
    key's rpm holds across every instance on it), else its data folder's files."""
    url = home.database
    if not url:
        return RateCounter(home.rate_counters)
    from panelist.metrics.server.ratedb import DatabaseRateCounter

    return DatabaseRateCounter(url)
