"""How a search of the panels' index (``search.py``) walks its tables, and the budget that
bounds what one search may cost.

The plan: each source is read in seq order, newest first, so a page stops at its ``limit``:
the panels (through the index of their narrowest filter, the other filters checked in the
same statement) or a model's seats; or the text's matches (FTS5). With a text and filters,
two walks run in step, a row of each in turn: one down the filters' matches, each checked
for the text (a lookup of that one panel's terms), one down the text's matches, each checked
against the filters in the same statement (a lookup of that panel's row and seats). Each walk
alone would find every match; in step, the search costs about twice the smaller side's
matches above the page's end, never the panels it does not touch (a rare word, or a rare
filter, is cheap whatever the other matches).

The budget: a text and a filter that each match many panels but never the same one still
walk all of the smaller side. So every search runs under a ``Budget``: at most ``rows`` rows
looked at by the walks (a statement SQLite runs alone is held to ``rows`` × ``STEPS_PER_ROW``
steps of its virtual machine, which a progress handler counts) and at most ``seconds``. When
either runs out, the search answers what it had found, marked ``partial``, with where its walk
had got to.

Invariants: a search never costs much more than its budget, whatever it matches and however
many panels the index holds; a partial walk's ``reached`` is a seq such that every panel from
it up to the top of the range was looked at (so paging on from there passes over no match),
or None when the walk cannot say; a connection's progress handler is cleared when the search
ends, whatever happened.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from panelist.metrics.ledger.searchfold import BLOCK_BITS

ROWS = 50_000  # rows one search may look at by default (PANELIST_SEARCH_ROWS)
SECONDS = 2.0  # and seconds (PANELIST_SEARCH_SECONDS)
STEPS_PER_ROW = 200  # SQLite steps a row costs a statement at most, about
TICK = 1000  # steps between two looks at the budget


class _Spent(Exception):
    """The budget ran out in the middle of a walk."""


@dataclass
class Budget:
    """What one search may spend; ``spent`` once it ran out."""

    rows: int = ROWS
    seconds: float = SECONDS
    spent: bool = field(default=False, init=False)

    @contextmanager
    def on(self, db):
        """Hold ``db``'s statements to this budget for the ``with`` block."""
        self._deadline = time.monotonic() + self.seconds
        steps = self.rows * STEPS_PER_ROW
        every = max(1, min(TICK, steps))  # a small budget is looked at more often
        ticks = -(-steps // every)

        def tick() -> int:
            nonlocal ticks
            ticks -= 1
            if ticks <= 0 or time.monotonic() >= self._deadline:
                self.spent = True
                return 1  # SQLite stops the statement: OperationalError "interrupted"
            return 0

        db.set_progress_handler(tick, every)
        try:
            yield self
        finally:
            db.set_progress_handler(None, TICK)

    def take(self, n: int = 1) -> None:
        """Count ``n`` rows a walk looked at; raises ``_Spent`` past the budget."""
        self.rows -= n
        if self.rows < 0 or (self.rows % 64 < n and time.monotonic() >= self._deadline):
            self.spent = True
            raise _Spent


@dataclass
class Walk:
    """What a walk found (newest first), whether its budget ran out first, and how far down
    it had looked (see the module's invariants)."""

    found: list[int] = field(default_factory=list)
    partial: bool = False
    reached: int | None = None


def select(db, f, lo: int, hi: int, limit: int, budget: Budget) -> Walk:
    """Matching seqs with ``lo < seq < hi``, newest first, at most ``limit``, within
    ``budget``."""
    walk = Walk()
    try:
        with budget.on(db):
            if f.text is None:
                _rows(db, *_structured_sql(f, lo, hi, limit), walk)
            elif not narrows(f):
                _rows(db, *_texts_sql(f.text, lo, hi, limit), walk)
            else:
                _in_step(db, f, lo, hi, limit, walk, budget)
    except (sqlite3.OperationalError, _Spent):
        if not budget.spent:
            raise  # not ours: a locked file, a wrong statement
        walk.partial = True
    return walk


def _rows(db, sql: str, args, walk: Walk) -> None:
    """A statement's seqs into ``walk`` as they come (so an interrupted walk keeps those it
    had); the last one found is as far down as such a walk can tell it looked."""
    for row in db.execute(sql, args):
        walk.found.append(row[0])
        walk.reached = row[0]


def _in_step(db, f, lo: int, hi: int, limit: int, walk: Walk, budget: Budget) -> None:
    """The two walks of a text with filters, a row of each in turn (see the module)."""
    sql, args = _structured_sql(f, lo, hi, -1, also=_HAS_TEXT)
    by_filters = db.execute(sql, [f.text.query] + args)
    sql, args = _text_first_sql(f, lo, hi)
    by_text = db.execute(sql, args)
    walks = [[by_filters, hi], [by_text, hi]]  # [cursor, the lowest seq it looked at]
    matches: set[int] = set()
    first = True
    try:
        while True:
            if not first:  # a round always runs first, so that paging on moves down
                budget.take(2)
            first = False
            for one in walks:
                row = one[0].fetchone()
                if row is None:  # this walk saw every candidate: what matched is all there is
                    walk.found = sorted(matches, reverse=True)[:limit]
                    walk.reached = None
                    return
                one[1] = row[0]
                if row[1]:
                    matches.add(row[0])
            # every match at or above the lower of the two is known (either walk finds it)
            floor = min(walks[0][1], walks[1][1])
            known = [s for s in matches if s >= floor] if len(matches) >= limit else ()
            if len(known) >= limit:
                walk.found = sorted(known, reverse=True)[:limit]
                walk.reached = None
                return
    finally:
        floor = min(walks[0][1], walks[1][1])
        if budget.spent:
            walk.found = sorted((s for s in matches if s >= floor), reverse=True)[:limit]
            walk.reached = floor
        by_filters.close()
        by_text.close()


# the text checked for one panel found by the filters (its terms looked up by rowid)
_HAS_TEXT = "EXISTS (SELECT 1 FROM panel_text WHERE panel_text MATCH ? AND rowid = {seq})"


def _text_first_sql(f, lo: int, hi: int) -> tuple[str, list]:
    """The text's matches, newest first, each with whether it passes the filters."""
    checks, args = _conditions(f)
    if f.model is not None:
        failed = " AND s.failed = 1" if f.status == "failed" else ""
        checks.append(f"EXISTS (SELECT 1 FROM seats s WHERE s.alias = ? AND s.seq = p.seq{failed})")
        args.append(f.model)
    ok = " AND ".join(checks) or "1"
    # CROSS JOIN: the text's matches drive, in rowid order; each panel is found by its seq
    return (
        f"SELECT panel_text.rowid, {ok} FROM panel_text CROSS JOIN panels p "
        "ON p.seq = panel_text.rowid WHERE panel_text MATCH ? AND panel_text.rowid > ? "
        "AND panel_text.rowid < ? ORDER BY panel_text.rowid DESC",
        args + [f.text.query, lo, hi],
    )


def seq_range(db, f) -> tuple[int, int]:
    """Seqs strictly between these hold every panel of the time range: the blocks of
    ``2**BLOCK_BITS`` seqs whose earliest and latest starts overlap it (one pass over a table
    of a thousand rows at a million panels). Exact whatever the order of starts: a block
    left out has no panel in the range."""
    if f.since is None and f.until is None:
        return -1, sys.maxsize
    first, last = db.execute(
        "SELECT min(block), max(block) FROM blocks WHERE lo <= ? AND hi >= ?",
        (1e300 if f.until is None else f.until, -1e300 if f.since is None else f.since),
    ).fetchone()
    if first is None:
        return 0, 0  # no panel in the range
    return (first << BLOCK_BITS) - 1, (last + 1) << BLOCK_BITS


def narrows(f) -> bool:
    return any(v is not None for v in (f.model, f.collection, f.key, f.status, f.since, f.until))


def _texts_sql(text, lo: int, hi: int, limit: int) -> tuple[str, tuple]:
    return (
        "SELECT rowid FROM panel_text WHERE panel_text MATCH ? AND rowid > ? "
        "AND rowid < ? ORDER BY rowid DESC LIMIT ?",
        (text.query, lo, hi, limit),
    )


def _structured_sql(f, lo: int, hi: int, limit: int, also: str | None = None) -> tuple[str, list]:
    """The filters' statement; ``also``: a column more, of the seq (``{seq}``), whose ``?``
    come first among the arguments."""
    where, args = _conditions(f)
    if f.model is not None:
        failed = " AND s.failed = 1" if f.status == "failed" else ""
        seq = "s.seq"
        sql = (
            f"SELECT DISTINCT s.seq{', ' + also.format(seq=seq) if also else ''} FROM seats s "
            "CROSS JOIN panels p ON p.seq = s.seq "
            f"WHERE s.alias = ?{failed} AND s.seq > ? AND s.seq < ?"
        )
        head = [f.model, lo, hi]
    else:
        seq = "p.seq"
        sql = (
            f"SELECT p.seq{', ' + also.format(seq=seq) if also else ''} FROM panels p "
            "WHERE p.seq > ? AND p.seq < ?"
        )
        head = [lo, hi]
    sql += "".join(" AND " + w for w in where) + f" ORDER BY {seq} DESC LIMIT ?"
    return sql, head + args + [limit]


def _conditions(f) -> tuple[list[str], list]:
    """The filters on a panel's own row (``p``): all but the model."""
    where, args = [], []
    if f.collection is not None:
        where.append("p.collection = ?")
        args.append(f.collection)
    if f.key is not None:
        where.append("p.key = ?")
        args.append(f.key)
    if f.status == "abandoned":
        where.append("p.abandoned = 1")
    elif f.status == "owed":
        where.append("p.owed > 0 AND p.owes = 1")
    elif f.status == "failed" and f.model is None:
        where.append("p.failed = 1")
    # unary +: the time range is checked row by row, never a reason to leave seq order
    if f.since is not None:
        where.append("+p.started >= ?")
        args.append(f.since)
    if f.until is not None:
        where.append("+p.started <= ?")
        args.append(f.until)
    return where, args
