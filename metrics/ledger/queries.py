"""The ledger's reads that answer requests: seating's model states, a call, a panel, the owed
and undelivered lists, history lookups, the dashboard's stats and the panel pages.

Each read follows the evidence log's tail once (the ledger's ``refresh``), then costs
O(models x shapes) or O(page), never a log rescan, however many panels the folder holds: the
index (``index.py``) answers from memory under the ledger's lock, and a record it points at is
read by its byte offset (a seat line in evidence.jsonl; a panel's calls.jsonl line through its
panels.idx slot). Pages walk panels.idx, passing over at most ``MAX_SCAN`` empty slots (panels
in flight, or reserved and never logged) and returning at most ``MAX_PAGE`` panels.
Invariants: a read never writes; records come back as logged (a page's summaries leave out
prompts and answers); the index is only read while the lock is held.
"""

from __future__ import annotations

import time
from threading import Lock
from typing import Callable, Iterable

from panelist.metrics import errors
from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.ledger import series as timeaxis
from panelist.metrics.ledger import usage as windows
from panelist.metrics.ledger.histogram import sparse_quantiles
from panelist.metrics.ledger.index import (
    ABANDONED,
    ANSWERED,
    GATEWAY,
    KEEP_DAYS,
    V_OFFSET,
    Index,
    ModelState,
    Stats,
    reply_hash,
)
from panelist.metrics.ledger.outcomes import KEPT

SCAN_SLOTS = 4096  # panels.idx slots read at a time when paging
MAX_SCAN = 1 << 20  # slots one page may pass over (in-flight or never-logged ones)
MAX_PAGE = 1000  # panels one page may hold
_VERDICT_FIELDS = ("useful", "note", "real", "false", "by", "ts")
_SEAT_SUMMARY = ("call", "seat", "alias", "status", "seconds")
_PANEL_SUMMARY = ("panel", "collection", "key", "started", "seconds", "shape", "reply")


def verdict_view(record: dict) -> dict:
    """A verdict line as reads return it: ``{"useful", "note", "real", "false", "by", "ts"}``."""
    return {k: record.get(k) for k in _VERDICT_FIELDS}


class Queries:
    """The reads of one ledger, over its index, lock and panel table."""

    def __init__(self, index: Index, lock: Lock, refresh: Callable[[], None], logs):
        self._index = index
        self._lock = lock
        self._refresh = refresh  # the ledger's: follow the tail, save a snapshot when due
        self._logs = logs  # where the records are read back (``logs``, ``pglogs``)
        self._usage_seen: tuple | None = None  # (what it was asked, its answer), reused

    def states(
        self, aliases: Iterable[str], shape: str, now: float | None = None
    ) -> dict[str, ModelState]:
        """Each alias's state for ``shape``, after one tail refresh."""
        now = time.time() if now is None else now
        self._refresh()
        out = {}
        ix = self._index
        with self._lock:
            turns = ix.turns.get(shape, 0)
            for alias in aliases:
                useful, not_useful = ix.counts.get((alias, shape), (0, 0))
                until = ix.cooling.get(alias, 0.0)
                last = ix.last_seated.get((alias, shape))
                out[alias] = ModelState(
                    last_seated=last,
                    useful=useful,
                    not_useful=not_useful,
                    cooling_until=until if until > now else 0.0,
                    window=ix.window.get(alias),
                    waited=None if last is None else turns - ix.turn_of.get((alias, shape), 0),
                )
        return out

    def call(self, call_id: str) -> dict | None:
        """The seat record of a call plus its current ``verdict`` (or None); None if unknown."""
        self._refresh()
        seat = self.seat(call_id)
        if seat is None:
            return None
        with self._lock:
            current = self._index.verdicts.get(call_id)
        seat["verdict"] = self._verdict_at(current >> V_OFFSET) if current is not None else None
        return seat

    def panel(self, panel_id: str) -> dict | None:
        """A finished panel's calls.jsonl record, through its panels.idx slot."""
        seq = panel_seq(panel_id)
        if seq is None:
            return None
        # kept on this instance while its database is away: read without the database
        record = self._logs.kept(seq)
        if record is None:
            pointer = self._logs.pointer(seq)
            if not pointer:
                return None  # never reserved (None), or reserved and still in flight (0)
            record = self._logs.panel_at(pointer)
        return record if record is not None and record.get("panel") == panel_id else None

    def recent_panels(self, n: int = 20) -> list[dict]:
        """The last ``n`` finished panels, newest first, read backwards from calls.jsonl's end."""
        return self._logs.recent_panels(n)

    def pending(
        self, *, key: str | None = None, limit: int = 50, oldest: bool = False
    ) -> list[dict]:
        """Recent seats that answered (ok or tool calls) and have no verdict yet, newest
        first (``oldest``: oldest first, the order a queue of owed verdicts is worked in: the
        order each became owed, its seat line or its panel's delivery)."""
        self._refresh()
        offsets: list[int] = []
        with self._lock:
            if oldest:
                # the queue holds only owed calls: no judged one is passed on the way
                recent = self._index.recent
                for call in self._index.owed_calls:
                    if len(offsets) >= limit:
                        break
                    entry = recent[call]
                    if key is None or entry[2] == key:
                        offsets.append(entry[0])
            else:
                for call, (offset, status, owner) in reversed(self._index.recent.items()):
                    if len(offsets) >= limit:
                        break
                    if (
                        status in ANSWERED
                        and call not in self._index.verdicts
                        and (key is None or owner == key)
                        and self._index.owing(call)
                    ):
                        offsets.append(offset)
        return [r for r in self._logs.evidence_many(offsets) if r is not None]

    def undelivered(self, *, key: str | None = None, limit: int = 50) -> list[dict]:
        """Recent finished panels whose reply never reached the caller, newest first, each with
        its answered seats that have no verdict: ``{"panel", "reason", "calls": [seat lines]}``,
        ``reason`` being ``abandoned`` (the caller left) or ``undelivered`` (seated awaiting
        delivery, finished, and no ``"delivered"`` line). Their seats are not owed verdicts
        (``pending`` and ``owed_count`` leave them out); a verdict on one is still taken."""
        self._refresh()
        found: list[tuple[str, int, list[int]]] = []
        ix = self._index
        with self._lock:
            for panel in reversed(ix.apart):
                if len(found) >= limit:
                    break
                listed = ix.panels[panel]
                state = listed[0]
                offsets = []
                for call in listed[1:]:
                    entry = ix.recent[call]
                    if call not in ix.verdicts and (key is None or entry[2] == key):
                        offsets.append(entry[0])
                if offsets and (state == ABANDONED or self._finished(panel)):
                    found.append((panel, state, offsets))
        logs = self._logs
        return [
            {
                "panel": panel,
                "reason": "abandoned" if state == ABANDONED else "undelivered",
                "calls": [r for r in logs.evidence_many(offsets) if r is not None],
            }
            for panel, state, offsets in found
        ]

    def _finished(self, panel_id: str) -> bool:
        """Whether the panel has its calls.jsonl line (one ``pread`` of its slot)."""
        seq = panel_seq(panel_id)
        return seq is not None and bool(self._logs.pointer(seq))

    def delivered_panel(self, content) -> str | None:
        """The panel whose delivered reply had this text (see ``reply_hash``), among the last
        ``recent_history`` delivered; None if none, or if more than one panel delivered it."""
        digest = reply_hash(content)
        if digest is None:
            return None
        self._refresh()
        with self._lock:
            return self._index.delivered.get(digest) or None

    def tool_call_owner(self, tool_call_id) -> tuple[str, str] | None:
        """``(panel, alias)`` of the seat that issued this tool call id, among the last
        ``recent_history`` ids seats issued; None if unknown, or if the id was issued more than
        once (by two seats, or in two panels)."""
        if not isinstance(tool_call_id, str):
            return None
        self._refresh()
        with self._lock:
            owner = self._index.tool_owner.get(tool_call_id)
        return owner if owner is not None and owner[1] is not None else None

    def panel_call(self, panel_id, alias, *, key: str | None = None) -> str:
        """The call id of ``alias``'s seat in a panel, for a verdict by panel and model.

        ``alias`` is a roster alias (its member, explorer or nominee seat; its merger seat only
        when it sat in no other), ``merger`` (the merger's call), or a seat label such as
        ``member2``. Finished panels are read through panels.idx; a panel still running (a
        picked reply goes out before the other seats end) through its answered calls in the
        recent map. With ``key``, a panel another gateway key asked is not found. Raises
        NotFound / BadRequest with what to send instead."""
        if panel_seq(panel_id) is None:
            raise errors.BadRequest(
                f"'{panel_id}' is not a panel id; a panel id looks like "
                "p20250101-7 (bench.panel in a reply, or its "
                "X-Panelist-Panel header)",
                param="panel",
            )
        record = self.panel(panel_id)
        if record is not None:
            seats = _seat_dicts(record) if key is None or record.get("key") == key else []
        else:
            self._refresh()
            with self._lock:
                listed = self._index.panels.get(panel_id)
                offsets = [self._index.recent[c][0] for c in listed[1:]] if listed else []
            seats = [
                r
                for r in self._logs.evidence_many(offsets)
                if r is not None and (key is None or r.get("key") == key)
            ]
        if not seats:
            raise errors.NotFound(
                f"unknown panel '{panel_id}', or none of its seats has "
                "answered yet; panel ids are bench.panel in a reply",
                param="panel",
            )
        seats = [s for s in seats if isinstance(s.get("call"), str)]
        if alias == "merger":
            found = [s for s in seats if s.get("seat") == "merger"]
        else:
            found = (
                [s for s in seats if s.get("alias") == alias and s.get("seat") != "merger"]
                or [s for s in seats if s.get("alias") == alias]
                or [s for s in seats if s["call"] == f"{panel_id}.{alias}"]
            )
        if len(found) == 1:
            return found[0]["call"]
        named = ", ".join(f"{s.get('alias')} ({s['call'].partition('.')[2]})" for s in seats)
        if found:
            raise errors.BadRequest(
                f"'{alias}' sat more than once in {panel_id} ("
                f"{', '.join(s['call'] for s in found)}); send 'call' with "
                "one of those call ids",
                param="alias",
            )
        raise errors.NotFound(
            f"no seat of '{alias}' in {panel_id}; its seats: {named or 'none'}"
            "; send one of those aliases, a seat label, 'merger', or the call "
            "id as 'call'",
            param="alias",
        )

    # ----------------------------------------------------------------- the dashboard's stats

    def model_stats(self, shape: str | None = None) -> dict[str, dict]:
        """What the logs say about each model, for one shape or (``None``) all shapes together.

        Returns ``{alias: {"seats", "ok", "useful", "not_useful", "false_claims",
        "last_answer", "p50", "p95", "failures"}}`` for every alias with a seat or a verdict
        logged in that shape (an alias with none is absent: treat it as all zeros):

        * ``seats``: seat lines (every status, mergers included); ``ok``: those that answered.
        * ``useful`` / ``not_useful``: current verdicts (a replaced verdict counts no more).
        * ``false_claims``: claims listed as false across the current verdicts.
        * ``last_answer``: epoch seconds when its newest ok answer came (panel start + the
          seat's seconds), or None.
        * ``p50`` / ``p95``: answer seconds of ok seats, from a log-spaced histogram (within
          4.4%, ``histogram.RESOLUTION``; under 1 ms reads 0.001), or None before any ok seat.
        * ``failures``: ``{kind: seats}`` for seats that did not answer; see ``failure_kind``.
        """
        self._refresh()
        out = {}
        with self._lock:
            if shape is None:
                counts: dict[str, list[int]] = {}
                for (alias, _), (u, n) in self._index.counts.items():
                    pair = counts.setdefault(alias, [0, 0])
                    pair[0] += u
                    pair[1] += n
                rows = self._index.alias_stats
            else:
                counts = {a: c for (a, s), c in self._index.counts.items() if s == shape}
                rows = {a: st for (a, s), st in self._index.stats.items() if s == shape}
            for alias, st in rows.items():
                u, n = counts.get(alias, (0, 0))
                out[alias] = st.view(u, n)
            empty = Stats()
            for alias, (u, n) in counts.items():
                if alias not in out and isinstance(alias, str):
                    out[alias] = empty.view(u, n)  # judged, yet no seat line of its own here
        return out

    def model_shapes(self, alias: str) -> dict[str, dict]:
        """``{shape: row}`` of one model, rows as ``model_stats(shape)`` gives them, for every
        shape it has a seat or a verdict in. O(models x shapes) key reads, one row built each."""
        self._refresh()
        out = {}
        with self._lock:
            ix = self._index
            for (a, shape), st in ix.stats.items():
                if a == alias:
                    out[shape] = st.view(*ix.counts.get((a, shape), (0, 0)))
            for (a, shape), (u, n) in ix.counts.items():
                if a == alias and shape not in out and isinstance(shape, str):
                    out[shape] = Stats().view(u, n)
        return out

    def shapes(self) -> list[str]:
        """Every shape a seat, seating or verdict was logged for, sorted."""
        self._refresh()
        with self._lock:
            ix = self._index
            found = {s for _, s in ix.stats} | {s for _, s in ix.counts} | set(ix.turns)
        return sorted(s for s in found if isinstance(s, str))

    def pairs(self, shape: str) -> dict[tuple[str, str], int]:
        """``{(better, worse): panels}`` for ``shape``: the panels where a call of ``better``
        was judged useful and one of ``worse`` not (``pairs.py``)."""
        self._refresh()
        with self._lock:
            return self._index.pairs.of(shape)

    def judged_panels(self, shape: str | None = None) -> list[tuple[str, str, list]]:
        """``[(panel, shape, [(call, alias, useful), ...])]``: the panels (of ``shape``, when
        given) whose current verdicts judge two answers or more, among the most recent
        ``panels_kept`` judged panels the index holds (``pairs.py``), oldest first. Read from
        memory: O(judged panels kept), no log is read."""
        self._refresh()
        out = []
        with self._lock:
            for panel, entry in self._index.pairs.panels.items():
                if len(entry) >= 7 and (shape is None or entry[0] == shape):
                    out.append(
                        (
                            panel,
                            entry[0],
                            [tuple(entry[i : i + 3]) for i in range(1, len(entry), 3)],
                        )
                    )
        return out

    def patterns(self, shape: str) -> dict[tuple, int]:
        """``{pattern: panels}`` for ``shape``: how many panels made exactly each sorted tuple
        of ``(better, worse)`` pairs (``pairs.py``), what the ratings' intervals need."""
        self._refresh()
        with self._lock:
            return self._index.pairs.patterns_of(shape)

    def patterns_stamp(self, shape: str) -> int:
        """A number that changes whenever ``patterns(shape)`` does (``Pairs.stamp``)."""
        self._refresh()
        with self._lock:
            return self._index.pairs.stamp(shape)

    def paired_shapes(self) -> list[str]:
        """The shapes with at least one pairwise outcome, sorted."""
        self._refresh()
        with self._lock:
            return sorted(s for s, w in self._index.pairs.wins.items() if w)

    def collection_stats(self) -> dict[str, dict]:
        """Per collection model id (``bench/<name>``): ``{"panels", "seats", "useful",
        "not_useful"}``. Panels are ``"seated"`` lines naming the collection, seats are seat
        lines naming it, and the verdict counts are current verdicts on its seats. A collection
        that was never asked is absent; one deleted since keeps its history."""
        self._refresh()
        with self._lock:
            return {
                name: dict(zip(("panels", "seats", "useful", "not_useful"), row))
                for name, row in self._index.collections.items()
            }

    def buckets(self, days: int = 30, now: float | None = None) -> dict:
        """Seats per alias per UTC day over the last ``days`` days (1 to ``KEEP_DAYS - 2``),
        today included, by each seat's panel start.

        Returns ``{"unit": "day", "start": <epoch s of the first day's 00:00 UTC>, "days": n,
        "series": {alias: [seats on each day, oldest first]}}``; an alias with no seat in the
        range is absent."""
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= KEEP_DAYS - 2:
            raise errors.BadRequest(f"'days' must be a whole number from 1 to {KEEP_DAYS - 2}")
        now = time.time() if now is None else now
        first = int(now // 86400) - days + 1
        self._refresh()
        series: dict[str, list[int]] = {}
        with self._lock:
            for i in range(days):
                for alias, n in self._index.days.get(first + i, {}).items():
                    row = series.get(alias)
                    if row is None:
                        row = series[alias] = [0] * days
                    row[i] = n
        return {"unit": "day", "start": first * 86400, "days": days, "series": series}

    def usage(self, window: str, now: float | None = None) -> dict:
        """Each model's seats over a recent window (``usage.WINDOWS``: ``hour``, ``day``,
        ``week``), by its seats' panel starts.

        Returns ``{"window", "since", "until", "models": {alias: {"seats", "answered",
        "failed", "error_rate", "p50", "p95", "prompt_tokens", "completion_tokens",
        "uncounted"}}}``: ``since`` is the window's first slot's start and ``until`` is ``now``
        (epoch seconds); ``failed`` counts the model's failures (not ``cancelled``,
        ``at_limit`` or ``memory`` seats, which are in ``seats`` only); ``error_rate`` is ``failed / (answered
        + failed)``, None without either; ``p50`` / ``p95`` are answered seats' seconds (within
        4.4%), None without an answer; the token counts are of seats that reported them whole,
        ``uncounted`` the answered seats that did not. A model with no seat in the window is
        absent."""
        if window not in windows.WINDOWS:
            raise errors.BadRequest(
                f"'window' must be one of {', '.join(windows.WINDOWS)}, not {window!r}",
                param="window",
            )
        now = time.time() if now is None else now
        first = int(now // windows.WINDOWS[window][0])
        self._refresh()
        with self._lock:
            asked = (window, first, self._index.ino, self._index.offset, len(self._index.past))
            seen = self._usage_seen
            if seen is not None and seen[0] == asked:
                models = seen[1]
            else:
                _, rows = self._index.usage.window(window, now)
                models = {
                    alias: _usage_view(row) for alias, row in rows.items() if isinstance(alias, str)
                }
                self._usage_seen = (asked, models)
        since = float((first - windows.WINDOWS[window][1] + 1) * windows.WINDOWS[window][0])
        return {
            "window": window,
            "since": since,
            "until": now,
            "models": {a: dict(v) for a, v in models.items()},
        }

    def series(
        self,
        window: str,
        *,
        aliases: list[str] | None = None,
        key: str | None = None,
        endpoint: str | None = None,
        now: float | None = None,
    ) -> dict:
        """The time axis of window ``window`` (``series.view``): the seats of ``aliases``
        summed, or else of gateway key ``key``, or else of the seats served through
        ``endpoint``, or else of the whole gateway."""
        if window not in windows.WINDOWS:
            raise errors.BadRequest(
                f"'window' must be one of {', '.join(windows.WINDOWS)}, not {window!r}",
                param="window",
            )
        now = time.time() if now is None else now
        self._refresh()
        with self._lock:
            ix = self._index
            since, width, _ = ix.usage.slots(window, now)
            scope = GATEWAY if key is None else f"key:{key}"
            if endpoint is not None:
                scope = f"endpoint:{endpoint}"
            rows = (
                ix.usage.rows(window, now, aliases)
                if aliases is not None
                else ix.scopes.rows(window, now, [scope])
            )
            return timeaxis.view(window, since, width, rows, now)

    def failing(self, failed: int, of: int) -> dict[str, dict]:
        """The models failing now: ``failed`` or more of their last ``of`` calls (gateway seats
        and probes; ``of`` at most ``outcomes.KEPT``) failed, or their newest call was a failed
        probe. ``{alias: {"failed", "of", "kind", "probe"}}``: how many of how many known
        (``of`` is fewer for a model with fewer calls), the newest failure's kind, and whether
        the newest call was a failed probe."""
        if not 1 <= failed <= of <= KEPT:
            raise errors.BadRequest(f"failing needs 1 <= failed <= of <= {KEPT}")
        self._refresh()
        out = {}
        with self._lock:
            outcomes = self._index.outcomes
            for alias in outcomes.bits:
                n, known = outcomes.recent(alias, of)
                probe = alias in outcomes.probe_failed
                if (n >= failed or probe) and isinstance(alias, str):
                    out[alias] = {
                        "failed": n,
                        "of": known,
                        "probe": probe,
                        "kind": outcomes.last_kind.get(alias),
                    }
        return out

    def answering(self) -> set[str]:
        """The aliases whose newest call (a gateway seat or a probe) answered."""
        self._refresh()
        with self._lock:
            return {
                a
                for a, v in self._index.outcomes.bits.items()
                if v > 1 and not v & 1 and isinstance(a, str)
            }

    def probes(self) -> dict[str, dict]:
        """Each probed model's newest probe: ``{alias: {"ts", "status", "error_kind", "error",
        "seconds"}}`` (``status`` ``ok`` when it answered)."""
        self._refresh()
        with self._lock:
            found = dict(self._index.outcomes.probes)
        return {
            a: dict(zip(("ts", "status", "error_kind", "error", "seconds"), p))
            for a, p in found.items()
            if isinstance(a, str)
        }

    def owed_count(self, key: str | None = None) -> int:
        """How many recent ok seats have no verdict yet (those ``pending`` lists), for one
        gateway key's name or (``None``) every key. O(1): a count kept as lines are folded."""
        self._refresh()
        with self._lock:
            return self._index.owed if key is None else self._index.owed_by_key.get(key, 0)

    def seat_totals(self) -> dict[str, tuple[int, int, dict[str, int], list[int] | None]]:
        """Per alias, over every shape: ``(seats, answered, {failure kind: seats}, the dense
        answer-time histogram or None)``, copied out of the index (``GET /metrics``)."""
        self._refresh()
        with self._lock:
            return {
                a: (st.seats, st.ok, dict(st.failures), None if st.hist is None else list(st.hist))
                for a, st in self._index.alias_stats.items()
                if isinstance(a, str)
            }

    def keys_last_used(self) -> dict[str, float]:
        """When each caller (a gateway key's name, or ``local``) last started a panel, in epoch
        seconds, from its seats' lines."""
        self._refresh()
        with self._lock:
            return dict(self._index.key_last)

    def verdict_count(self) -> int:
        """How many calls have a current verdict."""
        self._refresh()
        with self._lock:
            return len(self._index.verdicts)

    def verdict_of(self, call: str) -> dict | None:
        """The current verdict of a call, ``{"useful", "note", "real", "false", "by", "ts"}``,
        or None if it has none (or is no call)."""
        self._refresh()
        with self._lock:
            current = self._index.verdicts.get(call) if isinstance(call, str) else None
        return None if current is None else self._verdict_at(current >> V_OFFSET)

    def latest_panel(self) -> str | None:
        """The id of the finished panel with the highest seq, or None if none has finished."""
        page, _ = self.panels_page(None, 1)
        return page[0]["panel"] if page else None

    def panels_page(
        self, before_seq: int | None = None, limit: int = 50
    ) -> tuple[list[dict], int | None]:
        """Finished panels, newest first: at most ``limit`` (1 to ``MAX_PAGE``) of those whose
        seq (``panel_seq``) is below ``before_seq`` (``None``: from the newest).

        Returns ``(panels, next_seq)``; pass ``next_seq`` as ``before_seq`` for the next page,
        None when no older panel is left. Normally ``next_seq`` is the seq of the last panel
        returned; when a page stops early because it passed over ``MAX_SCAN`` empty slots it is
        the seq to go on from, and may name no panel (``panel_seq`` reads only the number, so
        ``p00000000-<seq>`` serves as a cursor id). The last page may come back empty.
        Panels still in flight (or reserved and never logged) are skipped.

        Each panel is a summary of its calls.jsonl line, without prompt or answers:
        ``{"panel", "collection", "key", "started", "seconds", "shape", "reply", "seats",
        "merger", "abandoned"}``, where each seat (and the merger, or None) is ``{"call",
        "seat", "alias", "status", "seconds", "verdict"}`` and ``verdict`` is the current
        verdict's usefulness (True / False) or None."""
        limit = _page_limit(limit)
        if before_seq is not None and (
            isinstance(before_seq, bool) or not isinstance(before_seq, int)
        ):
            raise errors.BadRequest("'before' must be a panel id or seq")
        self._refresh()  # for the seats' verdicts
        fd, count = self._logs.count()
        pos = count if before_seq is None else max(0, min(before_seq, count))
        found: list[tuple[int, int]] = []
        next_seq = None
        scanned = 0
        while pos > 0 and len(found) < limit:
            if scanned >= MAX_SCAN:
                next_seq = pos
                break
            n = min(SCAN_SLOTS, pos)
            pos -= n
            block = self._logs.slots(fd, pos, n)
            scanned += n
            for i in range(len(block) - 1, -1, -1):
                if block[i]:
                    if len(found) == limit:  # one more exists: there is a next page
                        next_seq = found[-1][0]
                        break
                    found.append((pos + i, block[i]))
            else:
                if len(found) == limit and pos > 0:
                    next_seq = found[-1][0]  # the block ended with the page: maybe more
        return self._summaries(found), next_seq

    def panels_after(
        self, seq: int | None, limit: int = 50, *, wait: float = 600.0, now: float | None = None
    ) -> tuple[list[dict], int]:
        """Finished panels with a seq above ``seq`` (``None``: from the first), oldest first,
        at most ``limit`` (1 to ``MAX_PAGE``): the cursor poll of a live list. Same summaries as
        ``panels_page``.

        Returns ``(panels, next_seq)``; poll again with ``next_seq`` as ``seq`` (rather than the
        seq of the newest panel returned). ``next_seq`` is never below ``seq`` (it is -1 for
        ``seq=None`` while there is no panel), and it is:

        * the last panel's seq, when the page is full;
        * else just below the oldest panel still in flight that was seated less than ``wait``
          seconds ago (or reserved, its seating not logged yet), so that panel is returned when
          it finishes rather than passed over; the panels after it come again on the next poll,
          so dedupe by ``panel``;
        * else the last slot looked at.

        A slot seated more than ``wait`` seconds ago, or never seated while later panels were,
        is taken for abandoned (its process died) and passed over. ``next_seq`` may name no
        finished panel: as a cursor id, ``p00000000-<seq>`` serves (``panel_seq`` reads only
        the number)."""
        limit = _page_limit(limit)
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
            raise errors.BadRequest("'after' must be a panel id or seq")
        now = time.time() if now is None else now
        self._refresh()
        fd, count = self._logs.count()
        start = 0 if seq is None else max(0, seq + 1)
        with self._lock:
            seatings, top_seating = dict(self._index.seatings), self._index.top_seating
        found: list[tuple[int, int]] = []
        hold = None
        pos = start
        while pos < count and len(found) < limit and pos - start < MAX_SCAN:
            n = min(SCAN_SLOTS, count - pos)
            block = self._logs.slots(fd, pos, n)
            for i, pointer in enumerate(block):
                if pointer:
                    found.append((pos + i, pointer))
                    if len(found) == limit:
                        break
                elif hold is None:
                    at = seatings.get(pos + i)
                    if pos + i > top_seating or (at is not None and at > now - wait):
                        hold = pos + i
            pos += len(block)
            if len(block) < n:
                break
        if len(found) == limit:
            next_seq = found[-1][0]
        elif hold is not None:
            next_seq = hold - 1
        else:
            next_seq = pos - 1  # every slot up to here is finished or given up
        return self._summaries(found), next_seq

    def summaries(self, seqs: Iterable[int]) -> list[dict]:
        """The summaries (as ``panels_page`` gives them) of the finished panels with these
        seqs, in that order; a seq with no finished panel is left out. One slot read each."""
        self._refresh()  # for the seats' verdicts
        found = [
            (seq, pointer)
            for seq in seqs
            if isinstance(seq, int) and seq >= 0 and (pointer := self._logs.pointer(seq))
        ]
        return self._summaries(found)

    def _summaries(self, found: list[tuple[int, int]]) -> list[dict]:
        """The summaries of the panels at ``(seq, pointer)``, in that order."""
        records = self._logs.panels_at([pointer for _, pointer in found])
        out = []
        for (seq, _), record in zip(found, records):
            if record is not None and panel_seq(record.get("panel")) == seq:
                out.append(record)
        calls = [s.get("call") for r in out for s in _seat_dicts(r)]
        with self._lock:
            judged = {
                c: bool(v & 1)
                for c in calls
                if isinstance(c, str) and (v := self._index.verdicts.get(c)) is not None
            }
        return [_summary(r, judged) for r in out]

    def seat(self, call_id: str) -> dict | None:
        """The seat record from the recent map, else from the finished panel's line."""
        with self._lock:
            hit = self._index.recent.get(call_id)
        if hit is not None:
            record = self._logs.evidence_at(hit[0])
            if record is not None and record.get("call") == call_id:
                return record
        if not isinstance(call_id, str):
            return None
        panel_id = call_id.split(".", 1)[0]
        record = self.panel(panel_id)
        if record is None:
            return None
        for seat in record.get("seats") or ():
            if isinstance(seat, dict) and seat.get("call") == call_id:
                seat = dict(seat)
                seat.setdefault("panel", panel_id)
                for field in ("shape", "key", "collection"):
                    if field not in seat:
                        seat[field] = record.get(field)
                return seat
        return None

    def _verdict_at(self, offset: int) -> dict | None:
        record = self._logs.evidence_at(offset)
        return verdict_view(record) if record is not None else None


def _usage_view(row: list) -> dict:
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
        "prompt_tokens": row[windows.PROMPT],
        "completion_tokens": row[windows.COMPLETION],
        "uncounted": row[windows.UNCOUNTED],
    }


def _page_limit(limit) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise errors.BadRequest(f"'limit' must be a whole number from 1 to {MAX_PAGE}")
    return limit


def _seat_dicts(record: dict) -> list[dict]:
    seats = [s for s in record.get("seats") or () if isinstance(s, dict)]
    merger = record.get("merger")
    return seats + [merger] if isinstance(merger, dict) else seats


def _summary(record: dict, judged: dict[str, bool]) -> dict:
    """A calls.jsonl panel line without prompt or answers, each seat with its verdict."""

    def seat(s: dict) -> dict:
        out = {k: s.get(k) for k in _SEAT_SUMMARY}
        call = s.get("call")
        out["verdict"] = judged.get(call) if isinstance(call, str) else None
        return out

    out = {k: record.get(k) for k in _PANEL_SUMMARY}
    seats = record.get("seats")
    out["seats"] = (
        [seat(s) for s in seats if isinstance(s, dict)] if isinstance(seats, list) else []
    )
    merger = record.get("merger")
    out["merger"] = seat(merger) if isinstance(merger, dict) else None
    out["abandoned"] = record.get("abandoned") is True
    return out
