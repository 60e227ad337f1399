"""The seat record: how one model call's result is written down, in one shape, by every caller.

A panel's seat (``runs/gateway/evidence.jsonl`` and its panel's line in ``calls.jsonl``), a race's
call (``runs/races/<id>/calls.jsonl``), a suite sample (``runs/suite/samples.jsonl``) and a probe
or endpoint test (``evidence.jsonl``) are each one seat record (``FIELDS``) plus the caller's own
fields (the panel, the race and run, the task and its score, …). ``runs/README.md`` documents the
shape for every reader.

Invariants:

* Every record has every field of ``FIELDS``; ``role`` is one of ``ROLES``; a caller's own field
  never replaces a seat field (``line`` refuses one that would).
* ``kind`` is what the line is in its log, and is the field readers tell lines apart by:
  ``seat`` (a gateway seat), ``probe`` (a probe or an endpoint test: never counted as a seat),
  ``call`` (a race's call), ``sample`` (a suite sample). Lines of one kind keep it across versions.
* ``clamped`` is null unless an output budget was sent lower than asked (the model's known
  max output): then ``{"param", "asked", "sent"}``.
* ``error`` is empty when the call answered, else one line that starts with its kind
  (``timeout: …``; an empty answer's message says so itself); ``error_kind`` is the kind alone.
* What was asked is never written; ``answer`` is the text the model gave, or null where its log
  does not keep answers (``evidence.jsonl``: a seat's answer is in ``calls.jsonl``).
* ``read`` turns a line any earlier version wrote into this shape (old names: race ``label`` and
  ``text``, suite ``model`` and ``raw``, gateway ``seat``), so a reader handles one shape.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from panelist.metrics.store import jsonl

if TYPE_CHECKING:
    from panelist.metrics.seats.calls import SeatResult

# who asked: a gateway seat, a race's runs and judge, the suite, the health probe, a Test
ROLES = (
    "member",
    "explorer",
    "nominee",
    "merger",
    "decider",
    "reference",
    "candidate",
    "judge",
    "suite",
    "probe",
    "test",
)
FIELDS = (
    "v",
    "kind",
    "ts",
    "call",
    "role",
    "alias",
    "served",
    "endpoint",
    "status",
    "error_kind",
    "error",
    "answer",
    "tool_calls",
    "finish_reason",
    "tokens",
    "seconds",
    "waited",
    "attempts",
    "clamped",
)
_HEAD = frozenset(("v", "kind", "ts"))
_SEAT = frozenset(FIELDS)
# earlier names of seat fields, by the new name: the first one a line has is taken
_OLD = (
    ("call", ("label",)),
    ("role", ("seat",)),
    ("alias", ("model",)),
    ("answer", ("text", "raw")),
)


def fields(result: "SeatResult", *, answer: bool | str = True) -> dict:
    """The seat fields of ``result`` but ``v``, ``kind`` and ``ts`` (a panel's line nests them).
    ``answer``: False writes null (a log that keeps no answers), a string writes that text (an
    answer scrubbed of image traces)."""
    text = result.answer if answer is True else (answer if isinstance(answer, str) else None)
    return {
        "call": result.call,
        "role": result.seat,
        "alias": result.alias,
        "served": result.served,
        "endpoint": result.endpoint,
        "status": result.status,
        "error_kind": result.error_kind,
        "error": result.reason,
        "answer": text,
        "tool_calls": result.tool_calls,
        "finish_reason": result.finish_reason,
        "tokens": result.tokens,
        "seconds": result.seconds,
        "waited": result.waited,
        "attempts": result.attempts,
        "clamped": result.clamped,
    }


def line(
    result: "SeatResult", kind: str, *, answer: bool | str = True, now: float | None = None, **own
) -> dict:
    """One whole line: ``v``, ``kind``, ``ts`` (UTC, now), the seat fields, then ``own``."""
    clash = _SEAT.intersection(own)
    if clash:
        raise ValueError(
            f"{', '.join(sorted(clash))}: a caller's field cannot replace a seat "
            "field; name it otherwise"
        )
    return {
        "v": jsonl.SCHEMA,
        "kind": kind,
        "ts": jsonl.utc_iso(time.time() if now is None else now),
        **fields(result, answer=answer),
        **own,
    }


def read(record: dict) -> dict:
    """``record`` (a seat record of any version) in this version's shape: fields an earlier
    version named otherwise are copied under their names here (the old ones stay); a field it
    never had stays absent (readers give their own default). The record itself is returned
    when it is of this version (it has every renamed field)."""
    if "call" in record and "role" in record and "alias" in record and "answer" in record:
        return record
    out = dict(record)
    for name, old in _OLD:
        if name not in out:
            for was in old:
                if was in out:
                    out[name] = out[was]
                    break
    if "role" not in out and out.get("kind") == "probe":
        out["role"] = "probe"
    if "role" not in out and out.get("kind") == "sample":
        out["role"] = "suite"
    kind, error = out.get("error_kind") or "", out.get("error") or ""
    if kind and error and out.get("status") != "empty" and not error.startswith(kind + ":"):
        out["error"] = f"{kind}: {error}"  # races, the suite and probes kept the message alone
    return out


class CallLog:
    """A run's own call log (a race's ``calls.jsonl``): one ``kind: "call"`` seat record per
    result, its ``meta`` as the caller's fields, appended under ``flock`` in one write."""

    def __init__(self, path: str | Path, kind: str = "call"):
        self.path = Path(path)
        self.kind = kind
        self._appender = jsonl.Appender(self.path)

    def write(self, result: "SeatResult") -> None:
        self._appender.append(line(result, self.kind, **result.meta))

    def read(self) -> list[dict]:
        return [read(record) for _, record in jsonl.Tail(self.path).read()]

    def close(self) -> None:
        self._appender.close()
