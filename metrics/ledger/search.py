"""The panels' search index (``SearchIndex``): which finished panels match a text, a model, a
collection, a key, a status and a time range, answered from an SQLite database with an FTS5
table that follows calls.jsonl and evidence.jsonl by byte offset, so a filtered page costs about
the same at ten panels or a million, and no request rereads a log. How log lines become rows
is ``searchfold``; how a search walks the tables, within a budget that bounds its cost, is
``searchplan``; this module holds the files, the one writer and the readers.

Files, beside the logs it indexes (``runs_dir``, the ledger's folder)::

    search.sqlite   (+ -wal, -shm) panels, their seats, verdicts and delivery, and the terms of
                    every prompt and answer; derived, so safe to delete (it is rebuilt)
    search.lock     an empty file whose ``flock`` the one writer holds

What a status means (the same words the panels page uses):

* ``failed``: a seat (the merger included) ended ``error`` or ``empty``; with a model, that
  model's own seat did.
* ``abandoned``: the caller left before the end (calls.jsonl says ``"abandoned": true``).
* ``owed``: an answered seat has no verdict, and the caller had the panel's reply (a
  ``"delivered"`` line, or its seating did not await delivery and it was not abandoned).

Invariants:

* It is "calls.jsonl (inode I) up to byte C and evidence.jsonl (inode J) up to byte E": both
  offsets and inodes are written in the same transaction as the rows they cover, so a writer
  killed mid-batch loses only that batch, which the next writer redoes. A log replaced (another
  inode) or cut shorter than its offset, a database missing or of another layout, is rebuilt
  from offset 0.
* A damaged file is never served from and never deleted: one that fails ``PRAGMA
  quick_check`` when this process first opens it, or raises ``sqlite3.DatabaseError`` (the
  class SQLite's "malformed" and "not a database" are) while it is read or written, is renamed
  ``search.sqlite.damaged-<UTC time>`` (its -wal and -shm beside it, same suffix), under the
  writer's lock and only if it is still the file found damaged, and a new one is built in the
  background. Meanwhile requests answer from what the new file holds so far, and ``state``
  says ``rebuilding`` and names the file set aside.
* Folding is order-free between the two logs: a verdict or a delivery line may come before its
  panel's calls.jsonl line (a picked reply is delivered before the other seats end); it is kept
  and counted when the panel line comes.
* One writer at a time across threads and processes (``search.lock``'s ``flock`` and a thread
  lock); readers never wait for it (WAL). A request never waits for a long catch-up: a backlog
  up to ``inline_bytes`` is followed in the request, a longer one by a background thread in
  batches committed one by one, while requests answer from what is indexed and say so
  (``state``). ``close`` stops and joins that thread.
* A background build reads a long backlog of calls.jsonl newest first: windows of whole
  lines from the log's end back (``tail_lo``, ``tail_hi`` in ``meta``, beside the offset),
  so after a restart the live incident is found before the panels of the day before; the
  index is then "calls.jsonl up to C, and from ``tail_lo`` to ``tail_hi``". When the windows
  reach C, C becomes ``tail_hi``. Folding is order-free between lines too (a panel is a row
  keyed by its seq, and one already held is passed over), so the order changes no answer
  once the build ends. ``state`` counts the finished panels not held yet (panels.idx).
* Only whole lines are read (``jsonl.lines``), and lines that do not parse are skipped.
* The text table is contentless: it holds the terms of prompts and answers (the first
  ``MAX_TEXT`` characters of each), never their text, which stays in calls.jsonl; the file is
  still created 0600, like the logs, since terms are what was asked.
* A user's text reaches FTS5 only as double-quoted runs of word characters (``text_query``),
  so no query syntax of FTS5 can be typed: a search never fails on what was typed.
"""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from panelist.metrics import errors
from panelist.metrics.ledger import searchplan
from panelist.metrics.ledger.ids import FinishedCount
from panelist.metrics.ledger.searchfold import MAX_TEXT, Fold, line_start
from panelist.metrics.ledger.searchplan import Budget
from panelist.metrics.store import jsonl

LAYOUT = "2"  # the schema below; another value is rebuilt
INLINE_BYTES = 1 << 20  # a backlog a request follows itself (about 500 panels)
BATCH_PANELS = 2000  # calls.jsonl lines per background transaction
BATCH_BYTES = 8 << 20  # evidence.jsonl bytes per background transaction
TAIL_BYTES = 4 << 20  # calls.jsonl bytes per window of a backlog indexed newest first
FIRST_TAIL_SHIFT = 4  # the first window is tail_bytes >> this (256 KiB)
MAX_QUERY = 500  # characters of a search text
MAX_TERMS = 16  # words and phrases of a search text
SETTLE_AFTER = 50_000  # panels a build folds before its text table is merged whole
LOCK_RETRY = 0.5  # seconds between looks at a lock another process holds
STATUSES = ("failed", "owed", "abandoned")
_WORD = re.compile(r"\w+")
_TERM = re.compile(r'"([^"]*)"?|([^\s"]+)')

SCHEMA = """
CREATE TABLE meta(name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE panels(seq INTEGER PRIMARY KEY, panel TEXT NOT NULL, started REAL,
    collection TEXT, key TEXT,
    failed INTEGER NOT NULL, abandoned INTEGER NOT NULL, answered TEXT NOT NULL,
    owed INTEGER NOT NULL, owes INTEGER NOT NULL);
CREATE INDEX panels_collection ON panels(collection, seq);
CREATE INDEX panels_key ON panels(key, seq);
CREATE INDEX panels_failed ON panels(seq) WHERE failed = 1;
CREATE INDEX panels_abandoned ON panels(seq) WHERE abandoned = 1;
CREATE INDEX panels_owed ON panels(seq) WHERE owed > 0 AND owes = 1;
CREATE TABLE seats(alias TEXT NOT NULL, seq INTEGER NOT NULL, label TEXT NOT NULL,
    status TEXT, seconds REAL, failed INTEGER NOT NULL,
    PRIMARY KEY(alias, seq, label)) WITHOUT ROWID;
CREATE INDEX seats_failed ON seats(alias, seq) WHERE failed = 1;
CREATE TABLE blocks(block INTEGER PRIMARY KEY, lo REAL NOT NULL, hi REAL NOT NULL);
CREATE TABLE judged(seq INTEGER NOT NULL, label TEXT NOT NULL,
    PRIMARY KEY(seq, label)) WITHOUT ROWID;
CREATE TABLE delivery(seq INTEGER PRIMARY KEY, awaits INTEGER NOT NULL DEFAULT 0,
    delivered INTEGER NOT NULL DEFAULT 0, abandoned INTEGER NOT NULL DEFAULT 0);
CREATE VIRTUAL TABLE panel_text USING fts5(prompt, answers, content='', columnsize=0,
    tokenize='unicode61 remove_diacritics 2');
"""
TABLES = ("meta", "panels", "seats", "blocks", "judged", "delivery", "panel_text")


# ------------------------------------------------------------------------- what is asked


@dataclass(frozen=True)
class Text:
    """A search text made safe: ``query`` for FTS5, ``terms`` (each a list of lower-case
    words, the last maybe a prefix) for finding where it matched."""

    query: str
    terms: tuple[tuple[tuple[str, ...], bool], ...]  # (words, prefix)


def text_query(text: str) -> Text:
    """Plain words must all appear (any order, either in the prompt or in an answer);
    ``"a phrase"`` must appear as written; ``word*`` matches words that start so. Case and
    accents do not count, nor does punctuation, which separates words. Raises BadRequest
    (``q``) for a text that is too long or holds no word."""
    if len(text) > MAX_QUERY:
        raise errors.BadRequest(
            f"'q' is {len(text)} characters; search for at most {MAX_QUERY}", param="q"
        )
    terms = []
    for m in _TERM.finditer(text):
        phrase, word = m.group(1), m.group(2)
        words = tuple(w.lower() for w in _WORD.findall(phrase if phrase is not None else word))
        if words:
            terms.append((words, phrase is None and word.endswith("*")))
    if not terms:
        raise errors.BadRequest(
            "'q' holds no word to search for: give words, \"a phrase\" or a prefix such as pars*",
            param="q",
        )
    if len(terms) > MAX_TERMS:
        raise errors.BadRequest(
            f"'q' holds {len(terms)} words and phrases; give at most {MAX_TERMS}", param="q"
        )
    # only word characters, inside double quotes: FTS5 reads nothing else of what was typed
    query = " ".join(
        '"' + " ".join(words) + '"' + (" *" if prefix else "") for words, prefix in terms
    )
    return Text(query, tuple(terms))


def excerpt(
    text: Text, prompt, answers: list[tuple[str | None, str | None]], width: int = 160
) -> dict | None:
    """Where ``text`` matched a panel: ``{"in": "prompt" | "answer", "call", "text", "at":
    [start, end]}`` (``at`` marks the match inside ``text``), or None if no term is found as
    written (accents differ, say). ``answers``: ``(call, text)`` as a panel line holds them (a
    field may be missing)."""
    patterns = []
    for words, prefix in text.terms:
        joined = r"\W+".join(re.escape(w) for w in words)
        patterns.append(r"\b" + joined + (r"\w*" if prefix else r"\b"))
    rx = re.compile("|".join(patterns), re.IGNORECASE)
    texts: list[tuple[str, str | None, object]] = [("prompt", None, prompt)]
    for where, call, body in texts + [("answer", c, a) for c, a in answers]:
        if not isinstance(body, str):
            continue
        m = rx.search(body, 0, MAX_TEXT)
        if m is None:
            continue
        start = max(0, m.start() - width // 3)
        end = min(len(body), max(m.end(), start + width))
        cut = body[start:end]
        lead = "…" if start else ""
        return {
            "in": where,
            "call": call,
            "text": lead + cut + ("…" if end < len(body) else ""),
            "at": [len(lead) + m.start() - start, len(lead) + m.end() - start],
        }
    return None


class Found(NamedTuple):
    """A page of matching panels' seqs, newest first; the ``before`` of the next page (None:
    no more); whether the search stopped at its budget before it had looked at every panel
    (more may match from ``next`` down)."""

    seqs: list[int]
    next: int | None
    partial: bool


@dataclass(frozen=True)
class Filters:
    """What a page of panels must match; None is "any"."""

    text: Text | None = None
    model: str | None = None
    collection: str | None = None
    key: str | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None


# ------------------------------------------------------------------------- the index


class SearchIndex:
    """One process's view of a runs folder's search index; threads may share it."""

    def __init__(
        self,
        runs_dir: Path,
        *,
        inline_bytes: int = INLINE_BYTES,
        batch_panels: int = BATCH_PANELS,
        batch_bytes: int = BATCH_BYTES,
        tail_bytes: int = TAIL_BYTES,
        budget_rows: int = searchplan.ROWS,
        budget_seconds: float = searchplan.SECONDS,
        on_batch=None,
    ):
        self.dir = Path(runs_dir)
        self.path = self.dir / "search.sqlite"
        self.calls_path = self.dir / "calls.jsonl"
        self.evidence_path = self.dir / "evidence.jsonl"
        self.lock_path = self.dir / "search.lock"
        self.inline_bytes = inline_bytes
        self.batch_panels = max(1, batch_panels)
        self.batch_bytes = max(1, batch_bytes)
        self.tail_bytes = max(1, tail_bytes)
        # called after each background batch is committed, the writer's lock still held: the
        # build's progress, for whoever follows it (readers meanwhile see what is committed)
        self.on_batch = on_batch
        self.budget_rows, self.budget_seconds = budget_rows, budget_seconds
        self._writing = threading.Lock()  # this process's one writer (with the flock)
        self._pool_lock = threading.Lock()
        self._pool: list[sqlite3.Connection] = []  # idle readers of the file ``_ino``
        self._ino: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: str | None = None  # why the last background build stopped
        self._checked: int | None = None  # the inode quick_check last passed
        self._damaged: int | None = None  # the inode found damaged, until it is set aside
        self._rebuilding = False  # from a damaged file, until the new one is whole
        self._set_aside: str | None = None  # the name the damaged file was given
        self._folded = 0  # panels this process has folded in
        self._finished = FinishedCount(self.dir / "panels.idx")
        self._finished_lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ asking

    def catch_up(self) -> dict:
        """Bring the index up to the logs' ends if that is quick, else have it brought up in
        the background (or by the process that holds the lock); returns ``state``."""
        behind = self._behind()
        if (
            behind
            and behind <= self.inline_bytes
            and not self._closed
            and self._writing.acquire(blocking=False)
        ):
            try:
                if self._write(until_done=True):
                    behind = 0
            except sqlite3.DatabaseError as exc:
                if type(exc) is not sqlite3.DatabaseError:
                    raise  # a locked file or a wrong statement: no reason to rebuild
                self._found_damaged(_inode(self.path), exc)
            finally:
                self._writing.release()
        elif behind:
            self._background()
        return self.state(behind)

    def state(self, behind: int | None = None) -> dict:
        """``{"complete", "indexed", "behind_bytes", "behind_panels", "building", "error",
        "rebuilding", "set_aside"}``: whether the index covers both logs whole, how many panels
        it holds, how many log bytes it has still to read, how many finished panels it does not
        hold yet (None when that cannot be counted), whether a build runs in this process, why
        the last one failed, whether it is being built anew because its file was found damaged
        (answers hold only what the new one holds so far), and the name that file was set
        aside as."""
        behind = self._behind() if behind is None else behind
        meta = self._read(_meta, build=False) or {}
        rebuilding = self._rebuilding and (self.building or self._damaged is not None)
        indexed = int(meta.get("panels") or 0)
        return {
            "complete": not behind,
            "indexed": indexed,
            "behind_bytes": behind,
            "behind_panels": self._panels_behind(indexed) if behind else 0,
            "building": self.building,
            "error": self._error,
            "rebuilding": rebuilding,
            "set_aside": self._set_aside,
        }

    def _panels_behind(self, indexed: int) -> int | None:
        """Finished panels (panels.idx's slots that point at a line) the index does not hold."""
        with self._finished_lock:
            finished = self._finished()
        return None if finished is None else max(0, finished - indexed)

    @property
    def building(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def find(self, f: Filters, *, before: int | None = None, limit: int = 50) -> Found:
        """The seqs of matching panels below ``before`` (None: from the newest), newest first,
        at most ``limit``; the seq to pass as ``before`` for the next page (None: none); and
        whether the search's budget (``searchplan``) ran out first, so that more may match
        below what was found (then ``next`` continues from where the walk had got to)."""

        def run(db):
            lo, hi = searchplan.seq_range(db, f)
            if before is not None:
                hi = min(hi, before)
            walk = searchplan.select(db, f, lo, hi, limit + 1, self.budget())
            rows = walk.found[:limit]
            if len(walk.found) > limit:
                return Found(rows, rows[-1], walk.partial)
            if walk.partial:
                reached = walk.reached if walk.reached is not None and walk.reached < hi else None
                return Found(rows, reached, True)
            return Found(rows, None, False)

        return self._read(run) or Found([], None, False)

    def budget(self) -> Budget:
        """A new search's budget (``searchplan``)."""
        return Budget(self.budget_rows, self.budget_seconds)

    def among(self, f: Filters, seqs: list[int]) -> tuple[list[int], list[int]]:
        """Of ``seqs`` (finished panels), those that match, in that order, and apart those the
        index does not hold yet."""
        if not seqs:
            return [], []
        lo, hi = min(seqs) - 1, max(seqs) + 1

        def run(db):
            held = {
                r[0]
                for r in db.execute("SELECT seq FROM panels WHERE seq > ? AND seq < ?", (lo, hi))
            }
            a, b = searchplan.seq_range(db, f)
            # bounded by the page of seqs asked about; the budget holds it all the same
            found = set(
                searchplan.select(db, f, max(lo, a), min(hi, b), hi - lo, self.budget()).found
            )
            return [s for s in seqs if s in found], [s for s in seqs if s not in held]

        return self._read(run) or ([], list(seqs))

    def model_seats(self, alias: str, *, failed: bool = False, limit: int = 50) -> list[dict]:
        """The newest seats of one model, newest first: ``{"panel", "call", "status",
        "seconds", "started"}``; only failed ones with ``failed``."""
        sql = (
            "SELECT p.panel, s.label, s.status, s.seconds, p.started FROM seats s "
            + ("INDEXED BY seats_failed " if failed else "")
            + "CROSS JOIN panels p ON p.seq = s.seq WHERE s.alias = ? "
            + ("AND s.failed = 1 " if failed else "")
            + "ORDER BY s.seq DESC LIMIT ?"
        )
        rows = self._read(lambda db: db.execute(sql, (alias, limit)).fetchall()) or []
        return [
            {
                "panel": r[0],
                "call": f"{r[0]}.{r[1]}",
                "status": r[2],
                "seconds": r[3],
                "started": r[4],
            }
            for r in rows
        ]

    # ------------------------------------------------------------------ reading

    def _read(self, fn, *, build: bool = True):
        """``fn(connection)`` on a reader of the current file; None when there is no index of
        this layout yet (with ``build``, one is then built in the background)."""
        db, ino = self._reader()
        if db is None:
            if build:
                self._background()
            return None
        try:
            return fn(db)
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:
                raise  # a locked file or a wrong statement: no reason to rebuild
            db.close()
            db = None
            self._found_damaged(ino, exc)
            return None
        finally:
            if db is not None:
                with self._pool_lock:
                    if self._ino == _inode(self.path) and not self._closed:
                        self._pool.append(db)
                        db = None
                if db is not None:
                    db.close()

    def _reader(self) -> tuple[sqlite3.Connection | None, int | None]:
        """A reader of the current file and that file's inode; (None, inode) when there is
        no index of this layout to read (none yet, or one found damaged)."""
        ino = _inode(self.path)
        with self._pool_lock:
            if ino != self._ino:  # deleted or replaced: the old readers read another file
                for db in self._pool:
                    db.close()
                self._pool.clear()
                self._ino = ino
            if self._pool:
                return self._pool.pop(), ino
        if ino is None or ino == self._damaged:
            return None, ino
        try:
            # mode=rw: a reader never creates the file (only the writer does, 0600)
            db = sqlite3.connect(
                f"file:{self.path}?mode=rw", uri=True, check_same_thread=False, timeout=10.0
            )
        except sqlite3.DatabaseError:
            return None, ino
        try:
            layout = _meta(db).get("layout")
            if layout == LAYOUT and ino != self._checked:
                # once per file and process: a page damaged where no query of the moment
                # looks would otherwise give wrong answers in silence
                problems = [r[0] for r in db.execute("PRAGMA quick_check(3)")]
                if problems != ["ok"]:
                    raise sqlite3.DatabaseError("; ".join(map(str, problems)))
                self._checked = ino
        except sqlite3.DatabaseError as exc:
            db.close()
            if type(exc) is sqlite3.DatabaseError:
                self._found_damaged(ino, exc)
            return None, ino
        if layout != LAYOUT:
            db.close()
            return None, ino
        return db, ino

    def _found_damaged(self, ino: int | None, exc: Exception) -> None:
        """The file ``ino`` cannot be trusted: have it set aside and a new one built."""
        if ino is None:
            return
        self._damaged, self._rebuilding = ino, True
        self._error = (
            f"the search index was found damaged ({exc}); it is set aside and "
            "built anew, and answers hold what is rebuilt so far"
        )
        print(f"panelist: {self._error}", file=sys.stderr)
        self._background(rebuild=True)

    def _behind(self) -> int:
        """Log bytes the index has not read (all of a log it holds an older file of)."""
        meta = self._read(_meta, build=False) or {}
        total = 0
        for name, path in (("calls", self.calls_path), ("evidence", self.evidence_path)):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            offset = int(meta.get(f"{name}_offset") or 0)
            ahead = _tail(meta) if name == "calls" else None
            held_to = max(offset, ahead[1] if ahead else 0)
            if meta.get(f"{name}_ino") != st.st_ino or st.st_size < held_to:
                offset, ahead = 0, None
            total += st.st_size - offset - (ahead[1] - ahead[0] if ahead else 0)
        return total

    # ------------------------------------------------------------------ writing

    def _background(self, rebuild: bool = False) -> None:
        """Start the background writer unless it runs (or the index is closed)."""
        with self._pool_lock:
            if self._closed or self.building:
                return
            self._thread = threading.Thread(
                target=self._build,
                args=(rebuild,),
                name=f"search-index-{self.dir.name}",
                daemon=True,
            )
            self._thread.start()

    def _build(self, rebuild: bool) -> None:
        """The background writer: a batch at a time until both logs are read; while another
        process holds the lock, it looks again now and then (that process may die)."""
        try:
            with self._writing:
                start = self._folded
                set_aside = False  # at most once a build: a file that keeps failing stops it
                while not self._stop.is_set():
                    try:
                        done = self._write(until_done=False, rebuild=rebuild, settle=start)
                    except sqlite3.DatabaseError as exc:
                        if type(exc) is not sqlite3.DatabaseError or set_aside:
                            raise
                        self._damaged, self._rebuilding = _inode(self.path), True
                        rebuild = set_aside = True
                        continue
                    if done:
                        self._error = None
                        self._rebuilding = False
                        return
                    if done is None:
                        self._stop.wait(LOCK_RETRY)
                    else:
                        rebuild = False
        except (OSError, sqlite3.Error) as exc:
            self._error = f"the search index could not be built ({exc})"
            print(f"panelist: {self._error}", file=sys.stderr)

    def _write(
        self, *, until_done: bool, rebuild: bool = False, settle: int | None = None
    ) -> bool | None:
        """One writer turn under ``search.lock`` (caller holds ``_writing``): one batch of both
        logs or, ``until_done``, all they hold. True when the index covers both whole, False
        when a batch ended first, None when another process holds the lock. ``settle``: the
        count of panels folded when a long build began; once it covers the logs, if it folded
        ``SETTLE_AFTER`` or more, the text table's segments are merged into one, which makes
        every later search deep into it several times faster."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            db = self._writer(rebuild)
            try:
                while True:
                    done = self._batch(
                        db,
                        None if until_done else self.batch_panels,
                        None if until_done else self.batch_bytes,
                    )
                    if not until_done and self.on_batch is not None:
                        self.on_batch()
                    if done and settle is not None and self._folded - settle >= SETTLE_AFTER:
                        db.execute("INSERT INTO panel_text(panel_text) VALUES ('optimize')")
                    if done or not until_done or self._stop.is_set():
                        return done
            finally:
                db.close()
        finally:
            os.close(fd)  # and with it the flock

    def _writer(self, rebuild: bool) -> sqlite3.Connection:
        """The writer's connection to a database of this layout (made, or made anew, as
        needed); caller holds the flock."""
        ino = _inode(self.path)
        if rebuild and ino is not None and ino == self._damaged:
            self._set_aside = self._put_aside()
            ino = None
        elif rebuild and ino is not None:
            # another process set the damaged file aside and began a new one: build on it
            rebuild = False
        if ino is None:
            for suffix in ("-wal", "-shm"):
                # a stale -wal beside a new file would be replayed into it
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self._damaged = None
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # derived data: a lost batch is redone
            if _meta(db).get("layout") != LAYOUT:
                _reset(db)
        except sqlite3.DatabaseError:
            db.close()
            if rebuild:
                raise
            # not a database (or a damaged one): set aside, never deleted, and made anew
            self._damaged, self._rebuilding = _inode(self.path), True
            return self._writer(rebuild=True)
        return db

    def _put_aside(self) -> str:
        """Rename the damaged file (and its -wal and -shm) out of the way, keeping them as
        evidence; the name it now has. Caller holds the flock."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name = f"{self.path.name}.damaged-{stamp}"
        n = 1
        while (self.dir / name).exists():
            n += 1
            name = f"{self.path.name}.damaged-{stamp}-{n}"
        for suffix in ("-wal", "-shm", ""):  # the main file last: its name is the sign
            side = Path(f"{self.path}{suffix}")
            if side.exists():
                os.replace(side, self.dir / f"{name}{suffix}")
        return name

    def _batch(self, db, panels: int | None, nbytes: int | None) -> bool:
        """Fold the next lines of both logs in one transaction; True when both are read to
        their last whole line."""
        db.execute("BEGIN IMMEDIATE")
        try:
            meta = _meta(db)
            files: dict[str, tuple[int | None, int]] = {}  # (inode, size); no inode: no file
            for name, path in (("calls", self.calls_path), ("evidence", self.evidence_path)):
                try:
                    st = os.stat(path)
                    files[name] = (st.st_ino, st.st_size)
                except FileNotFoundError:
                    files[name] = (None, 0)
            ahead = _tail(meta)
            marks = {n: int(meta.get(f"{n}_offset") or 0) for n in files}
            marks["calls"] = max(marks["calls"], ahead[1] if ahead else 0)
            if any(
                marks[n] and (meta.get(f"{n}_ino") != ino or size < marks[n])
                for n, (ino, size) in files.items()
            ):
                _reset(db)  # a log was replaced or cut: what is held is not in it
                meta, ahead = {}, None
            fold = Fold(db)
            ev_end, ev_done = fold.evidence(
                self.evidence_path, int(meta.get("evidence_offset") or 0), nbytes
            )
            if panels is None:  # all of it, in the request: no order to choose
                start, tail = int(meta.get("calls_offset") or 0), None
                if ahead is not None:  # a window a background build left: around it
                    fold.calls(self.calls_path, start, None, end=ahead[0])
                    start = ahead[1]
                calls_end, calls_done = fold.calls(self.calls_path, start, None)
            else:
                calls_end, tail, calls_done = self._calls_window(
                    fold, meta, files["calls"][1], panels
                )
            db.executemany(
                "INSERT OR REPLACE INTO meta(name, value) VALUES (?, ?)",
                [
                    ("calls_ino", files["calls"][0]),
                    ("calls_offset", calls_end),
                    ("tail_lo", tail and tail[0]),
                    ("tail_hi", tail and tail[1]),
                    ("evidence_ino", files["evidence"][0]),
                    ("evidence_offset", ev_end),
                    ("panels", int(meta.get("panels") or 0) + fold.panels),
                ],
            )
            db.execute("COMMIT")
            self._folded += fold.panels
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return calls_done and ev_done

    def _calls_window(
        self, fold: Fold, meta: dict, size: int, panels: int
    ) -> tuple[int, tuple[int, int] | None, bool]:
        """One background batch of calls.jsonl, newest first: a backlog longer than
        ``tail_bytes`` is read from its end back, a window of whole lines at a time (the first
        a sixteenth of ``tail_bytes``, each after as large as all before, at most
        ``tail_bytes``), so the newest panels are found while the oldest still wait; the index
        then holds the lines up to the offset and those of the window (``tail_lo``,
        ``tail_hi``). When the windows reach the offset, the offset jumps to the window's end
        and the lines appended since are read forward. Returns (the offset, the window or None, whether the log is read)."""
        offset = int(meta.get("calls_offset") or 0)
        tail = _tail(meta)
        if tail is None:
            end = _complete_end(self.calls_path, offset, size)
            if end - offset > max(self.tail_bytes, self.inline_bytes):
                tail = (end, end)  # an empty window at the end, to grow down from
        if tail is not None and tail[0] > offset:
            # the first windows are small, so the newest panels show within a moment; each
            # then doubles what is held, up to tail_bytes
            span = min(self.tail_bytes, max(self.tail_bytes >> FIRST_TAIL_SHIFT, tail[1] - tail[0]))
            lo = line_start(self.calls_path, max(offset, tail[0] - span), offset, tail[0])
            fold.calls(self.calls_path, lo, None, end=tail[0])
            return offset, (lo, tail[1]), False
        if tail is not None:
            offset = tail[1]  # the windows met the offset: all below the window's end is held
        end, done = fold.calls(self.calls_path, offset, panels)
        return end, None, done

    def close(self) -> None:
        """Stop the background writer (joined) and close every connection; always returns."""
        with self._pool_lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        if thread is not None:
            thread.join()
        with self._pool_lock:
            for db in self._pool:
                db.close()
            self._pool.clear()


def _meta(db) -> dict:
    try:
        return dict(db.execute("SELECT name, value FROM meta"))
    except sqlite3.OperationalError:
        return {}  # no tables yet: a new file


def _tail(meta: dict) -> tuple[int, int] | None:
    """The window of calls.jsonl a background build holds beyond its offset, or None."""
    lo, hi = meta.get("tail_lo"), meta.get("tail_hi")
    return (int(lo), int(hi)) if lo is not None and hi is not None else None


def _complete_end(path: Path, floor: int, size: int) -> int:
    """Just past the last whole line of ``path`` (``floor`` for none, or no file)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return floor
    try:
        return jsonl.complete_end(fd, size, floor) if size > floor else floor
    finally:
        os.close(fd)


def _reset(db) -> None:
    """Empty the index, in this layout (inside the caller's transaction, or its own)."""
    own = not db.in_transaction
    if own:
        db.execute("BEGIN IMMEDIATE")
    for name in TABLES:
        db.execute(f"DROP TABLE IF EXISTS {name}")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO meta(name, value) VALUES ('layout', ?)", (LAYOUT,))
    if own:
        db.execute("COMMIT")


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
