"""A time axis over the index's window slots: seats, failures and answer-time quantiles per slot
of the last hour, day or week, for one model (or several summed), one endpoint, one gateway key
or the whole gateway.

Pure reads of ``usage.Usage`` rows (``Usage.rows``), made under the ledger's lock by
``Queries.series``; nothing here opens a file or reads the clock.

Invariants:

* A bucket is one slot of the window (``usage.WINDOWS``: ``hour`` twelve 5-minute slots, ``day``
  twenty-four hours, ``week`` seven UTC days), oldest first; the last is the slot holding
  ``until`` and is still filling. A seat counts in its panel's start's slot.
* ``failed`` counts the model's failures only (as ``usage``: not ``cancelled``, ``at_limit`` or
  ``memory`` seats, which are in ``seats`` alone); ``error_rate`` is ``failed / (answered +
  failed)``, None when the bucket has neither.
* ``p50`` / ``p95`` are nearest-rank quantiles of the bucket's answered seats' seconds, read from
  the log-spaced histograms (``histogram``: within 4.4%); None for a bucket without an answer,
  never 0.
* The cost is O(buckets x names asked for): no log is read.
"""

from __future__ import annotations

from panelist.metrics.ledger import usage as windows
from panelist.metrics.ledger.histogram import RESOLUTION, sparse_quantiles

QUANTILES = (
    f"p50 and p95: the median and 95th percentile of the answered seats' seconds in "
    f"the bucket, within {RESOLUTION:.1%}; null when the bucket has no answer"
)


def figures(row: list | None) -> dict:
    """One bucket's (or a window's) counts and quantiles from a usage row (None: no seat)."""
    if row is None:
        return {
            "seats": 0,
            "answered": 0,
            "failed": 0,
            "error_rate": None,
            "p50": None,
            "p95": None,
        }
    answered, failed = row[windows.ANSWERED_N], row[windows.FAILED]
    p50, p95 = sparse_quantiles(row[windows.HIST], 0.5, 0.95)
    judged = answered + failed
    return {
        "seats": row[windows.SEATS],
        "answered": answered,
        "failed": failed,
        "error_rate": round(failed / judged, 4) if judged else None,
        "p50": p50,
        "p95": p95,
    }


def view(window: str, since: int, width: int, rows: list[list | None], now: float) -> dict:
    """The series of ``rows`` (one per slot, oldest first, from ``since``): its buckets and the
    whole window's figures (``total``, the slots' histograms merged, not their quantiles
    averaged)."""
    total: dict = {}
    for row in rows:
        if row is not None:
            windows.merge(total, {"": row})
    return {
        "window": window,
        "width": width,
        "since": float(since),
        "until": now,
        "quantiles": QUANTILES,
        "buckets": [
            {"start": float(since + i * width), **figures(row)} for i, row in enumerate(rows)
        ],
        "total": figures(total.get("")),
    }
