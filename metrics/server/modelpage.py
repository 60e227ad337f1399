"""The model page's reply (``GET /api/models/{alias}``): everything the dashboard knows of one
model, from the parts that already hold it.

* ``model``: its roster row, as ``GET /api/models`` lists it (status, rate, interval, …).
* ``facts``: what the catalog knows, each fact with its source and date (``Catalog.facts``).
* ``collections``: the collections it sits in.
* ``shapes``: per shape its seats, answers, verdicts with their 95% interval, answer-time
  p50 / p95 and failures by kind (the ledger's index).
* ``latency``: its newest ``LATENCY`` seats, oldest first, as ``[start, seconds, status]``.
* ``panels`` and ``failures``: its newest panels (summaries) and newest failed seats, each
  failure with its kind and message (the search index, then each panel's line).
* ``suite``: its row of the review suite's report, or None; ``races``: the newest races it
  ran in (of the last ``RACES_LOOKED`` started), each with its own means and interval.
* ``alerts``: the recent alerts about it; ``index``: how complete the search index was.

Invariant: every part is bounded, whatever the logs hold (the counts above, and the index
reads seats by (alias, seq)), so the page costs the same at any log size.
"""

from __future__ import annotations

from panelist.metrics.alerts import Alerts
from panelist.metrics.ledger.index import failure_kind
from panelist.metrics.ledger.search import Filters
from panelist.metrics.stats import wilson

LATENCY = 500  # seats drawn in the latency chart
RECENT = 20  # panels, and failures, listed
RACES_LOOKED = 50  # newest races looked through
RACES = 5  # races listed
ALERTS = 200  # newest alerts looked through


def page(req, row: dict) -> dict:
    from panelist.metrics.roster.catalog import Catalog

    alias = row["alias"]
    panels = req.panels
    ledger = panels.ledger
    index = req.parts.search
    state = index.catch_up()
    seqs = index.find(Filters(model=alias), limit=RECENT).seqs
    return {
        "alias": alias,
        "model": row,
        "facts": Catalog(panels.home).facts(alias),
        "collections": panels.collections.using(alias),
        "shapes": shapes(ledger, alias),
        "latency": [
            [s["started"], s["seconds"], s["status"]]
            for s in reversed(index.model_seats(alias, limit=LATENCY))
        ],
        "panels": ledger.panel_summaries(seqs),
        "failures": failures(ledger, index.model_seats(alias, failed=True, limit=RECENT)),
        "suite": next(
            (m for m in req.parts.suite_report().doc()["models"] if m.get("model") == alias), None
        ),
        "races": races(req.parts.races, alias),
        "alerts": [a for a in Alerts(panels.home).recent(ALERTS) if a.get("subject") == alias][
            :RECENT
        ],
        "index": state,
    }


def shapes(ledger, alias: str) -> list[dict]:
    rows = []
    for shape, st in sorted(ledger.model_shapes(alias).items()):
        judged = st["useful"] + st["not_useful"]
        low, high = wilson(st["useful"], judged)
        rows.append(
            dict(
                st,
                shape=shape,
                rate=st["useful"] / judged if judged else None,
                interval=[round(low, 4), round(high, 4)],
            )
        )
    return rows


def failures(ledger, seats: list[dict]) -> list[dict]:
    """Each failed seat with its kind and message, read from its panel's line."""
    out = []
    for s in seats:
        seat = next((x for x in _seats(ledger.panel(s["panel"])) if x.get("call") == s["call"]), {})
        out.append(
            dict(
                s,
                kind=failure_kind(seat.get("status"), seat.get("error")),
                error=seat.get("error") or None,
            )
        )
    return out


def _seats(record: dict | None) -> list[dict]:
    if not record:
        return []
    seats = [s for s in record.get("seats") or () if isinstance(s, dict)]
    if isinstance(record.get("merger"), dict):
        seats.append(record["merger"])
    return seats


def races(registry, alias: str) -> list[dict]:
    """The newest races ``alias`` ran in, with its own line of each report."""
    out = []
    for summary in registry.listing(RACES_LOOKED)["data"]:
        if alias not in (summary.get("candidates") or ()) and alias != summary.get("pinned"):
            continue
        report = registry.get(summary["race"]).get("report") or {}
        mine = next((m for m in report.get("models") or () if m.get("model") == alias), None)
        out.append(
            {
                "race": summary["race"],
                "status": summary["status"],
                "started": summary["started"],
                "grade": summary["grade"],
                "pinned": summary["pinned"],
                "verdict": summary["verdict"],
                "model": mine,
            }
        )
        if len(out) >= RACES:
            break
    return out
