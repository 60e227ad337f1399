"""Finished panels kept on this instance while the database cannot take them (``Outbox``): one
file per panel write in ``<runs>/outbox/``, holding exactly what the write would have sent (the
panels' ``(seq, record)`` pairs and the evidence written with them).

A panel whose seats were asked (and paid for) is never dropped because the database blinked
at its end: the ledger (``pglogs``) keeps the write here, tells the caller the panel's id, and
sends the write again whenever the database answers (``pending`` says when there is any).

Invariants:

* A file is written whole (``store.atomic``, this user's only) before the caller is told its
  panel is kept, and removed only after its write landed; a write landing twice stores it once
  (the database keeps the first row of a seq and skips its evidence, ``pgschema`` version 6),
  so a crash between the two, or two processes of one data folder sending the same file, loses
  nothing and doubles nothing.
* A kept panel can be read back by its id (``find``) until it is stored.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from panelist.metrics.store import atomic, jsonwire

PREFIX = "panels-"


class Outbox:
    """The outbox folder of one runs folder; threads and processes may share it."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._pending: bool | None = None  # None: not looked yet

    def keep(self, pairs: list[tuple[int, dict]], evidence: list[dict]) -> Path:
        """Write one panel write down; its file."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        first = pairs[0][0]
        path = self.folder / f"{PREFIX}{first:012d}-{os.getpid()}-{threading.get_ident()}.json"
        body = {"pairs": [[seq, record] for seq, record in pairs], "evidence": list(evidence)}
        atomic.write(path, jsonwire.encode(body, separators=(",", ":")), mode=0o600)
        with self._lock:
            self._pending = True
        return path

    def pending(self) -> bool:
        """Whether any write is kept (looked up on disk once, then known)."""
        with self._lock:
            known = self._pending
        if known is None:
            known = bool(self.files())
            with self._lock:
                self._pending = known
        return known

    def files(self) -> list[Path]:
        try:
            return sorted(
                p
                for p in self.folder.iterdir()
                if p.name.startswith(PREFIX) and p.suffix == ".json"
            )
        except FileNotFoundError:
            return []

    def send(self, write) -> int:
        """``write(pairs, evidence)`` for every kept file, oldest first, each removed once it
        landed; the number sent. Whatever ``write`` raises stops the round (the rest stay)."""
        sent = 0
        with self._lock:
            self._pending = None
        for path in self.files():
            entry = _read(path)
            if entry is None:  # gone (another process sent it), or not whole: never sent
                try:
                    path.replace(path.with_suffix(".unreadable"))
                except FileNotFoundError:
                    pass
                continue
            write([(int(seq), record) for seq, record in entry["pairs"]], entry["evidence"])
            sent += 1
            path.unlink(missing_ok=True)
        return sent

    def find(self, seq: int) -> dict | None:
        """The record of kept panel ``seq``, None when none is kept."""
        for path in self.files():
            entry = _read(path)
            for kept, record in (entry or {}).get("pairs", ()):
                if kept == seq:
                    return record
        return None


def _read(path: Path) -> dict | None:
    try:
        entry = jsonwire.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("pairs"), list):
        return None
    return entry
