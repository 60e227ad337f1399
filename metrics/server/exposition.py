"""``GET /metrics``: the gateway's figures in the Prometheus text format (version 0.0.4).

What is exposed, and where it comes from:

* ``panelist_seats_total{model,status}`` (counter): seats asked, by how they ended: ``answered``
  or the failure's kind (``timeout``, ``rate_limited``, ``empty``, ``cancelled``, ...), and
  ``not_asked`` for seats that ended before their model was asked (at a limit, or with no room
  in memory).
* ``panelist_seat_seconds{model}`` (histogram): answer time of answered seats. The buckets are
  the ledger's own (``ledger.histogram``), so every ``le`` is exact: powers of two of a
  millisecond, 8 ms to 262 s. ``_sum`` is estimated from the buckets (each reading as its
  geometric middle, within 4.4%): the ledger keeps counts, not sums.
* ``panelist_verdicts{model,useful}`` (gauge): current verdicts (a replaced one counts no more).
* ``panelist_verdicts_owed`` (gauge): answers callers received that await a verdict.
* ``panelist_index_lag_records`` (gauge): records this instance had not folded yet when the
  scrape came (each scrape folds them first).
* ``panelist_worker_info{pid,worker}`` (gauge, always 1): which process answered.

The figures are the ledger's: every instance and worker sharing a data folder or a database
folds the same records, so each answers with the same totals (a scrape that reaches any worker
of a port reads one consistent series), from the index, never a log: O(models).
"""

from __future__ import annotations

import math
import os

from panelist.metrics.ledger.histogram import HIST_BUCKETS, HIST_LO, HIST_STEPS, BUCKET_VALUES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# ``le`` bounds: 2**k ms, each the upper edge of ledger bucket 8k (bucket 0 holds under 1 ms)
BOUNDS = tuple(range(3, 19))


def _label(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def _number(x) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "+Inf" if x > 0 else ("-Inf" if x < 0 else "NaN")
    return repr(x) if isinstance(x, float) else str(x)


class _Family:
    def __init__(self, name: str, kind: str, help_text: str):
        self.lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.name = name

    def add(self, value, suffix: str = "", **labels) -> None:
        self.lines.append(f"{self.name}{suffix}{_labels(**labels) if labels else ''} "
                          f"{_number(value)}")


def render(ledger, *, worker: int, lag: int) -> str:
    """The text of one scrape over ``ledger``."""
    totals = ledger.seat_totals()
    stats = ledger.model_stats()
    seats = _Family("panelist_seats_total", "counter",
                    "Seats asked, by model and how they ended.")
    seconds = _Family("panelist_seat_seconds", "histogram",
                      "Answer time of answered seats in seconds (_sum estimated from the "
                      "buckets, within 4.4%).")
    for alias in sorted(totals):
        n, answered, failures, hist = totals[alias]
        seats.add(answered, model=alias, status="answered")
        for kind in sorted(failures):
            seats.add(failures[kind], model=alias, status=kind)
        rest = n - answered - sum(failures.values())
        if rest > 0:
            seats.add(rest, model=alias, status="not_asked")
        counts = hist or [0] * HIST_BUCKETS
        running, upto = 0, 0
        for k in BOUNDS:
            edge = k * HIST_STEPS
            running += sum(counts[upto:edge + 1])
            upto = edge + 1
            seconds.add(running, "_bucket", model=alias, le=_number(HIST_LO * 2 ** k))
        seconds.add(answered, "_bucket", model=alias, le="+Inf")
        estimate = sum(c * v for c, v in zip(counts, BUCKET_VALUES))
        seconds.add(round(estimate, 3), "_sum", model=alias)
        seconds.add(answered, "_count", model=alias)
    verdicts = _Family("panelist_verdicts", "gauge", "Current verdicts, by model and usefulness.")
    for alias in sorted(stats):
        verdicts.add(stats[alias]["useful"], model=alias, useful="true")
        verdicts.add(stats[alias]["not_useful"], model=alias, useful="false")
    owed = _Family("panelist_verdicts_owed", "gauge",
                   "Answers callers received that await a verdict.")
    owed.add(ledger.owed_count())
    behind = _Family("panelist_index_lag_records", "gauge",
                     "Records this instance had not folded when the scrape came.")
    behind.add(lag)
    info = _Family("panelist_worker_info", "gauge", "The process that answered this scrape.")
    info.add(1, pid=os.getpid(), worker=worker)
    return "\n".join(line for family in (seats, seconds, verdicts, owed, behind, info)
                     for line in family.lines) + "\n"
