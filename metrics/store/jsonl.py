"""JSONL files: locked single-write appends, and readers that tolerate a torn last line: a tail
follower (``Tail``), lookups by byte offset (``read_line``, ``read_lines``) and the one reader
that walks a log from its end, newest record first (``backward``).

Invariants: one record per line; each append is one ``write()`` made under an exclusive
``flock``, so two processes never interleave; a line left without its newline by a crash is
closed off before the next append, so it spoils only itself. Readers skip lines that do not
parse and never consume a last line that has no newline yet (its writer may still be busy).
Every line's timestamp is ``utc_iso`` (UTC, milliseconds, ``Z``) unless a person reads the log,
then ``utc_second``.
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
BLOCK = 64 * 1024   # read size when walking a file backwards


def dumps(record: dict) -> bytes:
    # jsonwire: a stray surrogate becomes U+FFFD instead of costing the whole record
    return (jsonwire.dumps(record, separators=(",", ":")) + "\n").encode()


class Appender:
    """Appends to one file through a descriptor kept open; safe across threads and processes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # read-write so the torn-line check can pread the last byte without another open
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)

    def append(self, *records: dict) -> int:
        """Write the records as one block; returns the byte offset where the first one starts."""
        data = b"".join(dumps(r) for r in records)
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                end = os.fstat(self._fd).st_size
                if end and os.pread(self._fd, 1, end - 1) != b"\n":
                    data = b"\n" + data  # a torn line from a crash stays a line of its own
                    end += 1
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]
                return end
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


def utc_iso(t: float) -> str:
    """``2025-01-31T12:00:00.123Z``: the timestamp form of every JSONL line."""
    s, ms = divmod(int(t * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{ms:03d}Z"


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
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return
        if size < self.offset:  # the file was replaced or truncated: start over
            self.offset = 0
        if size == self.offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            pos = self.offset
            for line in f:
                if not line.endswith(b"\n"):
                    break  # unfinished: read it next time
                start, pos = pos, pos + len(line)
                self.offset = pos
                record = parse_line(line)
                if record is not None:
                    yield start, record


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
        pos = _complete_end(f)
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


def _complete_end(f) -> int:
    """The offset just past the file's last newline: what follows is unfinished or torn."""
    pos = f.seek(0, os.SEEK_END)
    while pos > 0:
        step = min(BLOCK, pos)
        pos -= step
        f.seek(pos)
        i = f.read(step).rfind(b"\n")
        if i >= 0:
            return pos + i + 1
    return 0


def parse_line(line: bytes) -> dict | None:
    """One whole line's record, or None for a torn, unparseable or non-object line."""
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
