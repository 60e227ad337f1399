"""Admission: how many calls an endpoint (or a model) takes at once and per minute, counted across
every process on the data folder.

The limits are the roster's (``max_concurrent`` and ``rpm`` on an endpoint, and optionally on a
model); an endpoint with none, serving a model with none, is not managed at all: ``slot`` and
``has_room`` open no file and cost a dictionary lookup. For a managed one, each limited scope (the
endpoint, the model) has a folder ``runs/admission/<endpoint>/`` (a model's:
``runs/admission/<endpoint>/models/<alias, %-quoted>/``) holding:

* ``slot-<i>`` for i below ``max_concurrent``: a call holds an exclusive ``flock`` on one of them
  while it runs. A lock belongs to the open file, so a process that dies (even by SIGKILL)
  releases its slots by itself, and at most ``max_concurrent`` calls hold one at any moment.
  Lowering the limit takes effect as the calls holding the higher slots end.
* ``rate``: the latest admission times (a ring of wall-clock seconds, as long as the largest rpm
  it has served), read and written under an exclusive ``flock``. A call is admitted at ``t`` only
  if the ``rpm``-th latest of them is at least a window (60 s) and a margin (1 s) before ``t``,
  so any ``rpm + 1`` admissions span more than a whole window: calls admitted in any 60 s window
  never exceed ``rpm``, nor do their arrivals at the provider when sending takes under a second
  (strict, unlike the estimate in ``ratelimit.py``). An admission is recorded after the call's
  concurrency slot is held and right before it is sent, so the log holds when calls were sent.
  A wall clock stepped back only makes calls wait longer.
* ``pause.json`` (endpoint only): a learned ``Retry-After``, ``{"until", "seconds", "why"}``.
  Until then no call to the endpoint is admitted, in any process. A later pause extends it, an
  earlier one never shortens it. A pause applies to an endpoint that has a limit of its own; an
  unmanaged endpoint is rested per model by the gateway's cooldown instead.

Nothing else is written: no prompt, no key, no header. Clocks: wall-clock (``time.time``) for
what processes share, ``time.monotonic`` for a caller's own wait.

Waiting never spins. Within one ``Admission``, callers of the same scope queue first come, first
served, and only the first in line tries; the others sleep on a condition. Between processes
there is no order: whoever finds a free slot first takes it. The first in line sleeps until the
pause ends or the rate window lets the next call in (both are known times), and for a slot,
sleeps on the condition, which a slot released in this process signals at once; a slot released
by another process is noticed by polling with a backoff from 2 ms doubling to 50 ms.
A ``cancel`` event ends a wait with ``errors.Cancelled``: a sleep until a known time waits on the
event itself, and a sleep on the condition lasts at most ``TICK`` when one is given. A wait that
cannot succeed in time (the pause or the rate window ends after it) fails at once with
``errors.AtLimit`` instead of sleeping to its end.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from panelist.metrics.store import configfile, jsonwire
from panelist.metrics.errors import AtLimit, Cancelled
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import CallLimits, Roster

WINDOW = 60.0          # seconds an rpm counts over
SEND_MARGIN = 1 / 60   # of the window (1 s a minute) between an admission and its arrival
TICK = 0.05            # the longest a waiter with a cancel event sleeps before looking at it
POLL_MIN, POLL_MAX = 0.002, 0.05   # backoff of the poll for a slot freed by another process
UNKNOWN_WAIT = 1.0     # the Retry-After guessed when only a running call ending makes room
MAX_WHY = 200

_HEAD = struct.Struct("<II")    # ring capacity, index of the oldest entry
_TIME = struct.Struct("<d")


@dataclass(frozen=True)
class Admitted:
    """A call let in: when (wall-clock seconds, what the rate log holds) and after how long."""

    endpoint: str
    model: str
    at: float
    waited: float


class _Files:
    """One scope's folder: its slot files and rate log, opened once and kept open."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.lock = threading.Lock()        # slot descriptors and which of them this holds
        self.rate_lock = threading.Lock()   # flock does not keep this process's threads apart
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
        fd = self.rate_fd
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
        times = sorted(t for (t,) in _TIME.iter_unpack(raw[:len(raw) - len(raw) % _TIME.size]))
        size = max(rpm, capacity)
        times = [0.0] * (size - len(times)) + times
        os.pwrite(fd, _HEAD.pack(size, 0) + b"".join(_TIME.pack(t) for t in times), 0)
        os.ftruncate(fd, _HEAD.size + size * _TIME.size)
        return size

    def record(self, place: tuple[int, int], at: float) -> None:
        # the time first, the head after: a crash between leaves a time the next call overwrites,
        # of a call that was never made (its process died before making it)
        head, capacity = place
        os.pwrite(self.rate_fd, _TIME.pack(at), _HEAD.size + head * _TIME.size)
        os.pwrite(self.rate_fd, _HEAD.pack(capacity, (head + 1) % capacity), 0)

    def recent(self, since: float) -> int:
        """Admissions recorded after ``since`` (for a status line)."""
        raw = os.pread(self.rate_fd, 1 << 24, _HEAD.size)
        raw = raw[:len(raw) - len(raw) % _TIME.size]
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


@dataclass(frozen=True)
class _Scope:
    kind: str          # endpoint | model
    name: str
    limits: CallLimits
    files: _Files

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.name}'"

    @property
    def fix(self) -> str:
        return f"`panelist {self.kind} limit {self.name}`"


class _Line:
    """The callers of one process waiting for one scope, first come first served."""

    def __init__(self):
        self.cond = threading.Condition()
        self.queue: deque[object] = deque()


class Admission:
    """Admits model calls for one data folder. Build one per server (or race); it keeps the slot
    and rate files of the scopes it has used open until ``close``."""

    def __init__(self, home: Home, *, window: float = WINDOW):
        """``window``: the seconds an ``rpm`` counts over; 60 but for tests and benchmarks,
        which shorten it (every process on a folder must then use the same)."""
        self.home = home
        self.root = home.admission_state
        self.window = float(window)
        self.roster = Roster(home)
        self._lock = threading.Lock()
        self._files: dict[Path, _Files] = {}
        self._lines: dict[tuple, _Line] = {}
        self._by_endpoint: dict[str, list[_Line]] = {}
        self._pauses: dict[str, tuple[tuple, float, str]] = {}

    def close(self) -> None:
        with self._lock:
            files, self._files = list(self._files.values()), {}
        for f in files:
            f.close()

    # -- the interface ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def slot(self, endpoint: str, model: str, *, wait: float,
             cancel: threading.Event | None = None):
        """Hold one slot for a call of ``model`` (a roster alias) on ``endpoint`` while the block
        runs, admitted within ``wait`` seconds; yields an ``Admitted``. Raises ``AtLimit`` when
        no slot came in time (at once when none can: a pause or rate window ending later) and
        ``Cancelled`` when ``cancel`` was set while waiting."""
        t0 = time.monotonic()
        scopes = self._scopes(endpoint, model)
        if not scopes:
            yield Admitted(endpoint, model, time.time(), 0.0)
            return
        taken, at = self._admit(endpoint, model, t0 + max(0.0, wait), cancel)
        try:
            yield Admitted(endpoint, model, at, time.monotonic() - t0)
        finally:
            self._give(endpoint, taken)

    def has_room(self, endpoint: str, model: str) -> bool:
        """Whether a call of ``model`` on ``endpoint`` would be admitted now, without waiting
        (not paused, nobody of this process queued for it, a free slot, room in the window)."""
        scopes = self._scopes(endpoint, model)
        if not scopes:
            return True
        if any(s.kind == "endpoint" for s in scopes) and self._paused(endpoint)[0] > 0:
            return False
        line = self._lines.get(self._line_key(endpoint, model, scopes))
        if line is not None and line.queue:
            return False
        for s in scopes:
            n = s.limits.max_concurrent
            if n is not None and s.files.in_use(n) >= n:
                return False
        return self._rate(scopes, time.time(), record=False)[0] == 0.0

    def pause(self, endpoint: str, seconds: float, why: str) -> bool:
        """Admit no call to ``endpoint`` for ``seconds`` (a learned Retry-After), in every
        process; ``why`` is kept beside it. False (nothing recorded) when the endpoint has no
        limit of its own."""
        if seconds <= 0 or endpoint not in self.roster.view().endpoint_limits:
            return False
        until = time.time() + seconds
        folder = self._folder("endpoint", endpoint)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "pause.json"
        with configfile.flocked(folder / "pause.lock"):
            current = _read_pause(path)
            if current is not None and current[0] >= until:
                return True
            configfile.write_atomic(path, {
                "v": 1, "until": until, "seconds": round(seconds, 3),
                "why": jsonwire.clean(str(why))[:MAX_WHY], "ts": configfile.now_iso()})
        return True

    def resume(self, endpoint: str) -> bool:
        """End a pause of ``endpoint`` early; False when it was not paused."""
        folder = self._folder("endpoint", endpoint)
        if not folder.is_dir():
            return False
        with configfile.flocked(folder / "pause.lock"):
            try:
                (folder / "pause.json").unlink()
            except FileNotFoundError:
                return False
        return True

    def status(self, kind: str, name: str) -> dict:
        """What the limits of one endpoint or model are and how they are used now: calls
        running, calls admitted in the last window, and a pause (endpoint only)."""
        view = self.roster.view()
        if kind == "endpoint":
            limits = view.endpoint_limits.get(name, CallLimits())
            endpoint = name
        else:
            limits = view.model_limits.get(name, CallLimits())
            endpoint = view.models[name].endpoint if name in view.models else ""
        out = dict(limits.public(), running=None, admitted_last_window=None, paused=None)
        if not limits:
            return out
        files = self._files_for(self._folder(kind, name, endpoint))
        if limits.max_concurrent is not None:
            out["running"] = files.in_use(limits.max_concurrent)
        if limits.rpm is not None:
            with files.rate_lock:
                fd = files.rate()
                fcntl.flock(fd, fcntl.LOCK_SH)
                try:
                    out["admitted_last_window"] = files.recent(time.time() - self.window)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        if kind == "endpoint":
            left, why = self._paused(name)
            if left > 0:
                out["paused"] = {"seconds_left": round(left, 1), "why": why}
        return out

    def waiting(self, endpoint: str) -> int:
        """Callers of this ``Admission`` queued for a slot on ``endpoint`` now."""
        with self._lock:
            lines = list(self._by_endpoint.get(endpoint, ()))
        return sum(len(line.queue) for line in lines)

    # -- inside -------------------------------------------------------------------------------
    def _folder(self, kind: str, name: str, endpoint: str | None = None) -> Path:
        if kind == "endpoint":
            return self.root / name
        return self.root / endpoint / "models" / quote(name, safe="")

    def _files_for(self, folder: Path) -> _Files:
        files = self._files.get(folder)
        if files is None:
            with self._lock:
                files = self._files.setdefault(folder, _Files(folder))
        return files

    def _scopes(self, endpoint: str, model: str) -> list[_Scope]:
        """The limited scopes a call goes through, the model's first (the order every process
        locks them in)."""
        view = self.roster.view()
        scopes = []
        limits = view.model_limits.get(model)
        if limits:
            scopes.append(_Scope("model", model, limits,
                                 self._files_for(self._folder("model", model, endpoint))))
        limits = view.endpoint_limits.get(endpoint)
        if limits:
            scopes.append(_Scope("endpoint", endpoint, limits,
                                 self._files_for(self._folder("endpoint", endpoint))))
        return scopes

    @staticmethod
    def _line_key(endpoint: str, model: str, scopes: list[_Scope]) -> tuple:
        # a model with limits of its own queues apart, so it never holds up its endpoint's
        # other models (nor they it) while it waits for its own slot
        if any(s.kind == "model" for s in scopes):
            return (endpoint, model)
        return (endpoint,)

    def _line(self, key: tuple) -> _Line:
        with self._lock:
            line = self._lines.get(key)
            if line is None:
                line = self._lines[key] = _Line()
                self._by_endpoint.setdefault(key[0], []).append(line)
            return line

    def _admit(self, endpoint: str, model: str, deadline: float,
               cancel: threading.Event | None) -> tuple[list, float]:
        scopes = self._scopes(endpoint, model)
        line = self._line(self._line_key(endpoint, model, scopes))
        me = object()
        with line.cond:
            line.queue.append(me)
        try:
            poll = POLL_MIN
            while True:
                _check(cancel, endpoint)
                with line.cond:
                    while line.queue[0] is not me:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise AtLimit(f"{scopes[0].label} is at its limit: "
                                          f"{len(line.queue) - 1} call(s) of this process were "
                                          "waiting for it first; try again later or raise it "
                                          f"with {scopes[0].fix}", UNKNOWN_WAIT)
                        line.cond.wait(min(left, TICK) if cancel is not None else left)
                        _check(cancel, endpoint)
                scopes = self._scopes(endpoint, model)   # the limits may have changed
                if not scopes:
                    return [], time.time()
                left = deadline - time.monotonic()
                if any(s.kind == "endpoint" for s in scopes):
                    rest, why = self._paused(endpoint)
                    if rest > 0:
                        if rest > left:
                            raise AtLimit(f"endpoint '{endpoint}' is at its limit: paused for "
                                          f"{math.ceil(rest)} s more after the upstream asked "
                                          f"to wait ({why}); try again then", rest)
                        _sleep(rest, cancel, endpoint)
                        continue
                taken, full = self._take(scopes)
                if full is not None:
                    if left <= 0:
                        raise AtLimit(f"{full.label} is at its limit of "
                                      f"{full.limits.max_concurrent} call(s) at once and none "
                                      "ended in time; try again later or raise it with "
                                      f"{full.fix}", UNKNOWN_WAIT)
                    with line.cond:   # a slot given back in this process wakes this at once
                        line.cond.wait(min(poll, left))
                    poll = min(poll * 2, POLL_MAX)
                    continue
                at = time.time()
                later, rpm = self._rate(scopes, at, record=True)
                if later > 0:
                    self._give(endpoint, taken)
                    if later > left:
                        raise AtLimit(f"{rpm.label} is at its limit of {rpm.limits.rpm} call(s) "
                                      f"a minute; the next may start in {math.ceil(later)} s, "
                                      "after this call's wait; try again then or raise it with "
                                      f"{rpm.fix}", later)
                    _sleep(later, cancel, endpoint)
                    poll = POLL_MIN
                    continue
                return taken, at
        finally:
            with line.cond:
                line.queue.remove(me)
                line.cond.notify_all()

    def _take(self, scopes: list[_Scope]) -> tuple[list, _Scope | None]:
        """A slot in every scope that limits concurrency, or none and the scope that is full."""
        taken = []
        for s in scopes:
            n = s.limits.max_concurrent
            if n is None:
                continue
            i = s.files.take(n)
            if i is None:
                for files, j in taken:
                    files.give(j)
                return [], s
            taken.append((s.files, i))
        return taken, None

    def _give(self, endpoint: str, taken: list) -> None:
        if not taken:
            return
        for files, i in taken:
            files.give(i)
        with self._lock:
            lines = list(self._by_endpoint.get(endpoint, ()))
        for line in lines:
            with line.cond:
                line.cond.notify_all()

    def _rate(self, scopes: list[_Scope], at: float, *,
              record: bool) -> tuple[float, _Scope | None]:
        """Seconds until every rpm scope has room for one more call at ``at`` (0: room now) and
        the scope that waits longest; with ``record``, a call that fits is written to every
        scope's log in the same step."""
        limited = [s for s in scopes if s.limits.rpm is not None]
        if not limited:
            return 0.0, None
        with contextlib.ExitStack() as stack:
            rings = []
            for s in limited:   # always the model's before the endpoint's: no deadlock
                stack.enter_context(s.files.rate_lock)
                fd = s.files.rate()
                fcntl.flock(fd, fcntl.LOCK_EX)
                stack.callback(fcntl.flock, fd, fcntl.LOCK_UN)
                rings.append((s, *s.files.ring(s.limits.rpm)))
            # a call reaches the provider a little after it is admitted, by a delay that varies
            # (a connection, a busy CPU); the margin keeps the provider's own count of any
            # window within rpm too, not only ours
            span = self.window * (1 + SEND_MARGIN)
            later, scope = max(((oldest + span - at, s) for s, _, oldest in rings),
                               key=lambda pair: pair[0])
            if later > 0:
                return later, scope
            if record:
                for s, place, _ in rings:
                    s.files.record(place, at)
            return 0.0, None

    def _paused(self, endpoint: str) -> tuple[float, str]:
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


def _read_pause(path: Path) -> tuple[float, str] | None:
    try:
        with open(path, "rb") as f:
            doc = jsonwire.loads(f.read())
        return float(doc["until"]), str(doc.get("why") or "")
    except (OSError, ValueError, KeyError, TypeError):
        return None




def _check(cancel: threading.Event | None, endpoint: str) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"cancelled while waiting for a slot on endpoint '{endpoint}'")


def _sleep(seconds: float, cancel: threading.Event | None, endpoint: str) -> None:
    if cancel is None:
        time.sleep(seconds)
    else:
        cancel.wait(seconds)   # an Event's wait ends the moment it is set
        _check(cancel, endpoint)
