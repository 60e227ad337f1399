"""JSONL files: locked appends that are whole or invisible, and readers that never take a torn
last line for a record: a tail follower (``Tail``), the raw lines of a log (``lines``), lookups
by byte offset (``read_line``, ``read_lines``) and the one reader that walks a log from its end,
newest record first (``backward``).

Invariants:

* One record per line. Each append is written under an exclusive ``flock`` (``write_held``), so
  two processes never interleave.
* An append is whole or invisible: a writer killed mid-write leaves a torn tail (bytes past the
  last newline), which no reader takes for a line and which the next append cuts off before it
  writes, so no record is ever glued to one and torn bytes never stay in the file.
* Hence a byte before the file's last newline never changes again, while what lies past it may
  still be written, or cut off and written over. Readers read only up to a newline they saw
  before reading (``Tail``, ``lines``, ``backward``) or at offsets an index got from a whole line
  (``read_line``), and skip lines that do not parse (older versions closed a torn line off
  with a newline instead of cutting it).
* Every line's timestamp is ``utc_iso`` (UTC, milliseconds, ``Z``) unless a person reads the
  log, then ``utc_second``.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path

from panelist.metrics.store import jsonwire

SCHEMA = 1
BLOCK = 64 * 1024  # read size when walking a file backwards


def dumps(record: dict) -> bytes:
    # jsonwire: a stray surrogate becomes U+FFFD instead of costing the whole record
    return jsonwire.encode(record, separators=(",", ":")) + b"\n"


class Appender:
    """Appends to one file through a descriptor kept open; safe across threads and processes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # read-write so the torn-line check can pread the last byte without another open
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._end: int | None = None  # where our last append ended, in a newline

    def append(self, *records: dict) -> int:
        """Write the records as one block; returns the byte offset where the first one starts."""
        return self.write_lines([dumps(r) for r in records])

    def write_lines(self, lines: list[bytes]) -> int:
        """``append`` of records already encoded by ``dumps``."""
        data = lines[0] if len(lines) == 1 else b"".join(lines)  # one line: never copied
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                self._end, end = None, self._end
                start = write_held(self._fd, data, end)
                self._end = start + len(data)
                return start
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


def write_held(fd: int, data: bytes, whole_at: int | None = None) -> int:
    """Append ``data`` (whole lines) to ``fd``, opened ``O_RDWR | O_APPEND``, whose exclusive
    ``flock`` the caller holds; returns the offset where ``data`` starts. ``whole_at``: where
    the caller's own last append ended; a file still that size ends in its newline (bytes
    before a file's last newline never change), so its last byte need not be read.

    Why one ``write()`` can tear: write(2) on a regular file copies the buffer into the page
    cache a chunk at a time (a folio, 2 MiB on ext4) and checks for a fatal signal between
    chunks; on SIGKILL it returns the bytes copied so far, and the process dies before it could
    ask for the rest. Those chunks stay in the file: no write size is atomic against that
    (measured: 16 MB writes killed as the file began to grow were left at a multiple of 2 MiB,
    19 times in 20). So the repair is here, under the lock every writer holds while it writes: a
    tail that does not end in a newline belongs to a writer that died, and is cut back to the
    last newline before this append, which then starts a line. A write failing here (ENOSPC,
    EFBIG, an interrupt) takes its own torn line back at once; whole lines of the block stay,
    as for a crash."""
    end = os.fstat(fd).st_size
    if end and end != whole_at and os.pread(fd, 1, end - 1) != b"\n":
        end = complete_end(fd, end)
        os.ftruncate(fd, end)
    view = memoryview(data)
    try:
        while view:  # a short write (a size limit, a full disk) is followed by the rest
            view = view[os.write(fd, view) :]
    except BaseException:
        try:  # from the file, not from ``view``: an interrupt may land before it is updated
            os.ftruncate(fd, complete_end(fd, os.fstat(fd).st_size, end))
        except OSError:
            pass  # the next append cuts it off instead
        raise
    return end


_SECOND = [(-1, "")]  # (second, its formatted date and time): lines come many to a second


def utc_iso(t: float) -> str:
    """``2025-01-31T12:00:00.123Z``: the timestamp form of every JSONL line."""
    s, ms = divmod(int(t * 1000), 1000)
    cached = _SECOND[0]
    if cached[0] != s:
        cached = _SECOND[0] = (s, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)))
    return f"{cached[1]}.{ms:03d}Z"


def utc_second(t: float) -> str:
    """``2026-11-30T12:00:00Z``: a timestamp to the second, for logs a person reads (alerts,
    the schedule's runs, the onboarding queue)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def stamp(path: Path) -> tuple[int, int]:
    """A followed file's size and modification time, (0, 0) when it does not exist: a reader
    that saw the same stamp has nothing new to read."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (0, 0)
    return (st.st_size, st.st_mtime_ns)


class Tail:
    """Follows a file from a byte offset, yielding each complete, parseable line once."""

    def __init__(self, path: Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset

    def read(self):
        """Yield ``(offset, record)`` for the lines appended since the last call."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            if os.fstat(f.fileno()).st_size < self.offset:  # replaced or truncated: start over
                self.offset = 0
            for start, line in _whole_lines(f, self.offset):
                self.offset = start + len(line)
                record = parse_line(line)
                if record is not None:
                    yield start, record


def lines(path: Path, offset: int = 0):
    """Yield ``(offset, line)`` for each whole line of the file from ``offset`` on, as bytes
    ending in ``"\n"``: the way to stream a log forward without parsing every line. Nothing
    for a missing file."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        yield from _whole_lines(f, offset)


def _whole_lines(f, offset: int):
    """The lines of ``f`` from ``offset`` up to the last newline found before reading them.

    Only that much is final. Past the last newline lies a line still being written, or a torn
    tail that the next append cuts off and writes over, maybe while we read it: the tail's start
    and the new line's end would make one "line", which may even parse, and the new record would
    be lost to a follower."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    if size <= offset:
        return
    end = size if os.pread(fd, 1, size - 1) == b"\n" else complete_end(fd, size, offset)
    f.seek(offset)
    pos = offset
    for line in f:
        if pos >= end or not line.endswith(b"\n"):
            return
        yield pos, line
        pos += len(line)


def read_line(path: Path, offset: int) -> dict | None:
    """The one record starting at ``offset``, or None if there is none whole."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            line = f.readline()
    except FileNotFoundError:
        return None
    return parse_line(line)


def read_lines(path: Path, offsets: list[int]) -> list[dict | None]:
    """The records starting at ``offsets``, in that order (one open for all); None for an
    offset with no whole record."""
    out: list[dict | None] = []
    if not offsets:
        return out
    with open(path, "rb") as f:
        for offset in offsets:
            f.seek(offset)
            out.append(parse_line(f.readline()))
    return out


def backward(path: Path, *, within: int | None = None):
    """Yield the records of a JSONL file newest first, reading blocks from its end, so a reader
    that stops after a few pays for those few, however long the file has grown.

    An unfinished last line is left to its writer and a line that does not parse is skipped, as
    ``Tail`` does. ``within``: look back no further than that many bytes from the last whole
    line (a line cut by that bound is not yielded). A missing file yields nothing."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        pos = complete_end(f.fileno(), os.fstat(f.fileno()).st_size)
        floor = 0 if within is None else max(0, pos - within)
        rest = b""  # the start of a line whose beginning lies in an earlier block
        while pos > floor:
            step = min(BLOCK, pos - floor)
            pos -= step
            f.seek(pos)
            lines = (f.read(step) + rest).split(b"\n")
            rest = lines.pop(0) if pos > 0 else b""
            for line in reversed(lines):
                record = parse_line(line + b"\n") if line else None
                if record is not None:
                    yield record


def complete_end(fd: int, size: int, floor: int = 0) -> int:
    """The offset just past the last newline among the bytes ``floor`` to ``size`` of ``fd``
    (``floor`` if there is none): what follows it is unfinished or torn."""
    pos = size
    while pos > floor:
        step = min(BLOCK, pos - floor)
        pos -= step
        i = os.pread(fd, step, pos).rfind(b"\n")
        if i >= 0:
            return pos + i + 1
    return floor


def parse_line(line: bytes) -> dict | None:
    """One whole line's record, or None for a torn, unparseable or non-object line."""
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
