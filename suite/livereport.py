"""The suite's report kept current for a server, by reading only the samples added since.

``report.load`` rebuilds the report from the whole samples file whenever it changed: right for a
command run once, too slow for a dashboard asked again and again while a suite run appends. A
``LiveReport`` follows the file from its last offset (``jsonl.Tail``) and keeps only what the
report counts, slimmed to the fields it reads (never the raw answers):

* per (task, version, model, epoch) the last scored sample, and each task's latest version;
* per (task, version, model, epoch) the last failure of the way to the model, until a scored
  line makes it good.

Invariants: its report equals ``report.summarise`` of every line read so far (the same
``report_of``); a request costs one ``stat`` when nothing was appended, and otherwise the new
lines plus a summary over the kept samples (tasks × models × epochs, not the file's length).
A file replaced or cut shorter is read again from its start.
"""

from __future__ import annotations

import threading
from pathlib import Path

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.ledger import samples as sample_store
from panelist.suite import report

# the fields ``report.model_row`` and ``report_of`` read
FIELDS = (
    "task",
    "task_hash",
    "alias",
    "epoch",
    "pair",
    "task_kind",
    "right",
    "failure",
    "flag",
    "verdict",
    "key",
    "tokens",
    "seconds",
    "waited",
)


class LiveReport:
    """The report of one samples file, current as of the last ``doc()``."""

    def __init__(self, source):
        """``source``: the samples (``ledger.samples``), or the path of a samples file."""
        self.samples = (
            sample_store.FileSamples(Path(source)) if isinstance(source, (str, Path)) else source
        )
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self._tail = self.samples.reader()
        self._stamp: tuple[int, int] | None = None
        # task -> its latest version (hash); a sample line may lack either field
        self._version: dict[str | None, str | None] = {}
        self._scored: dict[tuple, dict] = {}  # (task, hash, model, epoch) -> slim sample
        self._failed: dict[tuple, str] = {}  # the same key -> its last failure kind
        self._doc: dict | None = None

    def doc(self) -> dict:
        stamp = self.samples.stamp()
        with self._lock:
            if stamp == self._stamp and self._doc is not None:
                return self._doc
            if stamp[0] < self._tail.offset:  # replaced or cut: start over
                self._start()
            for _, s in self._tail.read():
                self._fold(s)
            self._doc = self._report()
            self._stamp = stamp
            return self._doc

    def _fold(self, s: dict) -> None:
        if s.get("kind") != "sample":
            return
        s = seatrecord.read(s)  # a line of an earlier version, in this version's shape
        task = s.get("task")
        self._version[task] = s.get("task_hash")
        key = (task, s.get("task_hash"), s.get("alias"), s.get("epoch"))
        if s.get("outcome") == "scored":
            self._scored[key] = {k: s[k] for k in FIELDS if k in s}
            self._failed.pop(key, None)
        elif s.get("outcome") == "failed" and key not in self._scored:
            self._failed[key] = s.get("failure") or "error"

    def _report(self) -> dict:
        kept = [
            s
            for (task, digest, _, _), s in self._scored.items()
            if self._version.get(task) == digest
        ]
        unfinished: dict[str, dict[str, int]] = {}
        for (_, _, model, _), kind in self._failed.items():
            kinds = unfinished.setdefault(model, {})
            kinds[kind] = kinds.get(kind, 0) + 1
        return report.report_of(kept, unfinished)

    def close(self) -> None:
        self.samples.close()
