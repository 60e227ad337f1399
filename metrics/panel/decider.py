"""Shape picking: the roster's decider model labels the prompt of a panel whose collection's
shape is ``auto``.

The known shapes the decider may answer with are the shapes the evidence log has seen, plus the
fixed shapes of every collection, plus ``general`` (``auto`` itself is never a label). It is asked
once, through the seats core (admission included), with a ``json_schema`` response format
``{shape, confidence}`` whose ``shape`` is an enum of those shapes, and the answer is parsed
strictly: a JSON object with exactly those two keys, a known shape and a confidence from 0 to 1.

Invariants:

* The decider never delays a panel past ``decider_budget`` seconds (gateway.json, default 2):
  the call's deadline is the budget, its wait for admission included.
* Whatever goes wrong (no decider on the roster, a failure, a timeout, an answer that is not
  the JSON asked for) the shape is ``general``; so is an answer below ``MIN_CONFIDENCE``.
  ``shape_by`` says which, and ``Request.decider`` keeps the label, confidence and the call
  (status, seconds, call id) for ``bench`` and the call log.
* A panel with no explorer seats to fill asks nothing: members are seated whatever the shape.
* A parsed answer is cached per prompt hash (a bounded LRU per ``Panels``; the hash covers the
  decider and the known shapes too, so a new decider or a new shape asks afresh): the same prompt
  is asked once. Failures are not cached, so a decider that recovers is asked again.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict

from panelist.metrics.store import jsonwire
from panelist.metrics.roster.collection import AUTO, Collections
from panelist.metrics.roster.roster import Model, Roster
from panelist.metrics.seats import SeatCall, Seats

GENERAL = "general"
MIN_CONFIDENCE = 0.6
CACHE_SIZE = 1024
MAX_PROMPT_CHARS = 8000  # the head of a long prompt is enough to label it, and keeps it cheap

INSTRUCTION = (
    "Label the user's request with the one shape that fits it best, and say how sure "
    "you are as a confidence from 0 to 1. Shapes: {shapes}. Answer with JSON only: "
    '{{"shape": ..., "confidence": ...}}.'
)


def decider_of(roster: Roster) -> Model | None:
    """The roster's decider, when one is marked and not retired."""
    return next((m for m in roster.view().models.values() if m.decider and not m.retired), None)


def known_shapes(ledger, collections: Collections) -> list[str]:
    shapes = set(ledger.shapes()) | {c.shape for c in collections.all().values() if c.shape}
    shapes.add(GENERAL)
    shapes.discard(AUTO)
    return sorted(shapes)


def parse_answer(text: str, shapes: list[str]) -> tuple[str, float]:
    """``(shape, confidence)`` from the decider's answer; ValueError saying what was wrong."""
    doc = jsonwire.loads(text, strict=True)
    if not isinstance(doc, dict) or set(doc) != {"shape", "confidence"}:
        raise ValueError("the answer is not a JSON object with exactly 'shape' and 'confidence'")
    shape, confidence = doc["shape"], doc["confidence"]
    if not isinstance(shape, str) or shape not in shapes:
        raise ValueError(f"the shape {shape!r} is not one of the known shapes")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not 0 <= confidence <= 1
    ):
        raise ValueError(f"the confidence {confidence!r} is not a number from 0 to 1")
    return shape, float(confidence)


class Decider:
    """Labels ``auto`` panels for one ``Panels``; holds its cache of answers."""

    def __init__(
        self,
        seats: Seats,
        roster: Roster,
        collections: Collections,
        ledger,
        cache_size: int = CACHE_SIZE,
    ):
        self.seats, self.roster = seats, roster
        self.collections, self.ledger = collections, ledger
        self._cache: OrderedDict[str, dict] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def label(self, req) -> None:
        """Set ``req.shape``, ``req.shape_by`` and ``req.decider`` of an ``auto`` request."""
        limits = self.collections.limits()
        req.shape = GENERAL
        if not req.collection.explorers(limits):
            req.shape_by = "auto: no explorer seats to fill, so the decider was not asked"
            return
        model = decider_of(self.roster)
        if model is None:
            req.shape_by = (
                "auto: no decider in service on the roster (mark one with "
                "`panelist model decider ALIAS`)"
            )
            return
        shapes = known_shapes(self.ledger, self.collections)
        text = req.text()[:MAX_PROMPT_CHARS]
        key = hashlib.sha256("\n".join([model.alias, *shapes, text]).encode()).hexdigest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None:
            decided = dict(cached, cached=True)
        else:
            decided = self._ask(model, shapes, text, limits.decider_budget)
            if decided["status"] == "ok":
                with self._lock:
                    self._cache[key] = decided
                    while len(self._cache) > self._size:
                        self._cache.popitem(last=False)
        req.decider = decided
        if decided["status"] != "ok":
            req.shape_by = f"auto: the decider {model.alias} failed ({decided['error']})"
        elif decided["confidence"] < MIN_CONFIDENCE:
            req.shape_by = (
                f"auto: the decider {model.alias} was unsure of "
                f"{decided['shape']} ({decided['confidence']:g} < {MIN_CONFIDENCE})"
            )
        else:
            req.shape = decided["shape"]
            req.shape_by = (
                f"auto: the decider {model.alias} labelled it ({decided['confidence']:g})"
            )

    def _ask(self, model: Model, shapes: list[str], text: str, budget: float) -> dict:
        schema = {
            "type": "object",
            "additionalProperties": False,
            "required": ["shape", "confidence"],
            "properties": {
                "shape": {"type": "string", "enum": shapes},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
        }
        call = SeatCall(
            label=f"decide-{uuid.uuid4().hex[:16]}",
            role="decider",
            model=model,
            messages=[
                {"role": "system", "content": INSTRUCTION.format(shapes=", ".join(shapes))},
                {"role": "user", "content": text},
            ],
            params={
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "shape", "strict": True, "schema": schema},
                },
                "temperature": 0,
            },
            timeout=budget,
            wait_in_timeout=True,
        )
        (result,) = self.seats.run([call], timeout=budget)
        out = {
            "alias": model.alias,
            "call": result.call,
            "status": result.status,
            "seconds": result.seconds,
            "shape": None,
            "confidence": None,
        }
        if not result.answered:
            out["status"] = "error" if result.status == "ok" else result.status
            out["error"] = result.reason or "no answer"
            return out
        try:
            out["shape"], out["confidence"] = parse_answer(result.answer, shapes)
        except ValueError as exc:  # JSONRefused is a ValueError too
            out["status"], out["error"] = "error", f"unusable answer: {exc}"
        return out
