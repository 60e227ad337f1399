"""pairs.json: the verdicts' pairwise outcomes (``pairs.py``) saved beside the index snapshot,
and a light reader of them, for a process that needs only those (``panelist ratings``,
``panelist collection suggest``) and must not pay for loading the whole index.

The file records the evidence file it covers (inode and byte offset, as ``snapshot.py`` does)
and is written with every snapshot, from the same capture, so the two always agree. The reader
(``PairsView``) loads it when it is of this evidence file and at a line boundary, else starts
from nothing, then folds the verdict lines after its offset, exactly as the index would: the
counts it gives are the index's. It is derived data: deleting it costs one replay of the
verdict lines.
"""

from __future__ import annotations

import gc
import json
import os
import time
from pathlib import Path

from panelist.metrics.ledger.index import intern
from panelist.metrics.ledger.pairs import Pairs
from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.store.jsonl import Tail, utc_iso

VERSION = 2  # 2 added the patterns of panel outcomes: a version 1 file is replayed
NAME = "pairs.json"


def save(path: Path, ino: int, offset: int, pairs: Pairs) -> None:
    """Write ``pairs`` as of byte ``offset`` of evidence file ``ino``, this user's only."""
    atomic.write(
        path,
        jsonwire.encode(
            {
                "v": VERSION,
                "ts": utc_iso(time.time()),
                "ino": ino,
                "offset": offset,
                "kept": pairs.kept,
                "pairs": pairs.encode(),
            },
            separators=(",", ":"),
        ),
        mode=0o600,
    )


def _load(path: Path, evidence: Path, kept: int) -> tuple[Pairs, int]:
    """The saved pairs and their offset if they are of ``evidence`` (kept to the bound the
    ledger that saved them had); else empty, from 0, kept to ``kept``. The cyclic collector
    is paused meanwhile: the file makes some hundreds of thousands of tuples and lists, none in
    a cycle, and collections triggered by their count alone cost about a fifth of the load."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode(path, evidence, kept)
    finally:
        if enabled:
            gc.enable()


def _decode(path: Path, evidence: Path, kept: int) -> tuple[Pairs, int]:
    try:
        data = json.loads(path.read_bytes())
        st = os.stat(evidence)
        offset = data["offset"]
        if (
            data.get("v") != VERSION
            or data["ino"] != st.st_ino
            or not isinstance(offset, int)
            or not 0 <= offset <= st.st_size
        ):
            raise ValueError("not of this evidence file")
        if offset:
            with open(evidence, "rb") as f:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    raise ValueError("not at a line boundary")
        return Pairs.decode(data["pairs"], int(data["kept"]), intern), offset
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return Pairs(kept), 0


class PairsView:
    """The pairwise counts of one ledger folder, read without opening the ledger: the saved
    pairs, then the verdict lines after them. Offers the reads ``Ratings`` needs."""

    def __init__(self, runs_dir: Path, *, kept: int = 100_000):
        runs_dir = Path(runs_dir)
        evidence = runs_dir / "evidence.jsonl"
        self._pairs, offset = _load(runs_dir / NAME, evidence, kept)
        for _, rec in Tail(evidence, offset).read():
            if rec.get("kind") != "verdict":
                continue
            call, alias, shape = rec.get("call"), rec.get("alias"), rec.get("shape")
            if (
                call.__class__ is str
                and alias.__class__ is str
                and shape.__class__ is str
                and "useful" in rec
            ):
                panel = rec.get("panel")
                self._pairs.fold(
                    panel if panel.__class__ is str else call.partition(".")[0],
                    call,
                    intern(alias),
                    intern(shape),
                    bool(rec["useful"]),
                )

    def pairs(self, shape: str) -> dict[tuple[str, str], int]:
        return self._pairs.of(shape)

    def patterns(self, shape: str) -> dict[tuple, int]:
        return self._pairs.patterns_of(shape)

    def patterns_stamp(self, shape: str) -> int:
        return self._pairs.stamp(shape)

    def paired_shapes(self) -> list[str]:
        return sorted(s for s, w in self._pairs.wins.items() if w)
