"""JSONL files: locked single-write appends and tail readers that tolerate a torn last line.

Invariants: one record per line; each append is one ``write()`` made under an exclusive
``flock``, so two processes never interleave; a line left without its newline by a crash is
closed off before the next append, so it spoils only itself. Readers skip lines that do not
parse and never consume a last line that has no newline yet (its writer may still be busy).
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


def parse_line(line: bytes) -> dict | None:
    """One whole line's record, or None for a torn, unparseable or non-object line."""
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
