"""Requests a minute per gateway key, counted once across every process on one data folder.

Each limited key has a 24-byte file ``DATA/runs/gateway/rate/<key name>``: the number of the
current minute since the epoch, the requests admitted in it and in the minute before. The count
a request is judged by is the sliding-window estimate ``before × (the share of the last 60 s that
lies in the minute before) + now`` (the usual O(1) stand-in for a log of every request's time).

Invariants:

* A request is admitted only if the estimate, itself included, stays within the limit; a refused
  request is not counted, so a caller that waits out ``Retry-After`` gets in. A request that
  fans out to many upstream calls is admitted as that many at once (``cost``), all or none.
* Each check is one ``flock``, one ``pread`` and one ``pwrite`` on a descriptor kept open, so two
  gateway processes on one data folder count each request exactly once and a check costs a few
  microseconds whatever the traffic. A thread lock covers the threads of one process, which a
  ``flock`` on a shared descriptor would not hold apart.
* Minutes are wall-clock (``time.time``), the one clock every process on the machine shares.
"""

from __future__ import annotations

import fcntl
import math
import os
import struct
import threading
import time
from pathlib import Path

_SLOT = struct.Struct("<qqq")   # minute, admitted this minute, admitted the minute before
WINDOW = 60.0


def estimate(before: int, now: int, elapsed: float) -> float:
    """Requests in the last minute, estimated ``elapsed`` seconds into the current one."""
    return before * (1.0 - elapsed / WINDOW) + now


def wait_for(limit: int, before: int, now: int, elapsed: float, cost: int = 1) -> float:
    """Seconds until ``cost`` more requests fit under ``limit`` (``cost <= limit``) if nothing
    else is admitted."""
    room = limit - cost   # the estimate must drop to this for them to fit
    if now <= room and before > 0:
        at = WINDOW * (1.0 - (room - now) / before)   # when, within this minute, it gets there
        if at < WINDOW:
            return max(0.0, at - elapsed)
    # not within this minute: the current minute becomes "before" and decays from the next
    later = WINDOW * (1.0 - room / now) if now > room else 0.0
    return WINDOW - elapsed + later


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

    def admit(self, name: str, limit: int, now: float | None = None,
              cost: int = 1) -> float | None:
        """Count ``cost`` requests for ``name`` at once (a request that fans out counts as the
        upstream calls it plans; ``cost <= limit``): None if admitted, else the seconds to
        wait."""
        t = time.time() if now is None else now
        minute = int(t // WINDOW)
        elapsed = t - minute * WINDOW
        fd, lock = self._fd(name)
        with lock:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                raw = os.pread(fd, _SLOT.size, 0)
                stored, current, before = _SLOT.unpack(raw) if len(raw) == _SLOT.size else (0, 0, 0)
                if stored == minute - 1:
                    current, before = 0, current
                elif stored != minute:
                    current, before = 0, 0
                if estimate(before, current, elapsed) + cost > limit:
                    return wait_for(limit, before, current, elapsed, cost)
                os.pwrite(fd, _SLOT.pack(minute, current + cost, before), 0)
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


def of_home(home):
    """The counter every process on ``home`` shares: its database's when it has one (so a
    key's rpm holds across every instance on it), else its data folder's files."""
    url = home.database
    if not url:
        return RateCounter(home.rate_counters)
    from panelist.metrics.server.ratedb import DatabaseRateCounter
    return DatabaseRateCounter(url)
