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
* While the database is out of reach, the ledger's figures are left out (they cannot be
  brought up to date); the process's own below still answer.
* ``panelist_admission_refusals_total{model}`` (counter): seats that found no room within their
  wait at their endpoint's or model's limits (``at_limit``; the ledger's, as the seats).
* ``panelist_admission_waiting{endpoint}`` (gauge): this process's calls queued for a slot now.
* With a database, this process's use of it (``store.pgstats``): ``panelist_db_errors_total
  {kind}`` (``unreachable``, ``too_slow``, ``pool_full``), ``panelist_db_uses_total`` and
  ``panelist_db_seconds_total`` (statements and transactions, and the time from asking for a
  connection to the end of each), ``panelist_db_pool_waits_total`` and
  ``panelist_db_pool_wait_seconds_total`` (uses that found every connection busy, and how
  long they waited), ``panelist_db_connections_in_use`` (gauge).

The figures are the ledger's: every instance and worker sharing a data folder or a database
folds the same records, so each answers with the same totals (a scrape that reaches any worker
of a port reads one consistent series), from the index, never a log: O(models); but the
admission queue and the database figures, which are this process's own (``pid``).
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
        self.lines.append(
            f"{self.name}{suffix}{_labels(**labels) if labels else ''} {_number(value)}"
        )


def render(
    ledger, *, worker: int, lag: int, waiting: dict | None = None, database: dict | None = None
) -> str:
    """The text of one scrape over ``ledger`` (None while its database is out of reach: the
    process's own figures only); ``waiting``: calls queued per endpoint; ``database``:
    ``pgstats.Stats.snapshot()`` when the server has a database."""
    info = _Family("panelist_worker_info", "gauge", "The process that answered this scrape.")
    info.add(1, pid=os.getpid(), worker=worker)
    queued = _Family(
        "panelist_admission_waiting",
        "gauge",
        "Calls of this process waiting for an endpoint's slot now.",
    )
    for endpoint, count in sorted((waiting or {}).items()):
        queued.add(count, endpoint=endpoint)
    families = (_ledger(ledger, lag) if ledger is not None else []) + [info, queued]
    if database is not None:
        families += _database(database)
    return "\n".join(line for family in families for line in family.lines) + "\n"


def _ledger(ledger, lag: int) -> list[_Family]:
    totals = ledger.seat_totals()
    stats = ledger.model_stats()
    seats = _Family("panelist_seats_total", "counter", "Seats asked, by model and how they ended.")
    seconds = _Family(
        "panelist_seat_seconds",
        "histogram",
        "Answer time of answered seats in seconds (_sum estimated from the buckets, within 4.4%).",
    )
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
            running += sum(counts[upto : edge + 1])
            upto = edge + 1
            seconds.add(running, "_bucket", model=alias, le=_number(HIST_LO * 2**k))
        seconds.add(answered, "_bucket", model=alias, le="+Inf")
        estimate = sum(c * v for c, v in zip(counts, BUCKET_VALUES))
        seconds.add(round(estimate, 3), "_sum", model=alias)
        seconds.add(answered, "_count", model=alias)
    verdicts = _Family("panelist_verdicts", "gauge", "Current verdicts, by model and usefulness.")
    for alias in sorted(stats):
        verdicts.add(stats[alias]["useful"], model=alias, useful="true")
        verdicts.add(stats[alias]["not_useful"], model=alias, useful="false")
    owed = _Family(
        "panelist_verdicts_owed", "gauge", "Answers callers received that await a verdict."
    )
    owed.add(ledger.owed_count())
    behind = _Family(
        "panelist_index_lag_records",
        "gauge",
        "Records this instance had not folded when the scrape came.",
    )
    behind.add(lag)
    refused = _Family(
        "panelist_admission_refusals_total",
        "counter",
        "Seats that found no room at their endpoint's or model's limits in time.",
    )
    for alias in sorted(totals):
        refused.add(totals[alias][2].get("at_limit", 0), model=alias)
    return [seats, seconds, verdicts, owed, behind, refused]


def _database(stats: dict) -> list[_Family]:
    errors = _Family(
        "panelist_db_errors_total", "counter", "Database uses of this process that failed, by kind."
    )
    for kind in ("unreachable", "too_slow", "pool_full"):
        errors.add(stats["errors"].get(kind, 0), kind=kind)
    uses = _Family(
        "panelist_db_uses_total",
        "counter",
        "Statements and transactions this process ran on its database.",
    )
    uses.add(stats["uses"])
    spent = _Family(
        "panelist_db_seconds_total",
        "counter",
        "Seconds those took, from asking for a connection to their end.",
    )
    spent.add(round(stats["seconds"], 6))
    waits = _Family(
        "panelist_db_pool_waits_total",
        "counter",
        "Uses that found every pooled connection busy and waited.",
    )
    waits.add(stats["pool_waits"])
    waited = _Family(
        "panelist_db_pool_wait_seconds_total",
        "counter",
        "Seconds those waited for a free connection.",
    )
    waited.add(round(stats["pool_wait_seconds"], 6))
    busy = _Family(
        "panelist_db_connections_in_use", "gauge", "Database uses of this process running now."
    )
    busy.add(stats["in_use"])
    return [errors, uses, spent, waits, waited, busy]
