"""The ledger's index: the pure fold of evidence records into what seating and the queries read.

Records in, state out: ``Index.fold`` takes one evidence.jsonl record and its byte offset and
updates the maps below; nothing here opens a file or reads the clock (``fold_all`` is told the
time). The ledger (``ledger.py``) follows the log's tail and feeds every record through here,
``snapshot.py`` saves and restores the maps, ``queries.py`` reads them under the ledger's lock.
The fields are public to those three; no other module touches them.

Invariants:

* The index is always "evidence.jsonl (inode ``ino``) up to byte offset ``offset``": every record
  before ``offset`` was folded exactly once, and ``reset`` empties it for a replay. On a
  database ``offset`` is a transaction horizon and ``past`` holds the ``(xid, id)`` of the rows
  folded beyond it (``store.pgfollow``); on files ``past`` stays empty.
* It holds aggregates, never every call: per (alias, shape) the most recent seating time and the
  useful / not-useful counts; per alias the cooldown and the learned window; the current
  verdict of each judged call (its line's offset and usefulness); and a bounded map of the most
  recent seat records (call -> offset). Older calls are found through panels.idx and calls.jsonl.
* For the queries it also holds: per (alias, shape) and per alias the seats, ok seats, false
  claims, newest answer, failures by kind and a fixed log-spaced histogram of ok seats' seconds
  (``histogram``: quantiles within 4.4%, at the same cost at any log size); per alias its
  seats in the recent windows (``usage``: the last hour, day and week; ``scopes`` keeps the same
  slots per gateway key as ``"key:NAME"``, per endpoint the seat record names as
  ``"endpoint:NAME"`` and, under ``GATEWAY``, for every seat) and the outcomes of its
  latest calls and its newest probe (``outcomes``), the only use of ``"probe"`` lines (an
  endpoint Test's, role ``test``, change nothing); per collection its panels (``"seated"`` lines
  naming it), seats and verdict counts; seats per alias per UTC day for the last ``KEEP_DAYS``
  days (older days are dropped as newer ones arrive); the last ``SEATINGS_KEPT`` seatings (panel
  seq -> start) so a poll can wait for a panel still in flight; and the count of recent ok seats
  still owed a verdict, per key, with those calls queued in the order each became owed
  (``owed_calls``). The owed count covers exactly the recent map: a seat leaving it (eviction),
  getting its first verdict or its panel abandoned stops counting and leaves the queue;
  ``recount_owed`` rebuilds both from the recent map.
* A judged call's entry packs, in one int, its verdict line's offset, the number of false claims
  that verdict listed (capped at ``FALSE_CAP``), whether it was counted in a collection, and its
  usefulness: a replacing verdict uncounts all of its predecessor's in O(1), without reading the
  old line.
* Per shape, the pairwise outcomes of the verdicts on one panel (``pairs``: a useful call's
  model over a not-useful call's, among the most recent ``panels_kept`` judged panels), which
  the ratings are fitted from without reading a log.
* Seating is counted in turns: a shape's turn is how many ``"seated"`` lines it has, in log order
  (so every process counts the same turns), and each (alias, shape) keeps the turn of its last
  seat. Older seat lines (without a ``"seated"`` line) still set the seating time, not a turn.
* The last verdict for a call wins, and its counts are keyed by the seat's alias and shape (which
  the verdict record carries, so a replay needs no seat lookup). Learned windows only go down;
  the latest cooldown for an alias wins (so 0 seconds clears one).
* A seat is owed a verdict only once the caller has its panel's reply. A panel seated with
  ``awaits_delivery`` owes nothing until a ``"delivered"`` line names it; a panel seated without
  it is taken as delivered unless an ``"abandoned"`` line names it, or, for logs from before
  those lines, it is among the panels ``fold_all`` is told were abandoned (calls.jsonl says so;
  read only for a replay from the start). A ``"delivered"`` line wins over an ``"abandoned"``
  one, in either order. Each recent panel's state is kept with its answered calls in the recent
  map (at most ``panels_kept`` panels; a panel leaving takes its calls with it; a delivered or
  unmarked panel whose last call left the map is forgotten, as it then owes like an unknown
  one), so the owed count and ``pending`` always agree and a state change recounts in O(seats).
* Delivered replies and the tool calls seats made are kept for multi-turn history: the hash of
  each delivered reply's text -> panel, and each tool call id -> (panel, alias), the most recent
  ``recent_history`` of each. A text two panels delivered, or a tool call id issued twice, names
  no panel: history must not mistake one turn for another.
* A line that is hand-edited or foreign (a field missing or of the wrong type) is skipped, as
  the tail reader skips torn ones.
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict
from dataclasses import dataclass
from hashlib import blake2b
from typing import Iterable

from panelist.metrics import errors
from panelist.metrics.ledger.histogram import HIST_BUCKETS, hist_bucket, hist_quantiles
from panelist.metrics.ledger.ids import ID_MARGIN, panel_seq
from panelist.metrics.ledger.outcomes import ERROR_CHARS, NOT_OUTCOMES, Outcomes
from panelist.metrics.ledger.pairs import Pairs
from panelist.metrics.ledger.usage import ANSWER, FAILURE, NEITHER, Usage

KEEP_DAYS = 62  # days of per-day seat counts kept; buckets() serves up to 60
SEATINGS_KEPT = ID_MARGIN  # recent seatings remembered for panels_after
RECENT_HISTORY = 20_000  # delivered replies and tool call ids remembered for history
# Verdict entries: offset << V_OFFSET | false claims << 2 | counted in a collection << 1 | useful
FALSE_CAP = 0xFFFF
V_OFFSET = 18
# a panel's delivery state: None (seated without awaits_delivery: delivered unless abandoned)
AWAITING, DELIVERED, ABANDONED = 0, 1, 2
# the seat statuses of an answer a caller can judge; every other status is a failure
ANSWERED = frozenset({"ok", "tool_calls"})
GATEWAY = ""  # the whole gateway's name in ``scopes`` (others are "key:NAME" ...)
_NUMBER = (int, float)  # tested by exact class, so a bool is no number
_INF = math.inf


@dataclass
class ModelState:
    """What seating needs to know about one model for one shape."""

    last_seated: float | None  # epoch seconds: panel start of its most recent seat for this shape
    useful: int
    not_useful: int
    cooling_until: float  # epoch seconds; 0.0 if not cooling
    window: int | None  # lowest context window learned from an upstream error
    # panels of this shape seated since its last seat for it (0: it sat in the latest), None if
    # never seated; a seat known only from before "seated" lines existed counts every turn
    waited: int | None = None


def reply_hash(text) -> str | None:
    """The key a delivered reply's text is found by: a hash of the text without its outer
    whitespace (clients trim it); None for no text."""
    if not isinstance(text, str) or not text.strip():
        return None
    return blake2b(text.strip().encode("utf-8", "replace"), digest_size=16).hexdigest()


def intern(value):
    """``sys.intern`` for strings (the index keeps one copy of each alias, shape and key)."""
    return sys.intern(value) if isinstance(value, str) else value


def _error_kinds() -> frozenset[str]:
    kinds, todo = set(), [errors.UpstreamError]
    while todo:
        cls = todo.pop()
        kinds.add(cls.kind)
        todo.extend(cls.__subclasses__())
    return frozenset(kinds | {"internal"})  # "internal": a bug in one seat (panel.py)


# every word a seat's error may start with; anything else is counted as "other"
FAILURE_KINDS = _error_kinds()


def failure_kind(status, error) -> str | None:
    """The failure kind of a seat record, or None if it did not fail.

    ``empty`` and ``cancelled`` are their statuses; an ``error`` seat's kind is the word its
    error text starts with, before the first ":" (``"timeout: ..."`` is ``timeout``), if that is
    one of ``FAILURE_KINDS``, else ``other``. Any other status (``ok``) is no failure."""
    if status in ("empty", "cancelled"):
        return status
    if status != "error":
        return None
    word = error.partition(":")[0].strip() if isinstance(error, str) else ""
    return word if word in FAILURE_KINDS else "other"


class Stats:
    """Seat aggregates for one (alias, shape), or for one alias over every shape."""

    __slots__ = ("seats", "ok", "false_claims", "last_answer", "hist", "failures")

    def __init__(self):
        self.seats = self.ok = self.false_claims = 0
        self.last_answer: float | None = None
        self.hist: list[int] | None = None  # made at the first ok seat
        self.failures: dict[str, int] = {}

    def copy(self) -> "Stats":
        other = Stats()
        other.seats, other.ok, other.false_claims = self.seats, self.ok, self.false_claims
        other.last_answer = self.last_answer
        other.hist = None if self.hist is None else list(self.hist)
        other.failures = dict(self.failures)
        return other

    def encode(self) -> list:
        sparse = [x for i, n in enumerate(self.hist or ()) if n for x in (i, n)]
        return [self.seats, self.ok, self.false_claims, self.last_answer, sparse, self.failures]

    @classmethod
    def decode(cls, row: list) -> "Stats":
        st = cls()
        seats, ok, false_claims, last, sparse, failures = row
        st.seats, st.ok, st.false_claims = int(seats), int(ok), int(false_claims)
        st.last_answer = None if last is None else float(last)
        if sparse:
            st.hist = [0] * HIST_BUCKETS
            for i, n in zip(sparse[::2], sparse[1::2], strict=True):
                st.hist[int(i)] = int(n)  # an index out of range is an IndexError: replayed
        st.failures = {intern(k): int(n) for k, n in failures.items()}
        return st

    def view(self, useful: int, not_useful: int) -> dict:
        p50, p95 = hist_quantiles(self.hist, 0.5, 0.95)
        return {
            "seats": self.seats,
            "ok": self.ok,
            "useful": useful,
            "not_useful": not_useful,
            "false_claims": self.false_claims,
            "last_answer": self.last_answer,
            "p50": p50,
            "p95": p95,
            "failures": dict(self.failures),
        }


class Index:
    """The folded state of one evidence log; the caller serialises access (the ledger's lock)."""

    def __init__(self, *, recent_calls: int = 100_000, recent_history: int = RECENT_HISTORY):
        self.recent_calls = max(0, int(recent_calls))
        self.panels_kept = max(16, self.recent_calls)  # delivery states kept
        self.recent_history = max(1, int(recent_history))
        self.reset(None)

    def reset(self, ino: int | None, offset: int = 0) -> None:
        """Empty the index, to cover file ``ino`` from ``offset`` (0: a replay)."""
        self.ino = ino
        self.offset = offset
        self.past: set[tuple[int, int]] = set()
        self.last_seated: dict[tuple[str, str], float] = {}
        self.turns: dict[str, int] = {}  # shape -> "seated" lines folded
        self.turn_of: dict[tuple[str, str], int] = {}  # (alias, shape) -> its last seat's turn
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.cooling: dict[str, float] = {}
        self.window: dict[str, int] = {}
        # call -> offset of its current verdict line, its false claims, whether a collection
        # counted it, and its usefulness, packed into one int (see V_OFFSET). The note and
        # claims are compared on the line itself, and the alias, shape and collection a
        # replacement must uncount are the seat's, which the replacing record carries too.
        self.verdicts: dict[str, int] = {}
        # call -> (offset of the seat line, status, key); oldest first, at most recent_calls
        self.recent: OrderedDict[str, tuple] = OrderedDict()
        # the query aggregates (see the module docstring)
        self.stats: dict[tuple[str, str], Stats] = {}
        self.alias_stats: dict[str, Stats] = {}  # the same, over every shape
        self._pairs: dict[tuple[str, str], tuple] = {}  # key -> both of the above (a cache)
        self.collections: dict[str, list[int]] = {}  # [panels, seats, useful, not useful]
        self.days: dict[int, dict[str, int]] = {}  # UTC day number -> alias -> seats
        self.top_day = -1
        self.seatings: OrderedDict[int, float] = OrderedDict()  # panel seq -> start
        self.top_seating = -1  # highest seq a "seated" line named
        self.owed = 0  # recent ok seats without a verdict
        self.owed_by_key: dict = {}  # the same per key (None: no key)
        # the owed calls themselves, in the order each became owed (its seat line, or its
        # panel's delivery): the queue's oldest are read without passing judged calls. An
        # OrderedDict, as a plain dict's iteration still steps over the slots its removals
        # at the front leave until it is resized
        self.owed_calls: OrderedDict[str, None] = OrderedDict()
        self.key_last: dict[str, float] = {}  # key name -> newest panel start
        self.late_day = 0  # set by each fold_all
        # panel -> [delivery state, its answered calls in the recent map...]; oldest first
        self.panels: OrderedDict[str, list] = OrderedDict()
        # the panels of ``panels`` awaiting delivery or abandoned, which ``undelivered`` reads
        self.apart: dict[str, None] = {}
        # tool call id -> (panel, alias), alias None when the id was issued more than once
        self.tool_owner: OrderedDict[str, tuple] = OrderedDict()
        # reply_hash -> panel ("" when two panels delivered the same text)
        self.delivered: OrderedDict[str, str] = OrderedDict()
        # panels calls.jsonl says were abandoned, known only while fold_all replays from 0
        self._old_abandoned: frozenset[str] = frozenset()
        self.usage = Usage()  # seats per alias in the recent windows
        self.scopes = Usage()  # the same per gateway key, and GATEWAY's for all
        self.outcomes = Outcomes()  # each alias's latest outcomes and newest probe
        self.pairs = Pairs(self.panels_kept)  # per shape, who was judged better on a panel

    def fold_all(
        self,
        records: Iterable[tuple[int, dict]],
        now: float,
        abandoned: frozenset[str] = frozenset(),
    ) -> int:
        """Fold ``(offset, record)`` pairs read at ``now`` (epoch seconds); ``abandoned``: the
        panels calls.jsonl says the caller left, for a replay from the start. Returns the count;
        the caller moves ``offset`` past the last line read."""
        # a seat dated more than a day ahead is a broken clock or a hand edit: it must not push
        # the day buckets forward and drop every real day
        self.late_day = int(now // 86400) + 1
        self.usage.advance(now)
        self.scopes.advance(now)
        self._old_abandoned = abandoned
        n = 0
        try:
            for offset, record in records:
                self.fold(offset, record)
                n += 1
        finally:
            self._old_abandoned = frozenset()
        return n

    def recount_owed(self, order: Iterable[str] = ()) -> None:
        """Count the owed verdicts again from the recent map (after a snapshot is loaded);
        ``order``: the owed calls as they were queued, which the queue keeps (calls owed but
        not named there follow, in the recent map's order)."""
        self.owed, self.owed_by_key, self.owed_calls = 0, {}, OrderedDict()
        for call, entry in self.recent.items():
            self._owe(call, entry, +1)
        owed = self.owed_calls
        queued = OrderedDict((c, None) for c in order if c in owed)
        for call in owed:
            if call not in queued:
                queued[call] = None
        self.owed_calls = queued

    def fold(self, offset: int, rec: dict) -> None:
        """Fold one evidence record, the line at byte ``offset``; unknown kinds change nothing."""
        kind = rec.get("kind")
        try:
            if kind == "seat":
                self._fold_seat(offset, rec)
            elif kind == "probe":
                self._fold_probe(rec)
            elif kind == "seated":
                self._fold_seated(rec)
            elif kind == "delivered":
                self._fold_delivered(rec)
            elif kind == "abandoned":
                self._fold_abandoned(rec)
            elif kind == "verdict":
                self._fold_verdict(offset, rec)
            elif kind == "cooldown":
                self.cooling[intern(rec["alias"])] = float(rec["until"])
            elif kind == "window":
                alias, tokens = intern(rec["alias"]), int(rec["tokens"])
                if tokens < self.window.get(alias, tokens + 1):
                    self.window[alias] = tokens
        except (KeyError, TypeError, ValueError):
            pass  # a hand-edited or foreign line: the index skips it as Tail skips torn ones

    def _fold_seat(self, offset: int, rec: dict) -> None:
        call = rec["call"]
        if not isinstance(call, str):
            return
        key = (intern(rec["alias"]), intern(rec["shape"]))
        seated = rec.get("seated")
        if isinstance(seated, (int, float)) and seated > self.last_seated.get(key, -1.0):
            self.last_seated[key] = float(seated)  # max: processes append slightly out of order
        status, owner = intern(rec.get("status")), intern(rec.get("key"))
        if (
            isinstance(owner, str)
            and isinstance(seated, (int, float))
            and seated > self.key_last.get(owner, -1.0)
        ):
            self.key_last[owner] = float(seated)
        recent = self.recent
        old = recent.get(call)
        if old is not None:
            self._owe(call, old, -1)
            self._unlist(call, old)
            recent.move_to_end(call)
        recent[call] = entry = (offset, status, owner)
        if status in ANSWERED:
            # listed with its panel before it is counted: the panel may be known abandoned
            listed = self._panel_entry(call.partition(".")[0])
            if call not in listed:
                listed.append(call)
        self._owe(call, entry, +1)
        while len(recent) > self.recent_calls:
            gone, was = recent.popitem(last=False)
            self._owe(gone, was, -1)
            self._unlist(gone, was)
        tools = rec.get("tool_calls")
        if tools.__class__ is list and tools and isinstance(key[0], str):
            self._fold_tool_ids(call.partition(".")[0], key[0], tools)
        if isinstance(key[0], str) and isinstance(key[1], str):
            self._fold_seat_stats(key, rec, status, seated)

    def _fold_seat_stats(self, key: tuple[str, str], rec: dict, status, seated) -> None:
        """The query aggregates of one seat line. (Written for speed: a replay folds millions.)"""
        pair = self._pairs.get(key) or self._pair(key)
        # the class test keeps bools out; the range test keeps NaN and infinities out
        if not (seated.__class__ in _NUMBER and -_INF < seated < _INF):
            seated = None
        failed = None
        outcome = ANSWER
        if status in ANSWERED:
            seconds = rec.get("seconds")
            if seconds.__class__ in _NUMBER and 0 <= seconds < _INF:
                bucket = hist_bucket(seconds)
            else:
                bucket, seconds = None, 0.0
            # when the answer came: its panel's start plus the seat's seconds
            end = None if seated is None else seated + seconds
            for st in pair:
                st.seats += 1
                st.ok += 1
                if bucket is not None:
                    hist = st.hist
                    if hist is None:
                        hist = st.hist = [0] * HIST_BUCKETS
                    hist[bucket] += 1
                if end is not None and (st.last_answer is None or end > st.last_answer):
                    st.last_answer = end
        else:
            bucket = None
            kind = failed = failure_kind(status, rec.get("error"))
            outcome = NEITHER if kind is None or kind in NOT_OUTCOMES else FAILURE
            for st in pair:
                st.seats += 1
                if kind is not None:
                    st.failures[kind] = st.failures.get(kind, 0) + 1
        self.outcomes.fold(key[0], failed)
        if seated is not None and seated >= self.usage.kept_from:
            tokens = rec.get("tokens")
            prompt = completion = None
            if tokens.__class__ is dict:
                prompt, completion = tokens.get("prompt"), tokens.get("completion")
                if prompt.__class__ is not int or completion.__class__ is not int:
                    prompt = completion = None
            self.usage.fold(key[0], seated, outcome, bucket, prompt, completion)
            scopes = self.scopes
            scopes.fold(GATEWAY, seated, outcome, bucket, prompt, completion)
            for kind in ("key", "endpoint"):
                name = rec.get(kind)
                if name.__class__ is str and name:
                    scopes.fold(
                        intern(f"{kind}:{name}"), seated, outcome, bucket, prompt, completion
                    )
        collection = rec.get("collection")
        if collection.__class__ is str:
            row = self.collections.get(collection) or self._collection(collection)
            row[1] += 1
        if seated is not None:
            day = int(seated // 86400)
            if day > self.top_day and day <= self.late_day:
                self.top_day = day
                for old in [d for d in self.days if d <= day - KEEP_DAYS]:
                    del self.days[old]
            if self.top_day - KEEP_DAYS < day <= self.top_day:
                per = self.days.get(day)
                if per is None:
                    per = self.days[day] = {}
                per[key[0]] = per.get(key[0], 0) + 1

    def _fold_probe(self, rec: dict) -> None:
        """A health probe's outcome (an endpoint Test's, role ``test``, is no model's)."""
        alias = rec["alias"]
        if alias.__class__ is not str or not alias or rec.get("role", "probe") != "probe":
            return
        status = rec.get("status")
        kind = None
        if status not in ANSWERED:
            kind = rec.get("error_kind") or status
            kind = intern(kind) if isinstance(kind, str) else "other"
        error, seconds, ts = rec.get("error"), rec.get("seconds"), rec.get("ts")
        self.outcomes.fold(
            intern(alias),
            kind,
            (
                ts if isinstance(ts, str) else None,
                "ok" if kind is None else (status if isinstance(status, str) else "error"),
                kind,
                error[:ERROR_CHARS] if isinstance(error, str) and kind is not None else "",
                seconds if seconds.__class__ in _NUMBER and 0 <= seconds < _INF else None,
            ),
        )

    def _owe(self, call: str, entry: tuple, step: int) -> None:
        """Count a recent-map entry in (+1) or out of (-1) the verdicts owed."""
        if entry[1] in ANSWERED and call not in self.verdicts and self.owing(call):
            self.owed += step
            if step > 0:
                self.owed_calls[call] = None
            else:
                self.owed_calls.pop(call, None)
            n = self.owed_by_key.get(entry[2], 0) + step
            if n:
                self.owed_by_key[entry[2]] = n
            else:
                self.owed_by_key.pop(entry[2], None)

    def owing(self, call: str) -> bool:
        """Whether the caller had the reply of this call's panel (see the module docstring)."""
        listed = self.panels.get(call.partition(".")[0])
        return listed is None or listed[0] is None or listed[0] == DELIVERED

    def _panel_entry(self, panel: str) -> list:
        """The panel's ``[state, calls...]``, made (oldest panels leaving) if new."""
        listed = self.panels.get(panel)
        if listed is None:
            listed = self.panels[panel] = [ABANDONED if panel in self._old_abandoned else None]
            if listed[0] is not None:
                self.apart[panel] = None
            while len(self.panels) > self.panels_kept:
                self._drop_panel(next(iter(self.panels)))
        return listed

    def _drop_panel(self, panel: str) -> None:
        """Forget a panel's state, and its calls still in the recent map with it (they are
        among the oldest): counted under one state, a call never changes count silently."""
        for call in self.panels[panel][1:]:
            entry = self.recent.pop(call, None)
            if entry is not None:
                self._owe(call, entry, -1)
        del self.panels[panel]
        self.apart.pop(panel, None)

    def _unlist(self, call: str, entry: tuple) -> None:
        """Take a call leaving the recent map (or changing) off its panel's list; a panel left
        with no call and owing like an unlisted one (delivered, or no state) is forgotten."""
        if entry[1] in ANSWERED:
            panel = call.partition(".")[0]
            listed = self.panels.get(panel)
            if listed is not None and call in listed:
                listed.remove(call)
                if len(listed) == 1 and (listed[0] is None or listed[0] == DELIVERED):
                    del self.panels[panel]

    def _set_state(self, panel: str, state: int) -> None:
        """Move a panel to ``state``, recounting its answered calls as owed or not."""
        listed = self._panel_entry(panel)
        if listed[0] == state:
            return
        recent = self.recent
        for call in listed[1:]:
            self._owe(call, recent[call], -1)
        listed[0] = state
        for call in listed[1:]:
            self._owe(call, recent[call], +1)
        if state == AWAITING or state == ABANDONED:
            self.apart[panel] = None
        else:
            self.apart.pop(panel, None)

    def _fold_delivered(self, rec: dict) -> None:
        panel = rec["panel"]
        if panel_seq(panel) is None:
            return
        self._set_state(panel, DELIVERED)
        digest = rec.get("hash")
        if digest.__class__ is str:
            known = self.delivered.get(digest)
            # the same text delivered by two panels ("Done.") names neither: "" marks it
            self.delivered[digest] = panel if known is None or known == panel else ""
            self.delivered.move_to_end(digest)
            if len(self.delivered) > self.recent_history:
                self.delivered.popitem(last=False)

    def _fold_abandoned(self, rec: dict) -> None:
        panel = rec["panel"]
        if panel_seq(panel) is not None and self._panel_entry(panel)[0] != DELIVERED:
            self._set_state(panel, ABANDONED)

    def _fold_tool_ids(self, panel: str, alias: str, tools: list) -> None:
        owners = self.tool_owner
        for tool in tools:
            tid = tool.get("id") if tool.__class__ is dict else None
            if tid.__class__ is not str or not tid:
                continue
            known = owners.get(tid)
            # an id issued twice (by two seats, or in two panels: some servers number their
            # calls, and the client numbers calls that came without an id) has no owner
            owners[tid] = (
                (panel, None) if known is not None and known != (panel, alias) else (panel, alias)
            )
            owners.move_to_end(tid)
            if len(owners) > self.recent_history:
                owners.popitem(last=False)

    def _collection(self, name: str) -> list[int]:
        row = self.collections.get(name)
        if row is None:
            row = self.collections[intern(name)] = [0, 0, 0, 0]
        return row

    def _fold_seated(self, rec: dict) -> None:
        shape, seated, aliases = rec["shape"], rec["seated"], rec["aliases"]
        if (
            not isinstance(shape, str)
            or isinstance(seated, bool)
            or not isinstance(seated, (int, float))
            or not isinstance(aliases, list)
        ):
            return
        shape = intern(shape)
        turn = self.turns.get(shape, 0) + 1
        self.turns[shape] = turn
        for alias in aliases:
            if isinstance(alias, str):
                key = (intern(alias), shape)
                self.turn_of[key] = turn
                if seated > self.last_seated.get(key, -1.0):
                    self.last_seated[key] = float(seated)
        collection = rec.get("collection")
        if isinstance(collection, str):
            self._collection(collection)[0] += 1
        seq = panel_seq(rec.get("panel"))
        if seq is not None and rec.get("awaits_delivery") is True:
            listed = self._panel_entry(rec["panel"])
            if listed[0] is None:
                self._set_state(rec["panel"], AWAITING)
        if seq is not None:
            self.seatings[seq] = float(seated)
            self.seatings.move_to_end(seq)
            if len(self.seatings) > SEATINGS_KEPT:
                self.seatings.popitem(last=False)
            self.top_seating = max(self.top_seating, seq)

    def _fold_verdict(self, offset: int, rec: dict) -> None:
        call, alias, shape = rec["call"], intern(rec["alias"]), intern(rec["shape"])
        if not isinstance(call, str):
            return
        useful = bool(rec["useful"])
        false = rec.get("false")
        claims = min(len(false), FALSE_CAP) if isinstance(false, list) else 0
        collection = rec.get("collection")
        collection = collection if isinstance(collection, str) else None
        prev = self.verdicts.get(call)
        with_stats = isinstance(alias, str) and isinstance(shape, str)
        if prev is not None:
            self._count(alias, shape, bool(prev & 1), -1)
            if with_stats:
                self._add_claims(alias, shape, -(prev >> 2 & FALSE_CAP))
            if prev & 2 and collection is not None:
                self._collection(collection)[3 - (prev & 1)] -= 1
        else:
            entry = self.recent.get(call)
            if entry is not None:
                self._owe(call, entry, -1)  # its first verdict: no longer owed
        self._count(alias, shape, useful, +1)
        if with_stats:
            self._add_claims(alias, shape, claims)
        if collection is not None:
            self._collection(collection)[3 - useful] += 1
        self.verdicts[call] = (
            offset << V_OFFSET | claims << 2 | (collection is not None) << 1 | useful
        )
        if with_stats:
            panel = rec.get("panel")
            self.pairs.fold(
                panel if panel.__class__ is str else call.partition(".")[0],
                call,
                alias,
                shape,
                useful,
            )

    def _pair(self, key: tuple[str, str]) -> tuple["Stats", "Stats"]:
        """The aggregates of (alias, shape) and of the alias over every shape, made if new."""
        pair = self._pairs[key] = (
            self.stats.get(key) or self.stats.setdefault(key, Stats()),
            self.alias_stats.get(key[0]) or self.alias_stats.setdefault(key[0], Stats()),
        )
        return pair

    def _add_claims(self, alias: str, shape: str, n: int) -> None:
        if n:
            for st in self._pairs.get((alias, shape)) or self._pair((alias, shape)):
                st.false_claims += n

    def _count(self, alias: str, shape: str, useful: bool, step: int) -> None:
        pair = self.counts.setdefault((alias, shape), [0, 0])
        pair[0 if useful else 1] += step
