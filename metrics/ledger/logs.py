"""Where the ledger's records live: ``FileLogs``, the embedded default (evidence.jsonl,
calls.jsonl and panels.idx in the runs folder), and, beside it in ``pglogs``, the same on
PostgreSQL. The ledger (``ledger.py``) and its reads (``queries.py``) speak only to this
surface, so there is one fold and one set of queries whichever holds the records:

* evidence: ``append`` records; ``follow`` feeds the index (``index.py``) every record it has
  not folded yet, in order, each with its position (a byte offset here, a row id there);
  ``evidence_at`` / ``evidence_many`` read records back by position; ``exclusive`` holds off
  every other writer (flock here, an advisory lock there) while the ledger decides a verdict
  or window, and ``write_held`` writes that decision inside it.
* panels: ``reserve`` hands out seqs, ``append_panels`` logs finished panels (each one's
  ``"abandoned"`` evidence first), ``pointer`` / ``slots`` / ``count`` read the panel table (a
  pointer is non-zero once the panel is logged) and ``panel_at`` / ``panels_at`` /
  ``recent_panels`` read panel records.

Invariants are those of ``ledger.py`` (the logs are append-only, every record is folded once,
in order) and ``ids.py`` (a seq is never handed out twice).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

from panelist.metrics.ledger import snapshot
from panelist.metrics.ledger.ids import LOGGED_PANEL_ID, PanelTable, slots
from panelist.metrics.ledger.index import Index
from panelist.metrics.store import jsonl
from panelist.metrics.store.jsonl import Appender, Tail

_ABANDONED_FLAG = b'"abandoned":true'


def abandoned_in(calls_path: Path) -> frozenset[str]:
    """The panels whose calls.jsonl line says the caller left (one pass over the file)."""
    found = set()
    for _, line in jsonl.lines(calls_path):
        # inside a JSON string a quote is escaped, so only the record's own field matches
        if _ABANDONED_FLAG in line:
            m = LOGGED_PANEL_ID.search(line)
            if m:
                found.add(m.group(1).decode())
    return frozenset(found)


class FileLogs:
    """A runs folder's JSONL logs and panels.idx; many threads and processes may share it."""

    snapshots = True  # index.json beside the logs spares a replay at start

    def __init__(self, runs_dir: Path):
        self.dir = Path(runs_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.calls_path = self.dir / "calls.jsonl"
        self.evidence_path = self.dir / "evidence.jsonl"
        self.idx_path = self.dir / "panels.idx"
        self.snapshot_path = self.dir / "index.json"
        self._evidence = Appender(self.evidence_path)
        self._calls = Appender(self.calls_path)
        # A second descriptor on evidence.jsonl, used only to hold its flock while deciding a
        # verdict or window and to write that decision: a flock on another open file description
        # also holds off this process's own Appender, so nothing can slip in between.
        self._guard = os.open(self.evidence_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._table = PanelTable(self.idx_path, self.calls_path, self.evidence_path)

    # ----------------------------------------------------------------- evidence

    def shared_time(self, local: float) -> float:
        """``local`` (this host's epoch seconds) on the clock every writer of these logs
        shares: one host's, so its own."""
        return local

    def load_snapshot(self, index: Index) -> bool:
        return snapshot.load(self.snapshot_path, index, self.evidence_path, self._guard)

    def save_snapshot(self, state: dict) -> None:
        snapshot.save(self.snapshot_path, state)

    def follow(self, index: Index, now: float, force: bool = False) -> int:
        """Fold what was appended since the last look; the caller serialises calls."""
        try:
            st = os.stat(self.evidence_path)
        except FileNotFoundError:
            return 0
        if st.st_ino != index.ino or st.st_size < index.offset:
            index.reset(st.st_ino)  # another file now: what we counted is not in it
        if st.st_size == index.offset:
            return 0
        # a replay from the start: panels abandoned before "abandoned" lines were written are
        # known only from calls.jsonl (read once, here)
        abandoned = abandoned_in(self.calls_path) if index.offset == 0 else frozenset()
        tail = Tail(self.evidence_path, index.offset)
        try:
            return index.fold_all(tail.read(), now, abandoned)
        finally:
            index.offset = tail.offset

    def append(self, *records: dict) -> None:
        self._evidence.append(*records)

    def evidence_at(self, pos: int) -> dict | None:
        return jsonl.read_line(self.evidence_path, pos)

    def evidence_many(self, positions: list[int]) -> list[dict | None]:
        return jsonl.read_lines(self.evidence_path, positions)

    def end(self) -> tuple[int | None, int]:
        """``(inode, size)`` of evidence.jsonl: which log, and the position after its end."""
        try:
            st = os.stat(self.evidence_path)
        except FileNotFoundError:
            return None, 0
        return st.st_ino, st.st_size

    def reader(self, pos: int) -> Tail:
        """A follower of the evidence from ``pos``: ``read()`` yields ``(pos, record)``, and
        ``offset`` is where it got to."""
        return Tail(self.evidence_path, pos)

    @contextmanager
    def exclusive(self, key: str):
        """Hold evidence.jsonl's flock: no other writer appends until it is released (one lock
        for every ``key``: a file takes one writer at a time anyway)."""
        fcntl.flock(self._guard, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._guard, fcntl.LOCK_UN)

    def write_held(self, record: dict) -> None:
        """Append one record through the guard descriptor, whose flock ``exclusive`` holds (a
        torn tail is cut off first, as every append does)."""
        jsonl.write_held(self._guard, jsonl.dumps(record))

    # ----------------------------------------------------------------- panels

    def reserve(self, count: int, now: float | None = None) -> list[str]:
        return self._table.reserve(count, now)

    def reserved(self, seq: int) -> bool:
        return self._table.reserved(seq)

    def append_panels(self, pairs: list[tuple[int, dict]], abandoned: list[dict]) -> None:
        """Log finished panels ``(seq, record)``, the evidence lines ``abandoned`` first (a
        panel's abandoned mark, and seat lines whose own write had failed)."""
        if abandoned:
            self._evidence.append(*abandoned)
        encoded = [jsonl.dumps(record) for _, record in pairs]
        offset = self._calls.write_lines(encoded)
        lines = []
        for (seq, _), line in zip(pairs, encoded):
            lines.append((seq, offset))
            offset += len(line)
        self._table.point(lines)

    def kept(self, seq: int) -> dict | None:
        """A panel kept for a later write: never, on files (their writes do not blink)."""
        return None

    def pointer(self, seq: int) -> int | None:
        return self._table.pointer(seq)

    def count(self):
        """``(handle, slots)``: what ``slots`` reads from, and the panel counter."""
        return self._table.now()

    def slots(self, handle, first: int, n: int):
        return slots(handle, first, n)

    def panel_at(self, pointer: int) -> dict | None:
        return jsonl.read_line(self.calls_path, pointer - 1)

    def panels_at(self, pointers: list[int]) -> list[dict | None]:
        return jsonl.read_lines(self.calls_path, [p - 1 for p in pointers])

    def recent_panels(self, n: int) -> list[dict]:
        return list(islice(jsonl.backward(self.calls_path), max(0, n)))

    def close(self) -> None:
        self._evidence.close()
        self._calls.close()
        os.close(self._guard)
        self._table.close()
