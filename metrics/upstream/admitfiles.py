"""Admission's shared state in the data folder (``FileStore``): a scope's slot files and rate
log (``Files``), an endpoint's pause file. What they mean, and why a ``flock`` is enough between
the processes of one machine, is told in ``admission``; ``admitdb`` holds the same state in
PostgreSQL for instances on several machines.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
import time
from pathlib import Path
from urllib.parse import quote

from panelist.metrics.store import configfile, jsonwire

MAX_WHY = 200

_HEAD = struct.Struct("<II")  # ring capacity, index of the oldest entry
_TIME = struct.Struct("<d")


class Files:
    """One scope's folder: its slot files and rate log, opened once and kept open."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.lock = threading.Lock()  # slot descriptors and which of them this holds
        self.rate_lock = threading.Lock()  # flock does not keep this process's threads apart
        self.slots: dict[int, int] = {}
        self.held: set[int] = set()
        self.rate_fd: int | None = None
        self._made = False

    def _open(self, name: str) -> int:
        if not self._made:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._made = True
        return os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o600)

    def _slot_fd(self, i: int) -> int:
        fd = self.slots.get(i)
        if fd is None:
            fd = self.slots[i] = self._open(f"slot-{i}")
        return fd

    def take(self, n: int) -> int | None:
        """Hold a free slot below ``n`` without waiting: its index, or None when all are held."""
        with self.lock:
            for i in range(n):
                if i in self.held:
                    continue
                fd = self._slot_fd(i)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                self.held.add(i)
                return i
        return None

    def give(self, i: int) -> None:
        with self.lock:
            if i in self.held:
                fcntl.flock(self.slots[i], fcntl.LOCK_UN)
                self.held.discard(i)

    def in_use(self, n: int) -> int:
        """How many of the first ``n`` slots are held now, by any process."""
        busy = 0
        with self.lock:
            for i in range(n):
                if i in self.held:
                    busy += 1
                    continue
                fd = self._slot_fd(i)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    busy += 1
                else:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        return busy

    # -- the rate log; the caller holds rate_lock and the flock -------------------------------
    def rate(self) -> int:
        if self.rate_fd is None:
            self.rate_fd = self._open("rate")
        return self.rate_fd

    def ring(self, rpm: int) -> tuple[tuple[int, int], float]:
        """((where the next time goes, the ring's size), the time of the ``rpm``-th latest
        admission, 0 if none).
        The ring grows to the largest rpm it has served and never shrinks, so a limit lowered and
        raised again still sees every call of the window."""
        fd = self.rate()
        raw = os.pread(fd, _HEAD.size, 0)
        capacity, head = _HEAD.unpack(raw) if len(raw) == _HEAD.size else (0, 0)
        if capacity < rpm or head >= capacity:
            capacity, head = self._grow(fd, capacity, rpm), 0
        at = (head - rpm) % capacity
        raw = os.pread(fd, _TIME.size, _HEAD.size + at * _TIME.size)
        return (head, capacity), (_TIME.unpack(raw)[0] if len(raw) == _TIME.size else 0.0)

    @staticmethod
    def _grow(fd: int, capacity: int, rpm: int) -> int:
        # rewritten oldest first with room in front, so the next time goes to index 0
        raw = os.pread(fd, capacity * _TIME.size, _HEAD.size) if capacity else b""
        times = sorted(t for (t,) in _TIME.iter_unpack(raw[: len(raw) - len(raw) % _TIME.size]))
        size = max(rpm, capacity)
        times = [0.0] * (size - len(times)) + times
        os.pwrite(fd, _HEAD.pack(size, 0) + b"".join(_TIME.pack(t) for t in times), 0)
        os.ftruncate(fd, _HEAD.size + size * _TIME.size)
        return size

    def record(self, place: tuple[int, int], at: float) -> None:
        # the time first, the head after: a crash between leaves a time the next call overwrites,
        # of a call that was never made (its process died before making it)
        head, capacity = place
        os.pwrite(self.rate(), _TIME.pack(at), _HEAD.size + head * _TIME.size)
        os.pwrite(self.rate(), _HEAD.pack(capacity, (head + 1) % capacity), 0)

    def recent(self, since: float) -> int:
        """Admissions recorded after ``since`` (for a status line)."""
        raw = os.pread(self.rate(), 1 << 24, _HEAD.size)
        raw = raw[: len(raw) - len(raw) % _TIME.size]
        return sum(1 for (t,) in _TIME.iter_unpack(raw) if t > since)

    def close(self) -> None:
        with self.lock:
            for fd in self.slots.values():
                os.close(fd)
            self.slots.clear()
            self.held.clear()
            if self.rate_fd is not None:
                os.close(self.rate_fd)
                self.rate_fd = None


class FileStore:
    """Slots, rate logs and pauses under ``runs/admission/`` of one data folder."""

    # a slot freed by another process is seen only by looking: a poll from 2 ms doubling to 50 ms
    poll = (0.002, 0.05)

    def __init__(self, root: Path):
        self.root = Path(root)
        self._lock = threading.Lock()
        self._files: dict[Path, Files] = {}
        self._pauses: dict[str, tuple[tuple, float, str]] = {}

    def _folder(self, kind: str, name: str, endpoint: str | None = None) -> Path:
        if kind == "endpoint":
            return self.root / name
        assert endpoint is not None  # a model's folder is inside its endpoint's
        return self.root / endpoint / "models" / quote(name, safe="")

    def scope(self, kind: str, name: str, endpoint: str) -> Files:
        """The state of one limited scope: ``take``, ``give`` and ``in_use`` of its slots."""
        folder = self._folder(kind, name, endpoint)
        files = self._files.get(folder)
        if files is None:
            with self._lock:
                files = self._files.setdefault(folder, Files(folder))
        return files

    def rate(self, scopes, at: float, span: float, *, record: bool):
        """``(seconds until every scope has room at ``at`` (0: now), the scope waiting
        longest, ``at``)``; with ``record``, a call that fits is written to every log in the same step.
        ``scopes``: objects with ``.limits.rpm`` and ``.state`` (this store's ``Files``)."""
        with contextlib.ExitStack() as stack:
            rings = []
            for s in scopes:  # always the model's before the endpoint's: no deadlock
                stack.enter_context(s.state.rate_lock)
                fd = s.state.rate()
                fcntl.flock(fd, fcntl.LOCK_EX)
                stack.callback(fcntl.flock, fd, fcntl.LOCK_UN)
                rings.append((s, *s.state.ring(s.limits.rpm)))
            later, scope = max(
                ((oldest + span - at, s) for s, _, oldest in rings), key=lambda pair: pair[0]
            )
            if later > 0:
                return later, scope, at
            if record:
                for s, place, _ in rings:
                    s.state.record(place, at)
            return 0.0, None, at

    def recent(self, state: Files, since: float) -> int:
        with state.rate_lock:
            fd = state.rate()
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                return state.recent(since)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def pause(self, endpoint: str, until: float, seconds: float, why: str) -> None:
        """Pause ``endpoint`` until ``until`` unless a pause already lasts longer."""
        folder = self._folder("endpoint", endpoint)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "pause.json"
        with configfile.flocked(folder / "pause.lock"):
            current = _read_pause(path)
            if current is not None and current[0] >= until:
                return
            configfile.write_atomic(
                path,
                {
                    "v": 1,
                    "until": until,
                    "seconds": round(seconds, 3),
                    "why": jsonwire.clean(str(why))[:MAX_WHY],
                    "ts": configfile.now_iso(),
                },
            )

    def resume(self, endpoint: str) -> bool:
        folder = self._folder("endpoint", endpoint)
        if not folder.is_dir():
            return False
        with configfile.flocked(folder / "pause.lock"):
            try:
                (folder / "pause.json").unlink()
            except FileNotFoundError:
                return False
        return True

    def paused(self, endpoint: str) -> tuple[float, str]:
        """(seconds the endpoint's pause has left, why); (0, "") when none. One ``stat`` when
        nothing changed since the last look."""
        path = self.root / endpoint / "pause.json"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return 0.0, ""
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._pauses.get(endpoint)
        if cached is None or cached[0] != stamp:
            read = _read_pause(path) or (0.0, "")
            cached = self._pauses[endpoint] = (stamp, *read)
        return max(0.0, cached[1] - time.time()), cached[2]

    def close(self) -> None:
        with self._lock:
            files, self._files = list(self._files.values()), {}
        for f in files:
            f.close()


def _read_pause(path: Path) -> tuple[float, str] | None:
    try:
        with open(path, "rb") as f:
            doc = jsonwire.loads(f.read())
        return float(doc["until"]), str(doc.get("why") or "")
    except (OSError, ValueError, KeyError, TypeError):
        return None
