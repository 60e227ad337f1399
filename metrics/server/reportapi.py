"""The dashboard's reports on the models: their ratings per shape, their use and spend over a
recent window, and the suite's scores.

Invariants (beside ``metrics.server.api``'s): a rating is refitted only when its shape's
comparisons changed; spend is summed per currency, never across currencies; the suite's
report is followed from where the last read stopped, never rescanned.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.errors import BadRequest
from panelist.metrics.ledger.ratings import ShapeRatings
from panelist.metrics.roster.collection import SHAPE
from panelist.metrics.server.api import NAME, ApiRequest


def ratings(req: ApiRequest) -> dict:
    """Each model's rating per shape (``ledger.ratings``), or one shape's with ``?shape=``;
    refitted only when that shape's comparisons changed, and never waited for when slow."""
    book = req.panels.ratings
    shapes = book.shapes()
    shape = req.query.get("shape") or "all"
    if shape != "all" and not SHAPE.fullmatch(shape):
        raise BadRequest(
            f"shape '{shape[:NAME]}' is not a shape; use lower-case letters, digits "
            "and '-', e.g. general or review, or all",
            param="shape",
        )
    # a slow shape answers with its last fit while a newer one is made (``refitting``), and
    # with no models at all (``fitting``) while its first fit since the start is made
    return {
        "data": [_rated(book, s) for s in (shapes if shape == "all" else [shape])],
        "shapes": shapes,
    }


def _rated(book, shape: str) -> dict:
    fitted = book.ready(shape)
    if fitted is None:  # as a shape with no comparison yet reads, saying why
        return dict(ShapeRatings(shape).public(), fitting=True, refitting=False)
    return dict(fitted.public(), fitting=False, refitting=book.refitting(shape))


def usage(req: ApiRequest) -> dict:
    """Each model's seats, error rate, answer times and spend over a recent window
    (``Ledger.usage``), priced at the model's price now (typed, else the catalog's); a total
    per currency, never across currencies."""
    from panelist.metrics.ledger.usage import WINDOWS
    from panelist.metrics.race.costs import call_cost

    panels = req.panels
    doc = panels.ledger.usage(req.query.get("window") or "day")
    known = panels.known.view().models
    rows, unpriced = [], []
    spent: dict[str, float] = {}  # currency -> spent
    for alias, row in sorted(doc["models"].items()):
        model = known.get(alias)
        amount = (
            None
            if model is None
            else call_cost(
                model, {"prompt": row["prompt_tokens"], "completion": row["completion_tokens"]}
            )
        )
        if amount is None:
            unpriced.append(alias)
        else:
            spent[model.currency] = spent.get(model.currency, 0.0) + amount
        rows.append(
            dict(
                row,
                alias=alias,
                spend=None
                if amount is None
                else {"amount": round(amount, 8), "currency": model.currency},
            )
        )
    answered = sum(r["answered"] for r in rows)
    failed = sum(r["failed"] for r in rows)
    return {
        "window": doc["window"],
        "windows": list(WINDOWS),
        "since": doc["since"],
        "until": doc["until"],
        "data": rows,
        "total": {
            "seats": sum(r["seats"] for r in rows),
            "answered": answered,
            "failed": failed,
            "error_rate": round(failed / (answered + failed), 4) if answered + failed else None,
            "spend": {c: round(v, 8) for c, v in sorted(spent.items())},
            "unpriced": unpriced,
            "uncounted": sum(r["uncounted"] for r in rows),
        },
    }


def suite(req: ApiRequest) -> dict:
    # followed from where the last request stopped reading: no rescan of the samples per change
    doc = req.parts.suite_report().doc()
    return {
        "data": doc["models"],
        "tasks": doc["tasks"],
        "built": doc["built"],
        "headline": doc.get("headline", []),
        "warnings": doc.get("warnings", []),
    }


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/ratings", {"GET": ratings}),
    ("/api/usage", {"GET": usage}),
    ("/api/suite", {"GET": suite}),
]
