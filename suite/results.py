"""The suite's results: ``runs/suite/samples.jsonl`` in the data folder, one line per sample
(the ``suite_samples`` table instead when the data folder names a database:
``ledger.samples``).

A sample is one task asked of one model in one epoch. Its line is the call's seat record
(``metrics/seats/record.py``: the model's alias, served id and endpoint, status, error, the answer
as given, tokens, seconds, time waiting for admission, attempts; role ``suite``) with the
suite's own fields: the task (id, hash, kind, pair), the epoch, the parameters sent, the
prompt's digest, what the strict parser read in the answer and the score, and the task's ``key``
(a claim's true or false, a bug's lines, none for a control: the report counts true and false
claims apart by it). Lines of earlier
versions (``model`` for the alias, ``raw`` for the answer) are read in this shape (``read``).

Invariants:

* Each sample is appended whole, in one locked write, as its call ends (it is the seats core's
  call log for the suite), so an interrupted run loses nothing that finished.
* ``outcome`` says how the sample counts, decided from the call alone, never from words:
  ``scored`` (the model answered, and the parser scored it; or the model itself failed: an empty
  answer, a timeout once admitted, a prompt past its context window, each scored 0) or
  ``failed`` (the way to the model failed: limits, rate limits, server errors, connections,
  keys, cancellation). A failed sample is not done: a rerun asks again. It never counts as
  right or wrong.
* A sample is done when a ``scored`` line exists for its task, the task's current hash, the
  model, the epoch and the same parameters; a rerun skips exactly those.
* The report of the latest samples is kept in ``report.json`` beside them, rebuilt only when the
  samples file has grown since (so the dashboard never rescans an unchanged log).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from panelist.metrics.seats import record as seatrecord
from panelist.metrics.ledger import samples as sample_store
from panelist.metrics.store import jsonwire
from panelist.metrics.seats import SeatResult
from panelist.suite import answers
from panelist.suite.tasks import Task

# failures of the model itself: it was asked and did not answer in time, or at all
MODEL_FAILURES = ("empty", "timeout", "context_length")


def params_key(params: dict) -> str:
    blob = jsonwire.dumps(params, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def sample_key(
    task: str | None,
    task_hash: str | None,
    model: str | None,
    epoch: int | None,
    params: str | None,
) -> tuple:
    """What a sample is done under; a line read back may lack a field (None in its place)."""
    return (task, task_hash, model, epoch, params)


def classify(result: SeatResult) -> tuple[str, str]:
    """``(outcome, failure)`` of a call, from its status and error kind only."""
    if result.answered:
        return "scored", ""
    kind = "empty" if result.status == "empty" else (result.error_kind or result.status)
    return ("scored" if kind in MODEL_FAILURES else "failed"), kind


def record(result: SeatResult, task: Task) -> dict:
    """The sample line of a finished call for ``task`` (its meta carries epoch and params): the
    seat record (``seatrecord``) with the suite's own fields."""
    outcome, failure = classify(result)
    if result.answered:
        s = answers.score(task.kind, task.answer, result.text, min_chars=task.min_answer_chars)
        verdict, lines, right, flag = s.verdict, list(s.lines), s.right, s.flag
    else:
        verdict, lines, right, flag = None, [], False, ""
    meta = result.meta
    return seatrecord.line(
        result,
        "sample",
        run=meta.get("run", ""),
        task=task.id,
        task_hash=task.hash,
        task_kind=task.kind,
        pair=task.pair,
        epoch=meta.get("epoch", 1),
        params=meta.get("params", {}),
        params_key=meta.get("params_key", ""),
        prompt_hash=meta.get("prompt_hash", ""),
        outcome=outcome,
        failure=failure,
        verdict=verdict,
        lines=lines,
        flag=flag,
        right=right,
        score=int(right),
        key=list(task.answer) if isinstance(task.answer, tuple) else task.answer,
    )


class SampleLog:
    """The seats core's call log for a suite run: each result scored and appended as a sample."""

    def __init__(self, store, tasks: dict[str, Task]):
        """``store``: where samples go (``ledger.samples``; a path stands for its file)."""
        self._owned = isinstance(store, (str, Path))  # a store given is its giver's to close
        self.store = _store(store)
        self.tasks = tasks
        self.written: list[dict] = []  # this run's lines, in the order they landed

    def write(self, result: SeatResult) -> None:
        line = record(result, self.tasks[result.meta["task"]])
        self.store.append(line)
        self.written.append(line)

    def close(self) -> None:
        if self._owned:
            self.store.close()


def _store(source):
    return sample_store.FileSamples(Path(source)) if isinstance(source, (str, Path)) else source


def read(source) -> list[dict]:
    """Every sample (a torn last line is skipped) of ``source`` (``ledger.samples``, or the
    path of a samples file), those of earlier versions in this version's shape
    (``seatrecord.read``: ``alias`` for ``model``, ``answer`` for ``raw``)."""
    return [seatrecord.read(r) for r in _store(source).read_all() if r.get("kind") == "sample"]


def done_keys(samples: list[dict]) -> set[tuple]:
    return {
        sample_key(
            s.get("task"), s.get("task_hash"), s.get("alias"), s.get("epoch"), s.get("params_key")
        )
        for s in samples
        if s.get("outcome") == "scored"
    }


def latest(samples: list[dict]) -> list[dict]:
    """What the report counts: per task its latest version's samples, per (task, model, epoch)
    the last scored line (a rerun of a sample replaces it)."""
    version: dict[str | None, str | None] = {}  # a line may lack either field
    for s in samples:
        version[s.get("task")] = s.get("task_hash")
    keep: dict[tuple, dict] = {}
    for s in samples:
        if s.get("outcome") != "scored" or version.get(s.get("task")) != s.get("task_hash"):
            continue
        keep[(s.get("task"), s.get("alias"), s.get("epoch"))] = s
    return list(keep.values())


def unfinished(samples: list[dict]) -> dict[str, dict[str, int]]:
    """Per model, failures of the way to it (by kind) not since made good by a scored line."""
    scored = {
        (s.get("task"), s.get("task_hash"), s.get("alias"), s.get("epoch"))
        for s in samples
        if s.get("outcome") == "scored"
    }
    out: dict[str, dict[str, int]] = {}
    seen = set()
    for s in reversed(samples):
        key = (s.get("task"), s.get("task_hash"), s.get("alias"), s.get("epoch"))
        if s.get("outcome") != "failed" or key in scored or key in seen:
            continue
        seen.add(key)
        kinds = out.setdefault(s.get("alias"), {})
        kinds[s.get("failure") or "error"] = kinds.get(s.get("failure") or "error", 0) + 1
    return out
