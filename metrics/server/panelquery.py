"""The panels list's filters: ``GET /api/panels?q=&model=&collection=&key=&status=&since=&until=``
checked parameter by parameter, answered from the search index (``metrics.ledger.search``) and
summarised by the ledger, as an unfiltered page is.

Parameters (every one optional; an empty value is no filter; any other name is refused):

* ``q``: words that must all appear, in the prompt or in an answer, in any order; ``"a
  phrase"`` in double quotes must appear as written; ``pars*`` matches words that start so.
  Case, accents and punctuation do not count. Anything else typed (``OR``, ``-``, ``:``,
  brackets) is read as words, never as query syntax.
* ``model``: a seat of that alias (any seat, the merger included); with ``status=failed``,
  that model's own seat failed.
* ``collection``: ``bench/<name>`` or ``<name>``. ``key``: the gateway key's name (``local``).
* ``status``: ``failed`` (a seat ended with an error or no text), ``owed`` (an answered seat
  awaits a verdict the caller owes), ``abandoned`` (the caller left before the end).
* ``since``, ``until``: the panel's start, inclusive: epoch seconds, ``2026-01-31`` (a day
  alone is its start for ``since``, its end for ``until``), ``2026-01-31T12:00:00Z`` (without
  a zone, UTC), or a span back from now: ``30m``, ``24h``, ``7d``, ``2w``.
* ``limit``, ``before``, ``after``: paging as without filters. ``after`` (the live poll) walks
  the finished panels as an unfiltered poll does and returns those that match; its cursor
  holds below a panel the index does not hold yet, so that panel is not passed over.

Invariants: a refusal is a 400 naming its parameter; a reply says how complete the index was
(``index``), since a request never waits for a long rebuild, and whether the search stopped at
its budget (``partial``: more may match from ``next`` on, which continues below where it had
looked); no reply holds a prompt or answer
except ``match``, the few words around where the text was found.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from panelist.metrics.errors import BadRequest
from panelist.metrics.ledger import search
from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.roster.collection import PREFIX

FILTERS = ("q", "model", "collection", "key", "status", "since", "until")
PARAMS = ("limit", "before", "after") + FILTERS
NAME = 200  # characters of a model, collection or key name
_SPAN = re.compile(r"(\d{1,6})([mhdw])")
_EPOCH = re.compile(r"\d{1,11}(\.\d{1,9})?")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
TIME_HELP = (
    "epoch seconds, a UTC day such as 2026-01-31, a time such as 2026-01-31T12:00:00Z, "
    "or a span back from now such as 30m, 24h, 7d or 2w"
)


def wanted(query: dict) -> bool:
    """Whether the request filters (so the search index answers it)."""
    return any(query.get(name) for name in FILTERS)


def check_names(query: dict) -> None:
    unknown = sorted(set(query) - set(PARAMS))
    if unknown:
        raise BadRequest(
            f"unknown parameter '{unknown[0]}'; /api/panels takes {', '.join(PARAMS)}",
            param=unknown[0],
        )


def filters_of(query: dict, now: float | None = None) -> search.Filters:
    """The filters a query asks for; BadRequest naming the first parameter that is wrong."""
    now = time.time() if now is None else now
    q = query.get("q") or ""
    status = query.get("status") or None
    if status is not None and status not in search.STATUSES:
        raise BadRequest(
            f"'status' must be one of {', '.join(search.STATUSES)}, not '{status[:40]}'",
            param="status",
        )
    collection = _name(query, "collection")
    if collection is not None and not collection.startswith(PREFIX):
        collection = PREFIX + collection
    since = parse_time(query.get("since"), "since", now=now)
    until = parse_time(query.get("until"), "until", now=now, end=True)
    if since is not None and until is not None and until < since:
        raise BadRequest(
            "'until' is before 'since'; give a range whose end comes after its start", param="until"
        )
    return search.Filters(
        text=search.text_query(q) if q.strip() else None,
        model=_name(query, "model"),
        collection=collection,
        key=_name(query, "key"),
        status=status,
        since=since,
        until=until,
    )


def _name(query: dict, param: str) -> str | None:
    value = query.get(param) or None
    if value is not None and (len(value) > NAME or not value.isprintable()):
        raise BadRequest(
            f"'{param}' must be a name of at most {NAME} printable characters", param=param
        )
    return value


def parse_time(value: str | None, param: str, *, now: float, end: bool = False) -> float | None:
    """Epoch seconds from what ``since`` / ``until`` accept (see the module docstring)."""
    text = (value or "").strip()
    if not text:
        return None
    if m := _SPAN.fullmatch(text):
        return now - int(m.group(1)) * _UNIT[m.group(2)]
    if _EPOCH.fullmatch(text):
        return float(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            f"'{param}' must be {TIME_HELP}; '{text[:40]}' is none of those", param=param
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    t = moment.timestamp()
    if _DAY.fullmatch(text) and end:
        t += 86400 - 0.001  # the whole day, to its last millisecond
    return t


def echo(f: search.Filters, query: dict) -> dict:
    """The filters as they were understood (times as epoch seconds)."""
    return {
        "q": (query.get("q") or "").strip() or None,
        "model": f.model,
        "collection": f.collection,
        "key": f.key,
        "status": f.status,
        "since": f.since,
        "until": f.until,
    }


def listing(req, limit: int, cursor) -> dict:
    """One filtered page (``before``) or poll (``after``); ``cursor(value, param)`` reads a
    panel id as the unfiltered list does."""
    query = req.query
    f = filters_of(query)
    ledger = req.panels.ledger
    index = req.parts.search
    state = index.catch_up()
    if "after" in query:
        after = query["after"]
        data, last = ledger.panels_after(cursor(after, "after") if after else None, limit)
        seqs = [panel_seq(p["panel"]) for p in data]
        matched, missing = index.among(f, seqs)
        if missing:
            last = min(last, min(missing) - 1)  # to be asked again once it is indexed
        keep = set(s for s in matched if s <= last)
        data = [p for p, s in zip(data, seqs) if s in keep]
        nxt = f"p00000000-{last}" if last >= 0 else None
        partial = False  # a poll looks at one page of panels only
    else:
        before = cursor(query["before"], "before") if query.get("before") else None
        seqs, next_seq, partial = index.find(f, before=before, limit=limit)
        data = ledger.panel_summaries(seqs)
        nxt = None if next_seq is None else f"p00000000-{next_seq}"
    if f.text is not None:
        data = [dict(p, match=_match(ledger, f.text, p["panel"])) for p in data]
    return {
        "data": data,
        "next": nxt,
        "partial": partial,
        "latest": ledger.latest_panel(),
        "owed": ledger.owed_count(),
        "index": state,
        "filters": echo(f, query),
    }


def _match(ledger, text: search.Text, panel: str) -> dict | None:
    record = ledger.panel(panel) or {}
    seats = [s for s in record.get("seats") or () if isinstance(s, dict)]
    if isinstance(record.get("merger"), dict):
        seats.append(record["merger"])
    return search.excerpt(
        text, record.get("prompt"), [(s.get("call"), s.get("answer")) for s in seats]
    )
