"""Panel ids, call ids and the panel counter: ``panels.idx`` (``PanelTable``).

A panel id is ``p{YYYYMMDD}-{seq}`` (the UTC day it was made, then its seq); a call id is
``{panel}.{seat}``. ``panels.idx`` holds 8 bytes (little-endian, unsigned) per seq: 0 while the
panel is in flight, then 1 + the byte offset of its calls.jsonl line. Its length is the panel
counter: ``reserve`` appends slots under ``flock``.

Invariants:

* An id is never handed out twice, across threads and processes: seq is a panels.idx slot, a
  slot half-written by a crash is never reserved again, and each reservation checks that the
  descriptor is still the file at that path (one ``stat``), reopening it when it was deleted or
  replaced under running processes.
* panels.idx is derived: when it is missing (or empty) beside non-empty logs it is rebuilt from
  them, each logged panel's slot pointing at its calls.jsonl line and the counter set
  ``ID_MARGIN`` past the highest seq either log names, above panels still in flight elsewhere
  (whose ids the logs cannot show yet).
* A retired descriptor stays open until ``close``: a reader may be using it at that moment, and
  a closed number could be reused by another file.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import threading
import time
from array import array
from pathlib import Path

from panelist.metrics.store import jsonl

SLOT = 8  # bytes per panels.idx slot
MAX_SEQ_DIGITS = 15  # a seq beyond this is no panel of ours (and would overflow pread)
# slots skipped when panels.idx is rebuilt: more than the panels any process can have in flight,
# whose ids the logs cannot show yet
ID_MARGIN = 4096
_PANEL_ID = re.compile(r"p(\d{8})-(\d{1,%d})" % MAX_SEQ_DIGITS)
_LOGGED_PANEL = re.compile(rb'"panel":"p\d{8}-(\d{1,%d})"' % MAX_SEQ_DIGITS)
LOGGED_PANEL_ID = re.compile(rb'"panel":"(p\d{8}-\d{1,%d})"' % MAX_SEQ_DIGITS)

ID_HELP = (
    "call ids come from a panel's reply (each seat's 'call', e.g. p20250101-7.member1) "
    "or from the list of recent panels"
)


def panel_seq(panel_id: str | None) -> int | None:
    """The panels.idx slot of a panel id, or None if it is not one."""
    m = _PANEL_ID.fullmatch(panel_id) if isinstance(panel_id, str) else None
    return int(m.group(2)) if m else None


def slots(fd: int, first: int, count: int) -> array:
    """``count`` panels.idx slots from slot ``first`` (fewer at the file's end)."""
    data = os.pread(fd, count * SLOT, first * SLOT)
    out = array("Q")
    out.frombytes(data[: len(data) - len(data) % SLOT])
    if sys.byteorder != "little":
        out.byteswap()
    return out


class PanelTable:
    """One process's descriptor on panels.idx: reserves panel ids, points finished panels at
    their calls.jsonl lines and reads slots back."""

    def __init__(self, idx_path: Path, calls_path: Path, evidence_path: Path):
        self.path = Path(idx_path)
        self._calls_path = Path(calls_path)
        self._evidence_path = Path(evidence_path)
        self._lock = threading.Lock()  # flock does not exclude threads sharing a descriptor
        self._fd = self._open()
        self._ino = os.fstat(self._fd).st_ino  # a descriptor's file never changes
        self._handed = 0  # slots this descriptor's file is known to hold (it only grows)
        self._retired: list[int] = []

    def reserve(self, count: int, now: float | None = None) -> list[str]:
        """Reserve ``count`` consecutive panel ids at once (one lock, one write)."""
        now = time.time() if now is None else now
        day = time.strftime("%Y%m%d", time.gmtime(now))
        with self._lock:
            idx = self._current()
            fcntl.flock(idx, fcntl.LOCK_EX)
            try:
                # round up: a slot half-written by a crash is never handed out again
                first = -(-os.fstat(idx).st_size // SLOT)
                os.pwrite(idx, bytes(SLOT * count), first * SLOT)
                self._handed = first + count
            finally:
                fcntl.flock(idx, fcntl.LOCK_UN)
        return [f"p{day}-{seq}" for seq in range(first, first + count)]

    def reserved(self, seq: int) -> bool:
        """Whether slot ``seq`` was handed out."""
        with self._lock:
            fd = self._current()
            if seq < self._handed:
                return True
            size = os.fstat(fd).st_size
        return (seq + 1) * SLOT <= size

    def point(self, pairs: list[tuple[int, int]]) -> None:
        """Point each ``(seq, offset)``'s slot at its calls.jsonl line."""
        with self._lock:
            idx = self._current()
            for seq, offset in pairs:
                os.pwrite(idx, (offset + 1).to_bytes(SLOT, "little"), seq * SLOT)

    def pointer(self, seq: int) -> int | None:
        """Slot ``seq``: 0 while its panel is in flight, else 1 + its line's offset; None when
        the slot was never handed out."""
        slot = os.pread(self._fd, SLOT, seq * SLOT)
        return int.from_bytes(slot, "little") if len(slot) == SLOT else None

    def now(self) -> tuple[int, int]:
        """panels.idx's current descriptor and its slot count (the panel counter)."""
        with self._lock:
            fd = self._current()
            # a descriptor retired later stays open until close(), so reading it unlocked is safe
            return fd, os.fstat(fd).st_size // SLOT

    def close(self) -> None:
        for fd in (self._fd, *self._retired):
            os.close(fd)

    def _open(self) -> int:
        """Open panels.idx, rebuilding it from the logs when it is new beside logs that are not."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_size == 0:
                    self._rebuild(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _current(self) -> int:
        """Our descriptor, reopened if the file at the path was deleted or replaced (one
        ``stat``); caller holds ``_lock``."""
        try:
            same = os.stat(self.path).st_ino == self._ino
        except FileNotFoundError:
            same = False
        if not same:
            self._retired.append(self._fd)
            self._fd = self._open()
            self._ino, self._handed = os.fstat(self._fd).st_ino, 0
        return self._fd

    def _rebuild(self, fd: int) -> None:
        """Point each logged panel's slot at its calls.jsonl line and set the counter past every
        seq either log names; caller holds the file's flock. Reads both logs once, at start."""
        pointers: dict[int, int] = {}
        top = -1
        for offset, line in jsonl.lines(self._calls_path):
            m = _LOGGED_PANEL.search(line)
            if m:
                seq = int(m.group(1))
                pointers[seq] = offset + 1
                top = max(top, seq)
        try:
            with open(self._evidence_path, "rb") as f:
                carry = b""
                while block := f.read(1 << 20):
                    text = carry + block
                    found = _LOGGED_PANEL.findall(text)
                    if found:
                        top = max(top, max(map(int, found)))
                    carry = text[-64:]  # an id cut by the block's end is whole next time
        except FileNotFoundError:
            pass
        if top < 0:
            return  # no panel logged: a new folder, counting from 0
        table = bytearray(SLOT * (top + 1 + ID_MARGIN))
        for seq, pointer in pointers.items():
            table[seq * SLOT : (seq + 1) * SLOT] = pointer.to_bytes(SLOT, "little")
        os.pwrite(fd, table, 0)


class FinishedCount:
    """How many panels panels.idx points at a calls.jsonl line (finished panels), counted
    again at each call from what changed: the slots added since, and the runs of slots that
    were still 0 (in flight, skipped or left by a crash). The first count reads the whole file;
    later ones read the new slots and the zero runs only. None when there is no panels.idx.
    Not thread-safe: its one caller holds a lock around it."""

    def __init__(self, idx_path: Path):
        self.path = Path(idx_path)
        self._ino: int | None = None
        self._upto = 0  # slots read so far
        self._count = 0  # of them, those pointing at a line
        self._zeros: list[tuple[int, int]] = []  # runs [start, end) of slots still 0

    def __call__(self) -> int | None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            if st.st_ino != self._ino or st.st_size < self._upto * SLOT:
                self._ino, self._upto, self._count, self._zeros = st.st_ino, 0, 0, []
            runs, self._zeros = self._zeros, []
            end = st.st_size // SLOT
            for start, stop in [*runs, (self._upto, end)]:
                self._read(fd, start, stop)
            self._upto = end
            return self._count
        finally:
            os.close(fd)

    def _read(self, fd: int, start: int, stop: int) -> None:
        """Count the finished slots of [start, stop) and note the runs still 0."""
        step = 1 << 16
        for first in range(start, stop, step):
            got = slots(fd, first, min(step, stop - first)).tolist()
            zero = got.count(0)
            self._count += len(got) - zero
            if not zero:
                continue
            i = got.index(0)
            while True:  # only the zeros are walked one by one: they are few
                j = i + 1
                while j < len(got) and got[j] == 0:
                    j += 1
                self._zeros.append((first + i, first + j))
                if j >= len(got) or (i := _index(got, j)) < 0:
                    break


def _index(values: list, start: int) -> int:
    """Where the next 0 of ``values`` is from ``start``, or -1."""
    try:
        return values.index(0, start)
    except ValueError:
        return -1
