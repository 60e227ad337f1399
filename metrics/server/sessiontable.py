"""Where the dashboard's live sessions are kept: in this process's memory (``MemoryTable``), in
a file the workers of one group share (``SharedTable``), or, for a data folder with a database,
in the database every instance shares (``DatabaseTable``), so that a login made through one
worker or instance holds on every other and a logout through any of them ends it everywhere.

A table maps the SHA-256 digest of a session id to when the session ends, in
``time.monotonic()`` seconds (one clock for every process on a machine: Linux's
``CLOCK_MONOTONIC``). No table ever holds a session id. Both keep at most ``limit`` sessions, the
oldest leaving first, and a session found ended is dropped.

The shared file (made by the group in a private temporary folder, removed when the group
stops, so a restart logs everyone out as a single process's memory does): an 8-byte
generation, then one 40-byte record per session (digest, end), oldest first. Every change is
made under an exclusive ``flock`` on a fresh read of the file and bumps the generation; a
lookup reads the generation under a shared ``flock`` and re-reads the records only when it
moved, so a check costs one lock and an 8-byte read. A thread lock keeps this process's threads
apart, which a ``flock`` does not.

The database's table (``dashboard_sessions``: the digest, when it was made, when it ends on the
database's clock) is read on every check, one indexed row, so a logout on one instance refuses
the cookie on every other at once. The ends a caller gives and gets back are still this
process's ``time.monotonic()``: they are turned into seconds left at the boundary, and the end is
kept on the database's clock, the one every host shares. Unlike the memory and the file, the
database keeps its sessions across a restart of the instances (they end when they expire or
are logged out); a database out of reach refuses every check (``DatabaseUnreachable``: 503).
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager

_GEN = struct.Struct("<Q")
_REC = struct.Struct("<32sd")


class MemoryTable:
    """The sessions of one process."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._live: OrderedDict[bytes, float] = OrderedDict()

    def add(self, digest: bytes, ends: float) -> None:
        with self._lock:
            self._live[digest] = ends
            while len(self._live) > self.limit:
                self._live.popitem(last=False)

    def ends(self, digest: bytes) -> float | None:
        with self._lock:
            return self._live.get(digest)

    def drop(self, digest: bytes) -> None:
        with self._lock:
            self._live.pop(digest, None)


class SharedTable:
    """The sessions of every process that opens the same file."""

    def __init__(self, path: str, limit: int):
        self.path = path
        self.limit = limit
        self._lock = threading.Lock()
        self._gen: int | None = None
        self._live: dict[bytes, float] = {}

    @contextmanager
    def _locked(self, how: int):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, how)
            yield fd
        finally:
            os.close(fd)  # and with it the flock

    @staticmethod
    def _read(fd: int) -> tuple[int, OrderedDict]:
        raw = os.pread(fd, os.fstat(fd).st_size, 0)
        if len(raw) < _GEN.size:
            return 0, OrderedDict()
        gen = _GEN.unpack_from(raw)[0]
        body = raw[_GEN.size : len(raw) - (len(raw) - _GEN.size) % _REC.size]
        return gen, OrderedDict(_REC.iter_unpack(body))

    def _change(self, change) -> None:
        """Apply ``change`` to a fresh read of the sessions and write them back with the next
        generation."""
        with self._lock, self._locked(fcntl.LOCK_EX) as fd:
            gen, live = self._read(fd)
            change(live)
            while len(live) > self.limit:
                live.popitem(last=False)
            data = _GEN.pack(gen + 1) + b"".join(_REC.pack(d, e) for d, e in live.items())
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            self._gen, self._live = gen + 1, dict(live)

    def add(self, digest: bytes, ends: float) -> None:
        def put(live):
            live.pop(digest, None)
            live[digest] = ends

        self._change(put)

    def ends(self, digest: bytes) -> float | None:
        with self._lock, self._locked(fcntl.LOCK_SH) as fd:
            raw = os.pread(fd, _GEN.size, 0)
            gen = _GEN.unpack(raw)[0] if len(raw) == _GEN.size else 0
            if gen != self._gen:
                self._gen, live = self._read(fd)
                self._live = dict(live)
            return self._live.get(digest)

    def drop(self, digest: bytes) -> None:
        self._change(lambda live: live.pop(digest, None))


class DatabaseTable:
    """The sessions of every instance on one database (a ``pg.Database``)."""

    def __init__(self, db, limit: int):
        self.db = db
        self.limit = limit

    def _migrated(self) -> None:
        from panelist.metrics.store import pgschema

        pgschema.ensure(self.db)

    def add(self, digest: bytes, ends: float) -> None:
        self._migrated()
        left = max(0.0, ends - time.monotonic())

        def put(conn):
            conn.execute(
                "INSERT INTO dashboard_sessions (digest, until) "
                "VALUES (%s, clock_timestamp() + make_interval(secs => %s)) "
                "ON CONFLICT (digest) DO UPDATE SET until = EXCLUDED.until",
                (digest, left),
            )
            # the ended ones, and past the limit the oldest
            conn.execute(
                "DELETE FROM dashboard_sessions WHERE until <= clock_timestamp() OR digest IN "
                "(SELECT digest FROM dashboard_sessions ORDER BY made DESC OFFSET %s)",
                (self.limit,),
            )

        self.db.transaction(put)

    def ends(self, digest: bytes) -> float | None:
        self._migrated()
        rows = self.db.execute(
            "SELECT extract(epoch FROM until - clock_timestamp()) FROM dashboard_sessions "
            "WHERE digest = %s",
            (digest,),
        )
        return None if not rows else time.monotonic() + float(rows[0][0])

    def drop(self, digest: bytes) -> None:
        self._migrated()
        self.db.execute("DELETE FROM dashboard_sessions WHERE digest = %s", (digest,))

    def close(self) -> None:
        self.db.close()
