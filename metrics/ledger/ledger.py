"""The gateway's ledger: panels, seats, verdicts, cooldowns and learned windows, kept in JSONL, with
an in-memory index that follows the logs' tails so that every lookup costs the same at any log size.

Files in ``runs_dir``::

    calls.jsonl     one line per finished panel: the record given to ``record_panel`` (+ v, ts)
    evidence.jsonl  one line per seat answer, verdict, cooldown and learned window, and one
                    ``"seated"`` line per panel when it is seated (every alias it seated, before
                    any seat answers); a ``"delivered"`` line when the caller received a panel's
                    reply and an ``"abandoned"`` line when the caller left before the end; a
                    ``"probe"`` line per health probe (not folded into the index); every
                    line carries ``"v": 1``, ``"kind"`` and ``"ts"`` (UTC ISO, ms, ``Z``)
    panels.idx      8 bytes (little-endian, unsigned) per panel seq: 0 while the panel is in
                    flight, then 1 + the byte offset of its calls.jsonl line. Its length is the
                    panel counter: ``new_panel`` appends a slot under ``flock``. Derived: when
                    it is missing (or empty) beside non-empty logs it is rebuilt from them, its
                    counter set past the highest seq either log names plus ``ID_MARGIN``.
    index.json      snapshot of the index below, for the evidence.jsonl inode and byte offset it
                    covers; derived, so when missing, unreadable or stale it is rebuilt by replay

Every record's fields, the seat statuses and failure kinds are described for all readers in
``runs/README.md``.

Invariants:

* The logs are append-only. Panel ids are ``p{YYYYMMDD}-{seq}`` (UTC day of creation), unique
  across processes because seq is a panels.idx slot; call ids are ``{panel}.{seat}``. An id is
  never handed out twice, even after panels.idx is deleted under running processes: each
  reservation checks that the descriptor is still the file at that path, and a rebuilt counter
  starts ``ID_MARGIN`` past the highest seq logged, above panels still in flight elsewhere.
* Every evidence record is folded into the index exactly once, by the tail reader alone (our own
  appends included): the index is always "evidence.jsonl up to byte offset N", which is also what
  a snapshot records. A replaced evidence file (another inode, or shorter than N) is replayed
  from 0 into an empty index.
* The index holds aggregates, never every call: per (alias, shape) the most recent seating time
  and the useful / not-useful counts; per alias the cooldown and the learned window; the current
  verdict of each judged call (its line's offset and usefulness); and a bounded map of the most recent seat
  records (call -> offset). Older calls are found through panels.idx and calls.jsonl.
* For the query API (``model_stats``, ``collection_stats``, ``buckets``, ``owed_count``, the
  panel pages) it also holds, all folded by the same tail reader and saved in the snapshot: per
  (alias, shape) and per alias the seats, ok seats, false claims, newest answer, failures by kind
  and a fixed log-spaced histogram of ok seats' seconds (so quantiles cost the same at any log
  size); per collection its panels (``"seated"`` lines naming it), seats and verdict counts; seats
  per alias per UTC day for the last ``KEEP_DAYS`` days (older days are dropped as newer ones
  arrive); the last ``ID_MARGIN`` seatings (panel seq -> start) so a poll can wait for a panel
  still in flight; and the count of recent ok seats still owed a verdict, per key. The owed
  count covers exactly the recent map: a seat leaving it (eviction) or getting its first verdict
  stops counting; it is recomputed from the recent map when a snapshot is loaded.
* A judged call's index entry packs, in one int, its verdict line's offset, the number of false
  claims that verdict listed (capped at ``FALSE_CAP``), whether it was counted in a collection,
  and its usefulness: a replacing verdict uncounts all of its predecessor's in O(1), without
  reading the old line.
* Seating is counted in turns: a shape's turn is how many ``"seated"`` lines it has, in log
  order (so every process counts the same turns), and each (alias, shape) keeps the turn of its
  last seat. A ``"seated"`` line is folded like any other, by the tail reader: a writer sees its
  own seating at its next refresh, which is how the gateway's next seating sees it at once.
  Older seat lines (without a ``"seated"`` line) still set the seating time, not a turn.
* The last verdict for a call wins, and its counts are keyed by the seat's alias and shape (which
  the verdict record carries, so a replay needs no seat lookup). A verdict equal to the current
  one is not written. Verdicts and windows are decided while holding evidence.jsonl's ``flock``,
  after following the tail under it, so two processes never both write the same decision.
* Learned windows only go down; the latest cooldown for an alias wins (so 0 seconds clears one).
* A seat is owed a verdict only once the caller has its panel's reply. A panel seated with
  ``awaits_delivery`` owes nothing until a ``"delivered"`` line names it; a panel seated without
  it (every panel logged before delivery was recorded) is taken as delivered unless an
  ``"abandoned"`` line names it, or, for logs from before those lines, its calls.jsonl line says
  ``"abandoned": true`` (read from calls.jsonl only when evidence.jsonl is replayed from its
  start). A ``"delivered"`` line wins over an ``"abandoned"`` one, in either order: the caller
  had the reply. The index keeps each recent panel's state with its answered calls in the
  recent map (at most ``recent_calls`` panels; a panel leaving takes its calls with it; a
  delivered or unmarked panel whose last call left the map is forgotten, as it then owes like
  an unknown one), so the owed count and ``pending`` always agree and a state change recounts
  in O(seats).
* Delivered replies and the tool calls seats made are indexed for multi-turn history (see
  ``metrics/panel/history.py``): the hash of each delivered reply's text -> panel, and each tool call
  id -> (panel, alias), the most recent ``recent_history`` of each. A text two panels delivered,
  or a tool call id issued twice, names no panel: history must not mistake one turn for another.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import sys
import threading
import time
from array import array
from bisect import bisect_left
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from hashlib import blake2b
from itertools import accumulate
from pathlib import Path
from typing import Iterable

from panelist.metrics import errors
from panelist.metrics.store import jsonl, jsonwire
from panelist.metrics.store.jsonl import SCHEMA, Appender, Tail

SLOT = 8                  # bytes per panels.idx slot
MAX_SEQ_DIGITS = 15       # a seq beyond this is no panel of ours (and would overflow pread)
# slots skipped when panels.idx is rebuilt: more than the panels any process can have in flight,
# whose ids the logs cannot show yet
ID_MARGIN = 4096
SNAPSHOT_VERSION = 3       # 2: query aggregates; packed verdict entries; 3: delivery, history
BLOCK = 64 * 1024         # read size when walking calls.jsonl backwards
SCAN_SLOTS = 4096         # panels.idx slots read at a time when paging
MAX_SCAN = 1 << 20        # slots one page may pass over (in-flight or never-logged ones)
MAX_PAGE = 1000           # panels one page may hold
KEEP_DAYS = 62            # days of per-day seat counts kept; buckets() serves up to 60
SEATINGS_KEPT = ID_MARGIN  # recent seatings remembered for panels_after
# Answer-time histogram: bucket 0 holds answers under HIST_LO seconds; bucket i >= 1 holds
# [HIST_LO * 2**((i-1)/HIST_STEPS), HIST_LO * 2**(i/HIST_STEPS)); the last one everything from
# HIST_LO * 2**HIST_DOUBLINGS (about 70 minutes) up. Four buckets per doubling put a quantile,
# read as its bucket's geometric middle, within 9% of the true value.
HIST_LO = 0.001
HIST_STEPS = 4
HIST_DOUBLINGS = 22
HIST_BUCKETS = HIST_DOUBLINGS * HIST_STEPS + 2
# Verdict entries: offset << _V_OFFSET | false claims << 2 | counted in a collection << 1 | useful
FALSE_CAP = 0xFFFF
_V_OFFSET = 18
_PANEL_ID = re.compile(r"p(\d{8})-(\d{1,%d})" % MAX_SEQ_DIGITS)
_LOGGED_PANEL = re.compile(rb'"panel":"p\d{8}-(\d{1,%d})"' % MAX_SEQ_DIGITS)
_LOGGED_PANEL_ID = re.compile(rb'"panel":"(p\d{8}-\d{1,%d})"' % MAX_SEQ_DIGITS)
_ABANDONED_FLAG = b'"abandoned":true'
# a panel's delivery state: None (seated without awaits_delivery: delivered unless abandoned)
AWAITING, DELIVERED, ABANDONED = 0, 1, 2
_STATE_CODES = (-1, AWAITING, DELIVERED, ABANDONED)   # -1 stands for None in the snapshot
RECENT_HISTORY = 20_000   # delivered replies and tool call ids remembered for history
_VERDICT_FIELDS = ("useful", "note", "real", "false", "by", "ts")

ID_HELP = ("call ids come from a panel's reply (each seat's 'call', e.g. p20250101-7.member1) "
           "or from the list of recent panels")


@dataclass
class ModelState:
    """What seating needs to know about one model for one shape."""

    last_seated: float | None   # epoch seconds: panel start of its most recent seat for this shape
    useful: int
    not_useful: int
    cooling_until: float        # epoch seconds; 0.0 if not cooling
    window: int | None          # lowest context window learned from an upstream error
    # panels of this shape seated since its last seat for it (0: it sat in the latest), None if
    # never seated; a seat known only from before "seated" lines existed counts every turn
    waited: int | None = None


def reply_hash(text) -> str | None:
    """The key a delivered reply's text is found by: a hash of the text without its outer
    whitespace (clients trim it); None for no text."""
    if not isinstance(text, str) or not text.strip():
        return None
    return blake2b(text.strip().encode("utf-8", "replace"), digest_size=16).hexdigest()


def utc_iso(t: float) -> str:
    """``2025-01-31T12:00:00.123Z``: the timestamp form of every JSONL line."""
    s, ms = divmod(int(t * 1000), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{ms:03d}Z"


def panel_seq(panel_id: str) -> int | None:
    """The panels.idx slot of a panel id, or None if it is not one."""
    m = _PANEL_ID.fullmatch(panel_id) if isinstance(panel_id, str) else None
    return int(m.group(2)) if m else None


def _intern(value):
    return sys.intern(value) if isinstance(value, str) else value


def _verdict_view(record: dict) -> dict:
    return {k: record.get(k) for k in _VERDICT_FIELDS}


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


def hist_bucket(seconds: float) -> int:
    """The answer-time histogram bucket of ``seconds`` (see ``HIST_LO``)."""
    if seconds < HIST_LO:
        return 0
    return min(HIST_BUCKETS - 1, 1 + int(math.log2(seconds / HIST_LO) * HIST_STEPS))


def _bucket_value(i: int) -> float:
    """What a quantile falling in bucket ``i`` reads as: its geometric middle (its edge at the
    open ends), to the millisecond."""
    if i == 0:
        return HIST_LO
    if i == HIST_BUCKETS - 1:
        return round(HIST_LO * 2 ** HIST_DOUBLINGS, 3)
    return round(HIST_LO * 2 ** ((i - 0.5) / HIST_STEPS), 3)


_BUCKET_VALUES = tuple(_bucket_value(i) for i in range(HIST_BUCKETS))


def hist_quantiles(hist: list[int] | None, *qs: float) -> list[float | None]:
    """The ``qs`` quantiles (0 < q <= 1) of a histogram, in seconds; None for an empty one."""
    cum = list(accumulate(hist)) if hist else [0]
    n = cum[-1]
    if n <= 0:
        return [None for _ in qs]
    # the nearest-rank quantile: the bucket holding the ceil(q * n)-th answer
    return [_BUCKET_VALUES[bisect_left(cum, max(1, math.ceil(q * n)))] for q in qs]


class _Stats:
    """Seat aggregates for one (alias, shape), or for one alias over every shape."""

    __slots__ = ("seats", "ok", "false_claims", "last_answer", "hist", "failures")

    def __init__(self):
        self.seats = self.ok = self.false_claims = 0
        self.last_answer: float | None = None
        self.hist: list[int] | None = None      # made at the first ok seat
        self.failures: dict[str, int] = {}

    def copy(self) -> "_Stats":
        other = _Stats()
        other.seats, other.ok, other.false_claims = self.seats, self.ok, self.false_claims
        other.last_answer = self.last_answer
        other.hist = None if self.hist is None else list(self.hist)
        other.failures = dict(self.failures)
        return other

    def encode(self) -> list:
        sparse = [x for i, n in enumerate(self.hist or ()) if n for x in (i, n)]
        return [self.seats, self.ok, self.false_claims, self.last_answer, sparse, self.failures]

    @classmethod
    def decode(cls, row: list) -> "_Stats":
        st = cls()
        seats, ok, false_claims, last, sparse, failures = row
        st.seats, st.ok, st.false_claims = int(seats), int(ok), int(false_claims)
        st.last_answer = None if last is None else float(last)
        if sparse:
            st.hist = [0] * HIST_BUCKETS
            for i, n in zip(sparse[::2], sparse[1::2], strict=True):
                st.hist[int(i)] = int(n)  # an index out of range is an IndexError: replayed
        st.failures = {_intern(k): int(n) for k, n in failures.items()}
        return st

    def view(self, useful: int, not_useful: int) -> dict:
        p50, p95 = hist_quantiles(self.hist, 0.5, 0.95)
        return {"seats": self.seats, "ok": self.ok, "useful": useful, "not_useful": not_useful,
                "false_claims": self.false_claims, "last_answer": self.last_answer,
                "p50": p50, "p95": p95, "failures": dict(self.failures)}


# the seat statuses of an answer a caller can judge; every other status is a failure
ANSWERED = frozenset({"ok", "tool_calls"})
_NUMBER = (int, float)   # tested by exact class, so a bool is no number
_INF = math.inf


class Ledger:
    """One process's view of a runs folder; many threads and processes may share the folder."""

    def __init__(self, runs_dir: Path, *, snapshot_every: int = 50_000,
                 recent_calls: int = 100_000, recent_history: int = RECENT_HISTORY):
        self.dir = Path(runs_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.calls_path = self.dir / "calls.jsonl"
        self.evidence_path = self.dir / "evidence.jsonl"
        self.idx_path = self.dir / "panels.idx"
        self.snapshot_path = self.dir / "index.json"
        self.snapshot_every = max(1, int(snapshot_every))
        self.recent_calls = max(0, int(recent_calls))
        self.panels_kept = max(16, self.recent_calls)   # delivery states kept
        self.recent_history = max(1, int(recent_history))

        self._lock = threading.Lock()      # the index maps and the tail reader
        self._decide = threading.Lock()    # one decide-then-append section per process at a time
        self._idx_lock = threading.Lock()  # flock does not exclude threads sharing a descriptor
        self._evidence = Appender(self.evidence_path)
        self._calls = Appender(self.calls_path)
        # A second descriptor on evidence.jsonl, used only to hold its flock while deciding a
        # verdict or window and to write that decision: a flock on another open file description
        # also holds off this process's own Appender, so nothing can slip in between.
        self._guard = os.open(self.evidence_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._idx = self._open_idx()
        self._retired_fds: list[int] = []
        self._closed = False

        self._reset(None)
        self.from_snapshot = self._load_snapshot()
        with self._lock:
            self.replayed = self._follow()  # records read at start: 0 after a clean close
        if not self.from_snapshot or self.replayed:
            self._write_snapshot()

    # ----------------------------------------------------------------- the index

    def _reset(self, ino: int | None, offset: int = 0) -> None:
        self._ino = ino
        self._tail = Tail(self.evidence_path, offset)
        self._last_seated: dict[tuple[str, str], float] = {}
        self._turns: dict[str, int] = {}                # shape -> "seated" lines folded
        self._turn_of: dict[tuple[str, str], int] = {}  # (alias, shape) -> its last seat's turn
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._cooling: dict[str, float] = {}
        self._window: dict[str, int] = {}
        # call -> offset of its current verdict line, its false claims, whether a collection
        # counted it, and its usefulness, packed into one int (see _V_OFFSET). The note and
        # claims are compared on the line itself, and the alias, shape and collection a
        # replacement must uncount are the seat's, which the replacing record carries too.
        self._verdicts: dict[str, int] = {}
        # call -> (offset of the seat line, status, key); oldest first, at most recent_calls
        self._recent: OrderedDict[str, tuple] = OrderedDict()
        # the query aggregates (see the module docstring)
        self._stats: dict[tuple[str, str], _Stats] = {}
        self._alias_stats: dict[str, _Stats] = {}       # the same, over every shape
        self._pairs: dict[tuple[str, str], tuple] = {}  # key -> both of the above (a cache)
        self._collections: dict[str, list[int]] = {}    # [panels, seats, useful, not useful]
        self._days: dict[int, dict[str, int]] = {}      # UTC day number -> alias -> seats
        self._top_day = -1
        self._seatings: OrderedDict[int, float] = OrderedDict()  # panel seq -> start
        self._top_seating = -1                          # highest seq a "seated" line named
        self._owed = 0                                  # recent ok seats without a verdict
        self._owed_by_key: dict = {}                    # the same per key (None: no key)
        self._key_last: dict[str, float] = {}           # key name -> newest panel start
        self._late_day = int(time.time() // 86400) + 1  # set again by each _follow
        self._unsaved = 0  # records folded since the last snapshot
        # panel -> [delivery state, its answered calls in the recent map...]; oldest first
        self._panels: OrderedDict[str, list] = OrderedDict()
        # the panels of _panels awaiting delivery or abandoned, which ``undelivered`` looks at
        self._apart: dict[str, None] = {}
        # tool call id -> (panel, alias), alias None when the id was issued more than once
        self._tool_owner: OrderedDict[str, tuple] = OrderedDict()
        # reply_hash -> panel ("" when two panels delivered the same text)
        self._delivered: OrderedDict[str, str] = OrderedDict()
        # panels calls.jsonl says were abandoned, read only while replaying from offset 0
        self._old_abandoned: frozenset[str] = frozenset()

    def _follow(self) -> int:
        """Fold what was appended since the last look; caller holds ``_lock``. Returns the count."""
        try:
            st = os.stat(self.evidence_path)
        except FileNotFoundError:
            return 0
        if st.st_ino != self._ino or st.st_size < self._tail.offset:
            self._reset(st.st_ino)  # another file now: what we counted is not in it
        if st.st_size == self._tail.offset:
            return 0
        # a seat dated more than a day ahead is a broken clock or a hand edit: it must not push
        # the day buckets forward and drop every real day
        self._late_day = int(time.time() // 86400) + 1
        if self._tail.offset == 0:
            # a replay from the start: panels abandoned before "abandoned" lines were written
            # are known only from calls.jsonl (read once, here; see the module docstring)
            self._old_abandoned = _abandoned_in(self.calls_path)
        n = 0
        try:
            for offset, record in self._tail.read():
                self._fold(offset, record)
                n += 1
        finally:
            self._old_abandoned = frozenset()
        self._unsaved += n
        return n

    def _fold(self, offset: int, rec: dict) -> None:
        kind = rec.get("kind")
        try:
            if kind == "seat":
                self._fold_seat(offset, rec)
            elif kind == "seated":
                self._fold_seated(rec)
            elif kind == "delivered":
                self._fold_delivered(rec)
            elif kind == "abandoned":
                self._fold_abandoned(rec)
            elif kind == "verdict":
                self._fold_verdict(offset, rec)
            elif kind == "cooldown":
                self._cooling[_intern(rec["alias"])] = float(rec["until"])
            elif kind == "window":
                alias, tokens = _intern(rec["alias"]), int(rec["tokens"])
                if tokens < self._window.get(alias, tokens + 1):
                    self._window[alias] = tokens
        except (KeyError, TypeError, ValueError):
            pass  # a hand-edited or foreign line: the index skips it as Tail skips torn ones

    def _fold_seat(self, offset: int, rec: dict) -> None:
        call = rec["call"]
        if not isinstance(call, str):
            return
        key = (_intern(rec["alias"]), _intern(rec["shape"]))
        seated = rec.get("seated")
        if isinstance(seated, (int, float)) and seated > self._last_seated.get(key, -1.0):
            self._last_seated[key] = float(seated)  # max: processes append slightly out of order
        status, owner = _intern(rec.get("status")), _intern(rec.get("key"))
        if isinstance(owner, str) and isinstance(seated, (int, float)) \
                and seated > self._key_last.get(owner, -1.0):
            self._key_last[owner] = float(seated)
        recent = self._recent
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
            kind = failure_kind(status, rec.get("error"))
            for st in pair:
                st.seats += 1
                if kind is not None:
                    st.failures[kind] = st.failures.get(kind, 0) + 1
        collection = rec.get("collection")
        if collection.__class__ is str:
            row = self._collections.get(collection) or self._collection(collection)
            row[1] += 1
        if seated is not None:
            day = int(seated // 86400)
            if day > self._top_day and day <= self._late_day:
                self._top_day = day
                for old in [d for d in self._days if d <= day - KEEP_DAYS]:
                    del self._days[old]
            if self._top_day - KEEP_DAYS < day <= self._top_day:
                per = self._days.get(day)
                if per is None:
                    per = self._days[day] = {}
                per[key[0]] = per.get(key[0], 0) + 1

    def _owe(self, call: str, entry: tuple, step: int) -> None:
        """Count a recent-map entry in (+1) or out of (-1) the verdicts owed."""
        if entry[1] in ANSWERED and call not in self._verdicts and self._owing(call):
            self._owed += step
            n = self._owed_by_key.get(entry[2], 0) + step
            if n:
                self._owed_by_key[entry[2]] = n
            else:
                self._owed_by_key.pop(entry[2], None)

    def _owing(self, call: str) -> bool:
        """Whether the caller had the reply of this call's panel (see the module docstring)."""
        listed = self._panels.get(call.partition(".")[0])
        return listed is None or listed[0] is None or listed[0] == DELIVERED

    def _panel_entry(self, panel: str) -> list:
        """The panel's ``[state, calls...]``, made (oldest panels leaving) if new."""
        listed = self._panels.get(panel)
        if listed is None:
            listed = self._panels[panel] = [ABANDONED if panel in self._old_abandoned else None]
            if listed[0] is not None:
                self._apart[panel] = None
            while len(self._panels) > self.panels_kept:
                self._drop_panel(next(iter(self._panels)))
        return listed

    def _drop_panel(self, panel: str) -> None:
        """Forget a panel's state, and its calls still in the recent map with it (they are
        among the oldest): counted under one state, a call never changes count silently."""
        for call in self._panels[panel][1:]:
            entry = self._recent.pop(call, None)
            if entry is not None:
                self._owe(call, entry, -1)
        del self._panels[panel]
        self._apart.pop(panel, None)

    def _unlist(self, call: str, entry: tuple) -> None:
        """Take a call leaving the recent map (or changing) off its panel's list; a panel left
        with no call and owing like an unlisted one (delivered, or no state) is forgotten."""
        if entry[1] in ANSWERED:
            panel = call.partition(".")[0]
            listed = self._panels.get(panel)
            if listed is not None and call in listed:
                listed.remove(call)
                if len(listed) == 1 and (listed[0] is None or listed[0] == DELIVERED):
                    del self._panels[panel]

    def _set_state(self, panel: str, state: int) -> None:
        """Move a panel to ``state``, recounting its answered calls as owed or not."""
        listed = self._panel_entry(panel)
        if listed[0] == state:
            return
        recent = self._recent
        for call in listed[1:]:
            self._owe(call, recent[call], -1)
        listed[0] = state
        for call in listed[1:]:
            self._owe(call, recent[call], +1)
        if state == AWAITING or state == ABANDONED:
            self._apart[panel] = None
        else:
            self._apart.pop(panel, None)

    def _fold_delivered(self, rec: dict) -> None:
        panel = rec["panel"]
        if panel_seq(panel) is None:
            return
        self._set_state(panel, DELIVERED)
        digest = rec.get("hash")
        if digest.__class__ is str:
            known = self._delivered.get(digest)
            # the same text delivered by two panels ("Done.") names neither: "" marks it
            self._delivered[digest] = panel if known is None or known == panel else ""
            self._delivered.move_to_end(digest)
            if len(self._delivered) > self.recent_history:
                self._delivered.popitem(last=False)

    def _fold_abandoned(self, rec: dict) -> None:
        panel = rec["panel"]
        if panel_seq(panel) is not None and self._panel_entry(panel)[0] != DELIVERED:
            self._set_state(panel, ABANDONED)

    def _fold_tool_ids(self, panel: str, alias: str, tools: list) -> None:
        owners = self._tool_owner
        for tool in tools:
            tid = tool.get("id") if tool.__class__ is dict else None
            if tid.__class__ is not str or not tid:
                continue
            known = owners.get(tid)
            # an id issued twice (by two seats, or in two panels: some servers number their
            # calls, and the client numbers calls that came without an id) has no owner
            owners[tid] = (panel, None) if known is not None and known != (panel, alias) \
                else (panel, alias)
            owners.move_to_end(tid)
            if len(owners) > self.recent_history:
                owners.popitem(last=False)

    def _collection(self, name: str) -> list[int]:
        row = self._collections.get(name)
        if row is None:
            row = self._collections[_intern(name)] = [0, 0, 0, 0]
        return row

    def _fold_seated(self, rec: dict) -> None:
        shape, seated, aliases = rec["shape"], rec["seated"], rec["aliases"]
        if not isinstance(shape, str) or isinstance(seated, bool) \
                or not isinstance(seated, (int, float)) or not isinstance(aliases, list):
            return
        shape = _intern(shape)
        turn = self._turns.get(shape, 0) + 1
        self._turns[shape] = turn
        for alias in aliases:
            if isinstance(alias, str):
                key = (_intern(alias), shape)
                self._turn_of[key] = turn
                if seated > self._last_seated.get(key, -1.0):
                    self._last_seated[key] = float(seated)
        collection = rec.get("collection")
        if isinstance(collection, str):
            self._collection(collection)[0] += 1
        seq = panel_seq(rec.get("panel"))
        if seq is not None and rec.get("awaits_delivery") is True:
            listed = self._panel_entry(rec["panel"])
            if listed[0] is None:
                self._set_state(rec["panel"], AWAITING)
        if seq is not None:
            self._seatings[seq] = float(seated)
            self._seatings.move_to_end(seq)
            if len(self._seatings) > SEATINGS_KEPT:
                self._seatings.popitem(last=False)
            self._top_seating = max(self._top_seating, seq)

    def _fold_verdict(self, offset: int, rec: dict) -> None:
        call, alias, shape = rec["call"], _intern(rec["alias"]), _intern(rec["shape"])
        if not isinstance(call, str):
            return
        useful = bool(rec["useful"])
        false = rec.get("false")
        claims = min(len(false), FALSE_CAP) if isinstance(false, list) else 0
        collection = rec.get("collection")
        collection = collection if isinstance(collection, str) else None
        prev = self._verdicts.get(call)
        with_stats = isinstance(alias, str) and isinstance(shape, str)
        if prev is not None:
            self._count(alias, shape, bool(prev & 1), -1)
            if with_stats:
                self._add_claims(alias, shape, -(prev >> 2 & FALSE_CAP))
            if prev & 2 and collection is not None:
                self._collection(collection)[3 - (prev & 1)] -= 1
        else:
            entry = self._recent.get(call)
            if entry is not None:
                self._owe(call, entry, -1)  # its first verdict: no longer owed
        self._count(alias, shape, useful, +1)
        if with_stats:
            self._add_claims(alias, shape, claims)
        if collection is not None:
            self._collection(collection)[3 - useful] += 1
        self._verdicts[call] = (offset << _V_OFFSET | claims << 2
                                | (collection is not None) << 1 | useful)

    def _pair(self, key: tuple[str, str]) -> tuple["_Stats", "_Stats"]:
        """The aggregates of (alias, shape) and of the alias over every shape, made if new."""
        pair = self._pairs[key] = (
            self._stats.get(key) or self._stats.setdefault(key, _Stats()),
            self._alias_stats.get(key[0]) or self._alias_stats.setdefault(key[0], _Stats()))
        return pair

    def _add_claims(self, alias: str, shape: str, n: int) -> None:
        if n:
            for st in self._pairs.get((alias, shape)) or self._pair((alias, shape)):
                st.false_claims += n

    def _count(self, alias: str, shape: str, useful: bool, step: int) -> None:
        pair = self._counts.setdefault((alias, shape), [0, 0])
        pair[0 if useful else 1] += step

    # ----------------------------------------------------------------- snapshot

    def _snapshot_state(self) -> dict:
        """Copies of the index, cheap enough to take under ``_lock`` (which the caller holds);
        encoding them, the slow part, happens after the lock is released."""
        self._unsaved = 0
        return {"ino": self._ino, "offset": self._tail.offset,
                "last_seated": dict(self._last_seated),
                "turns": dict(self._turns), "turn_of": dict(self._turn_of),
                "counts": {k: tuple(v) for k, v in self._counts.items()},
                "cooling_until": dict(self._cooling), "window": dict(self._window),
                "verdicts": dict(self._verdicts), "recent": list(self._recent.items()),
                "stats": {k: v.copy() for k, v in self._stats.items()},
                "alias_stats": {k: v.copy() for k, v in self._alias_stats.items()},
                "collections": {k: list(v) for k, v in self._collections.items()},
                "days": {d: dict(v) for d, v in self._days.items()}, "top_day": self._top_day,
                "seatings": list(self._seatings.items()), "top_seating": self._top_seating,
                "key_last": dict(self._key_last),
                # a panel's calls are rebuilt from the recent map when the snapshot is loaded
                "panels": [(p, listed[0]) for p, listed in self._panels.items()],
                "tool_owner": list(self._tool_owner.items()),
                "delivered": list(self._delivered.items())}

    @staticmethod
    def _encode(state: dict) -> bytes:
        recent = state["recent"]
        tag_of: dict[tuple, int] = {}  # (status, key) -> a small int
        data = {
            "v": SNAPSHOT_VERSION, "ts": utc_iso(time.time()),
            "ino": state["ino"], "offset": state["offset"],
            "last_seated": [[a, s, t] for (a, s), t in state["last_seated"].items()],
            "turns": {"shapes": state["turns"],
                      "seats": [[a, s, n] for (a, s), n in state["turn_of"].items()]},
            "counts": [[a, s, u, n] for (a, s), (u, n) in state["counts"].items()],
            "cooling_until": state["cooling_until"], "window": state["window"],
            # columns, not a list per entry: parsing them makes far fewer objects at start
            "verdicts": {"calls": list(state["verdicts"]),
                         "values": list(state["verdicts"].values())},
            "recent": {"calls": [c for c, _ in recent], "offsets": [v[0] for _, v in recent],
                       "tags": [tag_of.setdefault(v[1:], len(tag_of)) for _, v in recent],
                       "tag_table": list(tag_of)},
            "stats": {"shapes": [[a, s, *st.encode()] for (a, s), st in state["stats"].items()],
                      "aliases": [[a, *st.encode()] for a, st in state["alias_stats"].items()]},
            "collections": state["collections"],
            "days": {"top": state["top_day"],
                     "seats": [[d, per] for d, per in state["days"].items()]},
            "seatings": {"top": state["top_seating"],
                         "panels": [x for pair in state["seatings"] for x in pair]},
            "key_last": state["key_last"],
            "panels": {"ids": [p for p, _ in state["panels"]],
                       "states": [-1 if s is None else s for _, s in state["panels"]]},
            "tool_owner": {"ids": [t for t, _ in state["tool_owner"]],
                           "panels": [o[0] for _, o in state["tool_owner"]],
                           "aliases": [o[1] for _, o in state["tool_owner"]]},
            "delivered": {"hashes": [h for h, _ in state["delivered"]],
                          "panels": [p for _, p in state["delivered"]]},
        }
        return jsonwire.encode(data, separators=(",", ":"))

    def _write_snapshot(self) -> None:
        with self._lock:
            if self._ino is None:
                return
            state = self._snapshot_state()
        self._save(state)

    def _save(self, state: dict) -> None:
        data = self._encode(state)
        # unique per thread: two writers each replace the file whole, and either snapshot is valid
        tmp = self.dir / f".index.json.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.snapshot_path)

    def _load_snapshot(self) -> bool:
        try:
            data = json.loads(self.snapshot_path.read_bytes())
            st = os.stat(self.evidence_path)
        except (OSError, ValueError):
            return False
        try:
            ino, offset = data["ino"], data["offset"]
            if (data.get("v") != SNAPSHOT_VERSION or ino != st.st_ino
                    or not isinstance(offset, int) or not 0 <= offset <= st.st_size):
                return False
            if offset and os.pread(self._guard, 1, offset - 1) != b"\n":
                return False  # not a line boundary: not a snapshot of this file
            self._reset(ino, offset)
            for a, s, t in data["last_seated"]:
                self._last_seated[(_intern(a), _intern(s))] = float(t)
            # a snapshot without turns predates "seated" lines: KeyError, so it is replayed
            self._turns = {_intern(s): int(n) for s, n in data["turns"]["shapes"].items()}
            for a, s, n in data["turns"]["seats"]:
                self._turn_of[(_intern(a), _intern(s))] = int(n)
            for a, s, u, n in data["counts"]:
                self._counts[(_intern(a), _intern(s))] = [int(u), int(n)]
            self._cooling = {_intern(a): float(t) for a, t in data["cooling_until"].items()}
            self._window = {_intern(a): int(n) for a, n in data["window"].items()}
            verdicts, recent = data["verdicts"], data["recent"]
            if len(verdicts["calls"]) != len(verdicts["values"]) or not (
                    len(recent["calls"]) == len(recent["offsets"]) == len(recent["tags"])):
                raise ValueError("columns of unequal length")
            self._verdicts = dict(zip(verdicts["calls"], verdicts["values"]))
            tags = [(_intern(st_), _intern(k)) for st_, k in recent["tag_table"]]
            self._recent = OrderedDict(zip(recent["calls"], [
                (off, *tags[t]) for off, t in zip(recent["offsets"], recent["tags"])]))
            while len(self._recent) > self.recent_calls:
                self._recent.popitem(last=False)
            stats = data["stats"]
            self._stats = {(_intern(a), _intern(s_)): _Stats.decode(row)
                           for a, s_, *row in stats["shapes"]}
            self._alias_stats = {_intern(a): _Stats.decode(row) for a, *row in stats["aliases"]}
            self._pairs = {}
            self._collections = {_intern(c): [int(x) for x in row]
                                 for c, row in data["collections"].items()}
            for row in self._collections.values():
                if len(row) != 4:
                    raise ValueError("a collection row is not [panels, seats, useful, not]")
            self._key_last = {_intern(k): float(t) for k, t in data["key_last"].items()}
            days = data["days"]
            self._top_day = int(days["top"])
            self._days = {int(d): {_intern(a): int(n) for a, n in per.items()}
                          for d, per in days["seats"]}
            seatings = data["seatings"]
            self._top_seating = int(seatings["top"])
            flat = seatings["panels"]
            self._seatings = OrderedDict(
                (int(q), float(t)) for q, t in zip(flat[::2], flat[1::2], strict=True))
            self._load_history(data)
            # the owed counts are derived from the recent map and the verdicts: recount them
            for call, entry in self._recent.items():
                self._owe(call, entry, +1)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            self._reset(None)
            return False
        return True

    def _load_history(self, data: dict) -> None:
        """The delivery states, tool call owners and delivered replies of a snapshot; each
        panel's answered calls come back from the recent map."""
        panels = data["panels"]
        ids, states = panels["ids"], panels["states"]
        if len(ids) != len(states) or not all(s in _STATE_CODES for s in states):
            raise ValueError("bad delivery states")
        self._panels = OrderedDict((str(p), [None if s == -1 else s])
                                   for p, s in zip(ids, states))
        for call, entry in self._recent.items():
            if entry[1] in ANSWERED:
                panel = call.partition(".")[0]
                listed = self._panels.get(panel)
                if listed is None:
                    listed = self._panels[panel] = [None]
                listed.append(call)
        while len(self._panels) > self.panels_kept:   # nothing is counted yet: no _owe
            for call in self._panels.popitem(last=False)[1][1:]:
                self._recent.pop(call, None)
        for panel in [p for p, listed in self._panels.items()
                      if len(listed) == 1 and (listed[0] is None or listed[0] == DELIVERED)]:
            del self._panels[panel]   # as _unlist forgets them
        self._apart = {p: None for p, listed in self._panels.items()
                       if listed[0] == AWAITING or listed[0] == ABANDONED}
        owners = data["tool_owner"]
        if not len(owners["ids"]) == len(owners["panels"]) == len(owners["aliases"]):
            raise ValueError("columns of unequal length")
        self._tool_owner = OrderedDict(
            (t, (p, None if a is None else _intern(a)))
            for t, p, a in zip(owners["ids"], owners["panels"], owners["aliases"]))
        delivered = data["delivered"]
        self._delivered = OrderedDict(zip(delivered["hashes"], delivered["panels"], strict=True))
        for table in (self._tool_owner, self._delivered):
            while len(table) > self.recent_history:
                table.popitem(last=False)

    # ----------------------------------------------------------------- reading

    def refresh(self) -> None:
        """Follow evidence.jsonl's tail (other processes' appends and our own)."""
        with self._lock:
            self._follow()
            # taken in the same locked section, so only one of several racing threads saves it
            state = self._snapshot_state() if self._unsaved >= self.snapshot_every else None
        if state is not None:
            self._save(state)

    def states(self, aliases: Iterable[str], shape: str,
               now: float | None = None) -> dict[str, ModelState]:
        """Each alias's state for ``shape``, after one tail refresh."""
        now = time.time() if now is None else now
        self.refresh()
        out = {}
        with self._lock:
            turns = self._turns.get(shape, 0)
            for alias in aliases:
                useful, not_useful = self._counts.get((alias, shape), (0, 0))
                until = self._cooling.get(alias, 0.0)
                last = self._last_seated.get((alias, shape))
                out[alias] = ModelState(
                    last_seated=last, useful=useful,
                    not_useful=not_useful, cooling_until=until if until > now else 0.0,
                    window=self._window.get(alias),
                    waited=None if last is None else turns - self._turn_of.get((alias, shape), 0))
        return out

    def call(self, call_id: str) -> dict | None:
        """The seat record of a call plus its current ``verdict`` (or None); None if unknown."""
        self.refresh()
        seat = self._seat(call_id)
        if seat is None:
            return None
        with self._lock:
            current = self._verdicts.get(call_id)
        seat["verdict"] = self._verdict_at(current >> _V_OFFSET) if current is not None else None
        return seat

    def panel(self, panel_id: str) -> dict | None:
        """A finished panel's calls.jsonl record, through its panels.idx slot."""
        seq = panel_seq(panel_id)
        if seq is None:
            return None
        slot = os.pread(self._idx, SLOT, seq * SLOT)
        if len(slot) < SLOT:
            return None
        pointer = int.from_bytes(slot, "little")
        if not pointer:
            return None  # reserved, still in flight
        record = jsonl.read_line(self.calls_path, pointer - 1)
        return record if record is not None and record.get("panel") == panel_id else None

    def recent_panels(self, n: int = 20) -> list[dict]:
        """The last ``n`` finished panels, newest first, read backwards from calls.jsonl's end."""
        out: list[dict] = []
        if n <= 0:
            return out
        with open(self.calls_path, "rb") as f:
            pos = _complete_end(f)
            rest = b""  # the start of a line whose beginning lies in an earlier block
            while pos > 0 and len(out) < n:
                step = min(BLOCK, pos)
                pos -= step
                f.seek(pos)
                lines = (f.read(step) + rest).split(b"\n")
                rest = lines.pop(0) if pos > 0 else b""
                for line in reversed(lines):
                    record = jsonl.parse_line(line + b"\n") if line else None
                    if record is not None:
                        out.append(record)
                        if len(out) == n:
                            break
        return out

    def pending(self, *, key: str | None = None, limit: int = 50) -> list[dict]:
        """Recent seats that answered (ok or tool calls) and have no verdict yet, newest
        first."""
        self.refresh()
        offsets = []
        with self._lock:
            for call, (offset, status, owner) in reversed(self._recent.items()):
                if len(offsets) >= limit:
                    break
                if status in ANSWERED and call not in self._verdicts and \
                        (key is None or owner == key) and self._owing(call):
                    offsets.append(offset)
        return [r for r in _read_lines(self.evidence_path, offsets) if r is not None]

    def undelivered(self, *, key: str | None = None, limit: int = 50) -> list[dict]:
        """Recent finished panels whose reply never reached the caller, newest first, each with
        its answered seats that have no verdict: ``{"panel", "reason", "calls": [seat lines]}``,
        ``reason`` being ``abandoned`` (the caller left) or ``undelivered`` (seated awaiting
        delivery, finished, and no ``"delivered"`` line). Their seats are not owed verdicts
        (``pending`` and ``owed_count`` leave them out); a verdict on one is still taken."""
        self.refresh()
        found: list[tuple[str, int, list[int]]] = []
        with self._lock:
            for panel in reversed(self._apart):
                if len(found) >= limit:
                    break
                listed = self._panels[panel]
                state = listed[0]
                offsets = []
                for call in listed[1:]:
                    entry = self._recent[call]
                    if call not in self._verdicts and (key is None or entry[2] == key):
                        offsets.append(entry[0])
                if offsets and (state == ABANDONED or self._finished(panel)):
                    found.append((panel, state, offsets))
        return [{"panel": panel,
                 "reason": "abandoned" if state == ABANDONED else "undelivered",
                 "calls": [r for r in _read_lines(self.evidence_path, offsets) if r is not None]}
                for panel, state, offsets in found]

    def _finished(self, panel_id: str) -> bool:
        """Whether the panel has its calls.jsonl line (one ``pread`` of its slot)."""
        seq = panel_seq(panel_id)
        slot = os.pread(self._idx, SLOT, seq * SLOT) if seq is not None else b""
        return len(slot) == SLOT and slot != bytes(SLOT)

    def delivered_panel(self, content) -> str | None:
        """The panel whose delivered reply had this text (see ``reply_hash``), among the last
        ``recent_history`` delivered; None if none, or if more than one panel delivered it."""
        digest = reply_hash(content)
        if digest is None:
            return None
        self.refresh()
        with self._lock:
            return self._delivered.get(digest) or None

    def tool_call_owner(self, tool_call_id) -> tuple[str, str] | None:
        """``(panel, alias)`` of the seat that issued this tool call id, among the last
        ``recent_history`` ids seats issued; None if unknown, or if the id was issued more than
        once (by two seats, or in two panels)."""
        if not isinstance(tool_call_id, str):
            return None
        self.refresh()
        with self._lock:
            owner = self._tool_owner.get(tool_call_id)
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
            raise errors.BadRequest(f"'{panel_id}' is not a panel id; a panel id looks like "
                                    "p20250101-7 (bench.panel in a reply, or its "
                                    "X-Panelist-Panel header)", param="panel")
        record = self.panel(panel_id)
        if record is not None:
            seats = _seat_dicts(record) if key is None or record.get("key") == key else []
        else:
            self.refresh()
            with self._lock:
                listed = self._panels.get(panel_id)
                offsets = [self._recent[c][0] for c in listed[1:]] if listed else []
            seats = [r for r in _read_lines(self.evidence_path, offsets)
                     if r is not None and (key is None or r.get("key") == key)]
        if not seats:
            raise errors.NotFound(f"unknown panel '{panel_id}', or none of its seats has "
                                  "answered yet; panel ids are bench.panel in a reply",
                                  param="panel")
        seats = [s for s in seats if isinstance(s.get("call"), str)]
        if alias == "merger":
            found = [s for s in seats if s.get("seat") == "merger"]
        else:
            found = [s for s in seats if s.get("alias") == alias and s.get("seat") != "merger"] \
                or [s for s in seats if s.get("alias") == alias] \
                or [s for s in seats if s["call"] == f"{panel_id}.{alias}"]
        if len(found) == 1:
            return found[0]["call"]
        named = ", ".join(f"{s.get('alias')} ({s['call'].partition('.')[2]})" for s in seats)
        if found:
            raise errors.BadRequest(f"'{alias}' sat more than once in {panel_id} ("
                                    f"{', '.join(s['call'] for s in found)}); send 'call' with "
                                    "one of those call ids", param="alias")
        raise errors.NotFound(f"no seat of '{alias}' in {panel_id}; its seats: {named or 'none'}"
                              "; send one of those aliases, a seat label, 'merger', or the call "
                              "id as 'call'", param="alias")

    # ----------------------------------------------------------------- query API
    # Each call follows the tail once, then costs O(models x shapes) or O(page), never a log
    # rescan, however many panels the folder holds.

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
          about 9%; under 1 ms reads 0.001), or None before any ok seat.
        * ``failures``: ``{kind: seats}`` for seats that did not answer; see ``failure_kind``.
        """
        self.refresh()
        out = {}
        with self._lock:
            if shape is None:
                counts: dict[str, list[int]] = {}
                for (alias, _), (u, n) in self._counts.items():
                    pair = counts.setdefault(alias, [0, 0])
                    pair[0] += u
                    pair[1] += n
                rows = self._alias_stats
            else:
                counts = {a: c for (a, s), c in self._counts.items() if s == shape}
                rows = {a: st for (a, s), st in self._stats.items() if s == shape}
            for alias, st in rows.items():
                u, n = counts.get(alias, (0, 0))
                out[alias] = st.view(u, n)
            empty = _Stats()
            for alias, (u, n) in counts.items():
                if alias not in out and isinstance(alias, str):
                    out[alias] = empty.view(u, n)  # judged, yet no seat line of its own here
        return out

    def shapes(self) -> list[str]:
        """Every shape a seat, seating or verdict was logged for, sorted."""
        self.refresh()
        with self._lock:
            found = {s for _, s in self._stats} | {s for _, s in self._counts} | set(self._turns)
        return sorted(s for s in found if isinstance(s, str))

    def collection_stats(self) -> dict[str, dict]:
        """Per collection model id (``bench/<name>``): ``{"panels", "seats", "useful",
        "not_useful"}``. Panels are ``"seated"`` lines naming the collection, seats are seat
        lines naming it, and the verdict counts are current verdicts on its seats. A collection
        that was never asked is absent; one deleted since keeps its history."""
        self.refresh()
        with self._lock:
            return {name: dict(zip(("panels", "seats", "useful", "not_useful"), row))
                    for name, row in self._collections.items()}

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
        self.refresh()
        series: dict[str, list[int]] = {}
        with self._lock:
            for i in range(days):
                for alias, n in self._days.get(first + i, {}).items():
                    row = series.get(alias)
                    if row is None:
                        row = series[alias] = [0] * days
                    row[i] = n
        return {"unit": "day", "start": first * 86400, "days": days, "series": series}

    def owed_count(self, key: str | None = None) -> int:
        """How many recent ok seats have no verdict yet (those ``pending`` lists), for one
        gateway key's name or (``None``) every key. O(1): a count kept as lines are folded."""
        self.refresh()
        with self._lock:
            return self._owed if key is None else self._owed_by_key.get(key, 0)

    def keys_last_used(self) -> dict[str, float]:
        """When each caller (a gateway key's name, or ``local``) last started a panel, in epoch
        seconds, from its seats' lines."""
        self.refresh()
        with self._lock:
            return dict(self._key_last)

    def verdict_count(self) -> int:
        """How many calls have a current verdict."""
        self.refresh()
        with self._lock:
            return len(self._verdicts)

    def verdict_of(self, call: str) -> dict | None:
        """The current verdict of a call, ``{"useful", "note", "real", "false", "by", "ts"}``,
        or None if it has none (or is no call)."""
        self.refresh()
        with self._lock:
            current = self._verdicts.get(call) if isinstance(call, str) else None
        return None if current is None else self._verdict_at(current >> _V_OFFSET)

    def latest_panel(self) -> str | None:
        """The id of the finished panel with the highest seq, or None if none has finished."""
        page, _ = self.panels_page(None, 1)
        return page[0]["panel"] if page else None

    def panels_page(self, before_seq: int | None = None,
                    limit: int = 50) -> tuple[list[dict], int | None]:
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
        if before_seq is not None and (isinstance(before_seq, bool)
                                       or not isinstance(before_seq, int)):
            raise errors.BadRequest("'before' must be a panel id or seq")
        self.refresh()  # for the seats' verdicts
        fd, count = self._idx_now()
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
            slots = _slots(fd, pos, n)
            scanned += n
            for i in range(len(slots) - 1, -1, -1):
                if slots[i]:
                    if len(found) == limit:  # one more exists: there is a next page
                        next_seq = found[-1][0]
                        break
                    found.append((pos + i, slots[i]))
            else:
                if len(found) == limit and pos > 0:
                    next_seq = found[-1][0]  # the block ended with the page: maybe more
        return self._summaries(found), next_seq

    def panels_after(self, seq: int | None, limit: int = 50, *, wait: float = 600.0,
                     now: float | None = None) -> tuple[list[dict], int]:
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
        self.refresh()
        fd, count = self._idx_now()
        start = 0 if seq is None else max(0, seq + 1)
        with self._lock:
            seatings, top_seating = dict(self._seatings), self._top_seating
        found: list[tuple[int, int]] = []
        hold = None
        pos = start
        while pos < count and len(found) < limit and pos - start < MAX_SCAN:
            n = min(SCAN_SLOTS, count - pos)
            slots = _slots(fd, pos, n)
            for i, pointer in enumerate(slots):
                if pointer:
                    found.append((pos + i, pointer))
                    if len(found) == limit:
                        break
                elif hold is None:
                    at = seatings.get(pos + i)
                    if pos + i > top_seating or (at is not None and at > now - wait):
                        hold = pos + i
            pos += len(slots)
            if len(slots) < n:
                break
        if len(found) == limit:
            next_seq = found[-1][0]
        elif hold is not None:
            next_seq = hold - 1
        else:
            next_seq = pos - 1  # every slot up to here is finished or given up
        return self._summaries(found), next_seq

    def _idx_now(self) -> tuple[int, int]:
        """panels.idx's current descriptor and its slot count (the panel counter)."""
        with self._idx_lock:
            fd = self._current_idx()
            # a descriptor retired later stays open until close(), so reading it unlocked is safe
            return fd, os.fstat(fd).st_size // SLOT

    def _summaries(self, found: list[tuple[int, int]]) -> list[dict]:
        """The summaries of the panels at ``(seq, pointer)``, in that order."""
        records = _read_lines(self.calls_path, [pointer - 1 for _, pointer in found])
        out = []
        for (seq, _), record in zip(found, records):
            if record is not None and panel_seq(record.get("panel")) == seq:
                out.append(record)
        calls = [s.get("call") for r in out for s in _seat_dicts(r)]
        with self._lock:
            judged = {c: bool(v & 1) for c in calls
                      if isinstance(c, str) and (v := self._verdicts.get(c)) is not None}
        return [_summary(r, judged) for r in out]

    def _seat(self, call_id: str) -> dict | None:
        """The seat record from the recent map, else from the finished panel's line."""
        with self._lock:
            hit = self._recent.get(call_id)
        if hit is not None:
            record = jsonl.read_line(self.evidence_path, hit[0])
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
        record = jsonl.read_line(self.evidence_path, offset)
        return _verdict_view(record) if record is not None else None

    # ----------------------------------------------------------------- writing

    def new_panel(self, now: float | None = None) -> str:
        """Reserve the next panel id (a panels.idx slot)."""
        return self.new_panels(1, now)[0]

    def new_panels(self, count: int, now: float | None = None) -> list[str]:
        """Reserve ``count`` consecutive panel ids at once (one lock, one write)."""
        now = time.time() if now is None else now
        day = time.strftime("%Y%m%d", time.gmtime(now))
        with self._idx_lock:
            idx = self._current_idx()
            fcntl.flock(idx, fcntl.LOCK_EX)
            try:
                # round up: a slot half-written by a crash is never handed out again
                first = -(-os.fstat(idx).st_size // SLOT)
                os.pwrite(idx, bytes(SLOT * count), first * SLOT)
            finally:
                fcntl.flock(idx, fcntl.LOCK_UN)
        return [f"p{day}-{seq}" for seq in range(first, first + count)]

    # ----------------------------------------------------------------- panels.idx

    def _open_idx(self) -> int:
        """Open panels.idx, rebuilding it from the logs when it is new beside logs that are not."""
        fd = os.open(self.idx_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_size == 0:
                    self._rebuild_idx(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _current_idx(self) -> int:
        """Our panels.idx descriptor, reopened if the file at the path was deleted or replaced
        (one ``stat``); caller holds ``_idx_lock``."""
        try:
            same = os.stat(self.idx_path).st_ino == os.fstat(self._idx).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            # the old descriptor stays open until close(): a reader may be using it right now,
            # and a closed number could be reused by another file
            self._retired_fds.append(self._idx)
            self._idx = self._open_idx()
        return self._idx

    def _rebuild_idx(self, fd: int) -> None:
        """Point each logged panel's slot at its calls.jsonl line and set the counter past every
        seq either log names; caller holds the file's flock. Reads both logs once, at start."""
        pointers: dict[int, int] = {}
        top = -1
        try:
            with open(self.calls_path, "rb") as f:
                offset = 0
                for line in f:
                    m = _LOGGED_PANEL.search(line) if line.endswith(b"\n") else None
                    if m:
                        seq = int(m.group(1))
                        pointers[seq] = offset + 1
                        top = max(top, seq)
                    offset += len(line)
        except FileNotFoundError:
            pass
        try:
            with open(self.evidence_path, "rb") as f:
                carry = b""
                while block := f.read(1 << 20):
                    text = carry + block
                    found = _LOGGED_PANEL.findall(text)
                    if found:
                        top = max(top, max(map(int, found)))
                    carry = text[-64:]   # an id cut by the block's end is whole next time
        except FileNotFoundError:
            pass
        if top < 0:
            return   # no panel logged: a new folder, counting from 0
        table = bytearray(SLOT * (top + 1 + ID_MARGIN))
        for seq, pointer in pointers.items():
            table[seq * SLOT:(seq + 1) * SLOT] = pointer.to_bytes(SLOT, "little")
        os.pwrite(fd, table, 0)

    def seat_record(self, rec: dict, now: float | None = None) -> dict:
        """The evidence line ``record_seat`` writes for ``rec``."""
        for field in ("call", "alias", "shape"):
            if not isinstance(rec.get(field), str) or not rec[field]:
                raise errors.BadRequest(f"a seat record needs '{field}' (a non-empty string)")
        now = time.time() if now is None else now
        record = {"v": SCHEMA, "kind": "seat", "ts": utc_iso(now)}
        record.update((k, v) for k, v in rec.items() if k not in record)
        if not isinstance(record.get("seated"), (int, float)):
            record["seated"] = now
        return record

    def record_seat(self, rec: dict) -> None:
        """Append one seat's outcome to evidence.jsonl."""
        self._evidence.append(self.seat_record(rec))

    def seated_record(self, panel: str, shape: str, aliases: Iterable[str], seated: float,
                      collection: str | None = None, awaits_delivery: bool = False) -> dict:
        """The ``"seated"`` line ``record_seated`` writes."""
        aliases = list(aliases)
        if not isinstance(shape, str) or not shape or not all(
                isinstance(a, str) and a for a in aliases):
            raise errors.BadRequest("a seating needs a shape and aliases (non-empty strings)")
        if collection is not None and (not isinstance(collection, str) or not collection):
            raise errors.BadRequest("a seating's collection is a non-empty string or None")
        record = {"v": SCHEMA, "kind": "seated", "ts": utc_iso(time.time()), "panel": panel,
                  "shape": shape, "seated": seated, "aliases": aliases}
        if collection is not None:
            record["collection"] = collection
        if awaits_delivery:
            record["awaits_delivery"] = True
        return record

    def record_seated(self, panel: str, shape: str, aliases: Iterable[str], seated: float,
                      collection: str | None = None, awaits_delivery: bool = False) -> None:
        """Append one ``"seated"`` line: the panel took a seat for each of ``aliases`` at
        ``seated`` (epoch seconds, the panel's start). Written when the panel is seated, so the
        next seating here (after its tail refresh) and in any other process sees it at once.
        ``collection`` (its model id, ``bench/<name>``) counts the panel in ``collection_stats``.
        ``awaits_delivery``: the caller will call ``record_delivered`` when its client has the
        reply, and until then the panel's seats are owed no verdict."""
        self._evidence.append(self.seated_record(panel, shape, aliases, seated, collection,
                                                 awaits_delivery))

    def record_delivered(self, panel: str, content: str | None,
                         tool_call_ids: Iterable[str] = ()) -> None:
        """Append one ``"delivered"`` line: the caller received this panel's reply, whose text
        was ``content`` (only its ``reply_hash`` is written) and whose tool calls had these ids.
        From then on its answered seats are owed verdicts, and ``delivered_panel`` finds the
        panel by that text."""
        if panel_seq(panel) is None:
            raise errors.BadRequest(f"not a panel id: {panel!r}")
        ids = [t for t in tool_call_ids if isinstance(t, str) and t]
        self._evidence.append({"v": SCHEMA, "kind": "delivered", "ts": utc_iso(time.time()),
                               "panel": panel, "hash": reply_hash(content), "tool_calls": ids})

    @staticmethod
    def _abandoned_line(panel: str) -> dict:
        return {"v": SCHEMA, "kind": "abandoned", "ts": utc_iso(time.time()), "panel": panel}

    def record_seats(self, recs: list[dict], now: float | None = None, *,
                     seatings: Iterable[dict] = ()) -> None:
        """Append many seat records in one locked write (bulk loaders), after the ``"seated"``
        lines of ``seatings`` (dicts of ``seated_record``'s arguments), as a gateway writes them."""
        lines = [self.seated_record(**s) for s in seatings]
        lines.extend(self.seat_record(r, now) for r in recs)
        if lines:
            self._evidence.append(*lines)

    def panel_record(self, rec: dict, now: float | None = None) -> tuple[int, dict]:
        """``(seq, line)`` for the calls.jsonl line ``record_panel`` writes for ``rec``."""
        seq = panel_seq(rec.get("panel"))
        if seq is None:
            raise errors.BadRequest(f"not a panel id: {rec.get('panel')!r}; use new_panel()")
        with self._idx_lock:
            size = os.fstat(self._current_idx()).st_size
        if (seq + 1) * SLOT > size:
            raise errors.BadRequest(f"panel '{rec['panel']}' was not reserved with new_panel()")
        record = {"v": SCHEMA, "ts": utc_iso(time.time() if now is None else now)}
        record.update(rec)
        return seq, record

    def record_panel(self, rec: dict) -> None:
        """Append a finished panel to calls.jsonl and point its panels.idx slot at the line.
        A panel the caller left (``"abandoned": true``) also gets an ``"abandoned"`` evidence
        line, written first, so no reader counts its seats as owed in between."""
        seq, record = self.panel_record(rec)
        if record.get("abandoned") is True:
            self._evidence.append(self._abandoned_line(record["panel"]))
        offset = self._calls.append(record)
        with self._idx_lock:
            os.pwrite(self._current_idx(), (offset + 1).to_bytes(SLOT, "little"), seq * SLOT)

    def record_panels(self, recs: list[dict], now: float | None = None) -> None:
        """Append many finished panels in one locked write (bulk loaders); same lines."""
        if not recs:
            return
        pairs = [self.panel_record(r, now) for r in recs]
        left = [self._abandoned_line(record["panel"]) for _, record in pairs
                if record.get("abandoned") is True]
        if left:
            self._evidence.append(*left)
        offset = self._calls.append(*(record for _, record in pairs))
        with self._idx_lock:
            idx = self._current_idx()
            for seq, record in pairs:
                os.pwrite(idx, (offset + 1).to_bytes(SLOT, "little"), seq * SLOT)
                offset += len(jsonl.dumps(record))

    def cool_down(self, alias: str, seconds: float, reason: str = "") -> None:
        """Keep ``alias`` out of panels for ``seconds`` from now (after a rate limit); 0 ends
        a cooldown."""
        now = time.time()
        self._evidence.append({"v": SCHEMA, "kind": "cooldown", "ts": utc_iso(now),
                               "alias": alias, "until": now + max(0.0, seconds),
                               "seconds": seconds, "reason": reason})

    def record_probe(self, rec: dict) -> dict:
        """Append one probe's (or endpoint test's) seat record (``metrics/seatrecord.py``) as a
        ``"probe"`` line. The index does not fold probe lines: they are no seats, so they never
        count in stats or seating."""
        record = {"v": SCHEMA, "kind": "probe", "ts": utc_iso(time.time())}
        record.update((k, v) for k, v in rec.items() if k not in record)
        self._evidence.append(record)
        return record

    def learn_window(self, alias: str, tokens: int) -> bool:
        """Record a context window an upstream stated, if lower than the one known; True if so."""
        if not isinstance(tokens, int) or tokens <= 0:
            raise errors.BadRequest(f"a context window is a positive integer, not {tokens!r}")
        with self._exclusive():
            with self._lock:
                known = self._window.get(alias)
            if known is not None and known <= tokens:
                return False
            self._write_held({"v": SCHEMA, "kind": "window", "ts": utc_iso(time.time()),
                              "alias": alias, "tokens": tokens})
        return True

    def record_verdict(self, call: str, *, useful: bool, note: str = "",
                       real: Iterable[str] = (), false: Iterable[str] = (),
                       by: str = "local") -> dict:
        """Record whether a call's answer was useful; the last verdict wins, repeats are not written.

        Returns ``{"call", "written", "replaced", "verdict"}`` with the verdict now current.
        """
        if not isinstance(useful, bool):
            raise errors.BadRequest("'useful' must be true or false")
        real, false = [str(c) for c in real], [str(c) for c in false]
        note = "" if note is None else str(note)
        with self._exclusive():
            seat = self._seat(call)
            if seat is None:
                raise errors.NotFound(f"unknown call id '{call}'; {ID_HELP}")
            with self._lock:
                prev = self._verdicts.get(call)
            if prev is not None and bool(prev & 1) == useful:
                line = jsonl.read_line(self.evidence_path, prev >> _V_OFFSET)
                if line is not None and [line.get(k) for k in ("note", "real", "false")] \
                        == [note, real, false]:
                    return {"call": call, "written": False, "replaced": False,
                            "verdict": _verdict_view(line)}
            record = {"v": SCHEMA, "kind": "verdict", "ts": utc_iso(time.time()), "call": call,
                      "panel": seat.get("panel"), "alias": seat.get("alias"),
                      "shape": seat.get("shape"), "collection": seat.get("collection"),
                      "useful": useful, "note": note,
                      "real": real, "false": false, "by": by}
            self._write_held(record)
        return {"call": call, "written": True, "replaced": prev is not None,
                "verdict": _verdict_view(record)}

    @contextmanager
    def _exclusive(self):
        """Hold evidence.jsonl's flock with the index caught up: decide, then ``_write_held``."""
        with self._decide:
            fcntl.flock(self._guard, fcntl.LOCK_EX)
            try:
                with self._lock:
                    self._follow()
                yield
            finally:
                fcntl.flock(self._guard, fcntl.LOCK_UN)

    def _write_held(self, record: dict) -> int:
        """Append one record through the guard descriptor, whose flock the caller holds."""
        data = jsonl.dumps(record)
        end = os.fstat(self._guard).st_size
        if end and os.pread(self._guard, 1, end - 1) != b"\n":
            data = b"\n" + data  # as jsonl.Appender does: a torn line stays a line of its own
            end += 1
        view = memoryview(data)
        while view:
            view = view[os.write(self._guard, view):]
        return end

    def close(self) -> None:
        """Write the snapshot (if anything new was folded) and close the files."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._follow()
            unsaved = self._unsaved
        if unsaved:
            self._write_snapshot()
        self._evidence.close()
        self._calls.close()
        os.close(self._guard)
        for fd in (self._idx, *self._retired_fds):
            os.close(fd)

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _page_limit(limit) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise errors.BadRequest(f"'limit' must be a whole number from 1 to {MAX_PAGE}")
    return limit


def _slots(fd: int, first: int, count: int) -> array:
    """``count`` panels.idx slots from slot ``first`` (fewer at the file's end)."""
    data = os.pread(fd, count * SLOT, first * SLOT)
    slots = array("Q")
    slots.frombytes(data[:len(data) - len(data) % SLOT])
    if sys.byteorder != "little":
        slots.byteswap()
    return slots


def _seat_dicts(record: dict) -> list[dict]:
    seats = [s for s in record.get("seats") or () if isinstance(s, dict)]
    merger = record.get("merger")
    return seats + [merger] if isinstance(merger, dict) else seats


_SEAT_SUMMARY = ("call", "seat", "alias", "status", "seconds")
_PANEL_SUMMARY = ("panel", "collection", "key", "started", "seconds", "shape", "reply")


def _summary(record: dict, judged: dict[str, bool]) -> dict:
    """A calls.jsonl panel line without prompt or answers, each seat with its verdict."""
    def seat(s: dict) -> dict:
        out = {k: s.get(k) for k in _SEAT_SUMMARY}
        out["verdict"] = judged.get(s.get("call")) if isinstance(s.get("call"), str) else None
        return out

    out = {k: record.get(k) for k in _PANEL_SUMMARY}
    seats = record.get("seats")
    out["seats"] = [seat(s) for s in seats if isinstance(s, dict)] \
        if isinstance(seats, list) else []
    merger = record.get("merger")
    out["merger"] = seat(merger) if isinstance(merger, dict) else None
    out["abandoned"] = record.get("abandoned") is True
    return out


def _abandoned_in(calls_path: Path) -> frozenset[str]:
    """The panels whose calls.jsonl line says the caller left (one pass over the file)."""
    found = set()
    try:
        with open(calls_path, "rb") as f:
            for line in f:
                # inside a JSON string a quote is escaped, so only the record's own field matches
                if _ABANDONED_FLAG in line and line.endswith(b"\n"):
                    m = _LOGGED_PANEL_ID.search(line)
                    if m:
                        found.add(m.group(1).decode())
    except FileNotFoundError:
        pass
    return frozenset(found)


def _complete_end(f) -> int:
    """The offset just past the file's last newline: what follows is unfinished or torn."""
    pos = f.seek(0, os.SEEK_END)
    while pos > 0:
        step = min(BLOCK, pos)
        pos -= step
        f.seek(pos)
        i = f.read(step).rfind(b"\n")
        if i >= 0:
            return pos + i + 1
    return 0


def _read_lines(path: Path, offsets: list[int]) -> list[dict | None]:
    """The records starting at ``offsets`` (one open for all)."""
    out = []
    if not offsets:
        return out
    with open(path, "rb") as f:
        for offset in offsets:
            f.seek(offset)
            line = f.readline()
            out.append(jsonl.parse_line(line))
    return out
