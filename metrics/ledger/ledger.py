"""The gateway's ledger: panels, seats, verdicts, cooldowns and learned windows, kept in JSONL, with
an in-memory index that follows the logs' tails so that every lookup costs the same at any log size.

``Ledger`` is what callers use: it writes every record and answers every read, through its
parts: ``logs`` (where the records live: the files below, or with ``database`` the tables of
``pglogs``, behind one surface), ``ids`` (panel ids and panels.idx), ``index`` (the pure fold
of evidence records, the same whichever holds them), ``snapshot`` (index.json) and ``queries``
(the reads). Files in ``runs_dir``::

    calls.jsonl     one line per finished panel: the record given to ``record_panel`` (+ v, ts)
    evidence.jsonl  one line per seat answer, verdict, cooldown and learned window, and one
                    ``"seated"`` line per panel when it is seated (every alias it seated, before
                    any seat answers); a ``"delivered"`` line when the caller received a panel's
                    reply and an ``"abandoned"`` line when the caller left before the end; a
                    ``"probe"`` line per health probe (folded only as the model's newest
                    outcome and probe, never as a seat); every
                    line carries ``"v": 1``, ``"kind"`` and ``"ts"`` (UTC ISO, ms, ``Z``)
    panels.idx      8 bytes per panel seq: 0 while the panel is in flight, then 1 + the byte
                    offset of its calls.jsonl line; its length is the panel counter (``ids``)
    index.json      snapshot of the index, for the evidence.jsonl inode and byte offset it
                    covers; derived, so when missing, unreadable or stale it is rebuilt by replay

Every record's fields, the seat statuses and failure kinds are described for all readers in
``runs/README.md``.

Invariants:

* The logs are append-only. Panel ids are ``p{YYYYMMDD}-{seq}``, unique across processes
  because seq is a panels.idx slot; call ids are ``{panel}.{seat}`` (see ``ids``).
* Every evidence record is folded into the index exactly once, by the tail reader alone (our own
  appends included): the index is always "evidence.jsonl up to byte offset N", which is also what
  a snapshot records. A replaced evidence file (another inode, or shorter than N) is replayed
  from 0 into an empty index; only such a replay reads calls.jsonl, once, for the panels logged
  as abandoned before ``"abandoned"`` lines existed.
* A ``"seated"`` line is folded like any other, by the tail reader: a writer sees its own
  seating at its next refresh, which is how the gateway's next seating sees it at once.
* Verdicts and windows are decided while holding evidence.jsonl's ``flock``, after following the
  tail under it, so two processes never both write the same decision. A verdict equal to the
  current one is not written.
* A panel the caller left gets its ``"abandoned"`` evidence line before its calls.jsonl line, so
  no reader counts its seats as owed in between.
* A snapshot is written when the ledger opens (unless it loaded one with nothing to replay),
  every ``snapshot_every`` records folded, and at ``close`` if anything new was folded.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

from panelist.metrics import errors
from panelist.metrics.ledger import snapshot
from panelist.metrics.ledger.backend import Logs
from panelist.metrics.ledger.ids import ID_HELP, panel_seq
from panelist.metrics.ledger.index import RECENT_HISTORY, V_OFFSET, Index, ModelState, reply_hash
from panelist.metrics.ledger.logs import FileLogs
from panelist.metrics.ledger.queries import Queries, verdict_view
from panelist.metrics.store.jsonl import SCHEMA, utc_iso


class Ledger:
    """One process's view of a runs folder; many threads and processes may share the folder."""

    def __init__(
        self,
        runs_dir: Path,
        *,
        snapshot_every: int = 50_000,
        recent_calls: int = 100_000,
        recent_history: int = RECENT_HISTORY,
        database: str | None = None,
        clock=time.time,
    ):
        self.dir = Path(runs_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        # the snapshot is this instance's own, beside its runs folder, on either home
        self.snapshot_path = self.dir / "index.json"
        self.snapshot_every = max(1, int(snapshot_every))

        self._clock = clock  # this host's epoch seconds (a cooldown's start)
        self._lock = threading.Lock()  # the index and the tail reader
        self._decide = threading.Lock()  # one decide-then-append section per process at a time
        self._logs: Logs  # the records' home: the files or the database, one surface
        # where the records live: the redacted database URL, or None for the runs folder
        self.database: str | None = None
        if database:
            from panelist.metrics.ledger.pglogs import DatabaseLogs
            from panelist.metrics.store.pg import redact
            from panelist.metrics.store.pgdeferred import deferred

            # a database out of reach at start defers the logs until it answers (pgdeferred)
            self._logs = deferred(
                lambda: DatabaseLogs(
                    database, self.snapshot_path, clock=clock, outbox=self.dir / "outbox"
                ),
                shown=redact(database),
                snapshots=True,
            )
            self.database = redact(database)
        else:
            files = self._logs = FileLogs(self.dir)
            # where the files are is the logs' to say, named here for readers of the folder
            self.calls_path = files.calls_path
            self.evidence_path = files.evidence_path
        self._closed = False

        self._index = Index(recent_calls=recent_calls, recent_history=recent_history)
        self.recent_calls = self._index.recent_calls
        self.panels_kept = self._index.panels_kept
        self.recent_history = self._index.recent_history
        self._unsaved = 0  # records folded since the last snapshot
        self._queries = Queries(self._index, self._lock, self.refresh, self._logs)
        try:
            self.from_snapshot = self._logs.snapshots and self._logs.load_snapshot(self._index)
            with self._lock:
                self.replayed = self._follow()  # records read at start: 0 after a clean close
            if self._logs.snapshots and (not self.from_snapshot or self.replayed):
                self._write_snapshot()
        except errors.DatabaseUnreachable:
            if getattr(self._logs, "built", True):
                self._logs.close()
                raise
            # started without its database: the index is read whole at the first follow
            self.from_snapshot, self.replayed = False, 0
        except BaseException:
            self._logs.close()
            raise

    @classmethod
    def of_home(cls, home, **kw) -> "Ledger":
        """The ledger of a data folder: in its database when it names one, else in its
        runs folder."""
        return cls(home.gateway_runs, database=home.database, **kw)

    # ----------------------------------------------------------------- following the tail

    def refresh(self) -> None:
        """Follow the evidence (other processes' appends and our own)."""
        with self._lock:
            self._follow()
            # taken in the same locked section, so only one of several racing threads saves it
            state = (
                self._capture()
                if self._unsaved >= self.snapshot_every and self._logs.snapshots
                else None
            )
        if state is not None:
            self._logs.save_snapshot(state)

    def catch_up(self) -> int:
        """Fold whatever is new, looking even where no news was heard (a database's tables are
        read, so an unreachable one raises ``DatabaseUnreachable``); the records folded."""
        with self._lock:
            return self._follow(force=True)

    def _follow(self, force: bool = False) -> int:
        """Fold what was appended since the last look; caller holds ``_lock``. Returns the
        count. ``force``: look even where the logs were told of nothing new (a decision)."""
        n = self._logs.follow(self._index, time.time(), force)
        self._unsaved += n
        return n

    def _capture(self) -> dict:
        """The index's state for a snapshot; caller holds ``_lock``."""
        self._unsaved = 0
        return snapshot.capture(self._index)

    def _write_snapshot(self) -> None:
        with self._lock:
            if self._index.ino is None:
                return
            state = self._capture()
        self._logs.save_snapshot(state)

    def evidence_end(self) -> tuple:
        """``(which log, position past its last record)``: evidence.jsonl's inode and size, or
        the database and its last evidence id. A follower keeps both, and starts over at 0
        when the first changes."""
        return self._logs.end()

    def evidence_after(self, pos: int):
        """A follower of the evidence records after ``pos`` (as ``evidence_end`` counts):
        ``read()`` yields ``(pos, record)`` in order, ``offset`` is where it got to."""
        return self._logs.reader(pos)

    # ----------------------------------------------------------------- reads (queries.py)

    def states(
        self, aliases: Iterable[str], shape: str, now: float | None = None
    ) -> dict[str, ModelState]:
        return self._queries.states(aliases, shape, now)

    def pairs(self, shape: str) -> dict[tuple[str, str], int]:
        return self._queries.pairs(shape)

    def patterns(self, shape: str) -> dict[tuple, int]:
        return self._queries.patterns(shape)

    def patterns_stamp(self, shape: str) -> int:
        return self._queries.patterns_stamp(shape)

    def paired_shapes(self) -> list[str]:
        return self._queries.paired_shapes()

    def judged_panels(self, shape: str | None = None) -> list[tuple[str, str, list]]:
        return self._queries.judged_panels(shape)

    def call(self, call_id: str) -> dict | None:
        return self._queries.call(call_id)

    def panel(self, panel_id: str) -> dict | None:
        return self._queries.panel(panel_id)

    def recent_panels(self, n: int = 20) -> list[dict]:
        return self._queries.recent_panels(n)

    def pending(
        self, *, key: str | None = None, limit: int = 50, oldest: bool = False
    ) -> list[dict]:
        return self._queries.pending(key=key, limit=limit, oldest=oldest)

    def undelivered(self, *, key: str | None = None, limit: int = 50) -> list[dict]:
        return self._queries.undelivered(key=key, limit=limit)

    def delivered_panel(self, content) -> str | None:
        return self._queries.delivered_panel(content)

    def tool_call_owner(self, tool_call_id) -> tuple[str, str] | None:
        return self._queries.tool_call_owner(tool_call_id)

    def panel_call(self, panel_id, alias, *, key: str | None = None) -> str:
        return self._queries.panel_call(panel_id, alias, key=key)

    def model_stats(self, shape: str | None = None) -> dict[str, dict]:
        return self._queries.model_stats(shape)

    def model_shapes(self, alias: str) -> dict[str, dict]:
        return self._queries.model_shapes(alias)

    def shapes(self) -> list[str]:
        return self._queries.shapes()

    def collection_stats(self) -> dict[str, dict]:
        return self._queries.collection_stats()

    def buckets(self, days: int = 30, now: float | None = None) -> dict:
        return self._queries.buckets(days, now)

    def usage(self, window: str, now: float | None = None) -> dict:
        return self._queries.usage(window, now)

    def series(
        self,
        window: str,
        *,
        aliases: list[str] | None = None,
        key: str | None = None,
        endpoint: str | None = None,
        now: float | None = None,
    ) -> dict:
        return self._queries.series(window, aliases=aliases, key=key, endpoint=endpoint, now=now)

    def failing(self, failed: int, of: int) -> dict[str, dict]:
        return self._queries.failing(failed, of)

    def answering(self) -> set[str]:
        return self._queries.answering()

    def probes(self) -> dict[str, dict]:
        return self._queries.probes()

    def owed_count(self, key: str | None = None) -> int:
        return self._queries.owed_count(key)

    def seat_totals(self) -> dict:
        return self._queries.seat_totals()

    def keys_last_used(self) -> dict[str, float]:
        return self._queries.keys_last_used()

    def verdict_count(self) -> int:
        return self._queries.verdict_count()

    def verdict_of(self, call: str) -> dict | None:
        return self._queries.verdict_of(call)

    def latest_panel(self) -> str | None:
        return self._queries.latest_panel()

    def panels_page(
        self, before_seq: int | None = None, limit: int = 50
    ) -> tuple[list[dict], int | None]:
        return self._queries.panels_page(before_seq, limit)

    def panels_after(
        self, seq: int | None, limit: int = 50, *, wait: float = 600.0, now: float | None = None
    ) -> tuple[list[dict], int]:
        return self._queries.panels_after(seq, limit, wait=wait, now=now)

    def panel_summaries(self, seqs: Iterable[int]) -> list[dict]:
        return self._queries.summaries(seqs)

    # ----------------------------------------------------------------- writing

    def new_panel(self, now: float | None = None) -> str:
        """Reserve the next panel id (a panels.idx slot)."""
        return self._logs.reserve(1, now)[0]

    def new_panels(self, count: int, now: float | None = None) -> list[str]:
        """Reserve ``count`` consecutive panel ids at once (one lock, one write)."""
        return self._logs.reserve(count, now)

    def seat_record(self, rec: dict, now: float | None = None) -> dict:
        """The evidence line ``record_seat`` writes for ``rec``."""
        _needs_names(rec, "record")
        now = time.time() if now is None else now
        ts = utc_iso(now)
        record = {"v": SCHEMA, "kind": "seat", "ts": ts}
        record.update(rec)
        # the head is ours whatever ``rec`` holds; set again, the keys keep their places
        record["v"], record["kind"], record["ts"] = SCHEMA, "seat", ts
        if not isinstance(record.get("seated"), (int, float)):
            record["seated"] = now
        return record

    def record_seat(self, rec: dict) -> None:
        """Append one seat's outcome to evidence.jsonl."""
        self._logs.append(self.seat_record(rec))

    def record_seat_lines(self, lines: list[dict]) -> None:
        """Append whole seat lines (``seatrecord.line`` of kind ``"seat"`` with the panel's
        ``panel``, ``shape`` and ``seated``), as a gateway's panel makes them, in one write."""
        for line in lines:
            if (
                line.get("kind") != "seat"
                or line.get("v") != SCHEMA
                or not isinstance(line.get("seated"), (int, float))
            ):
                raise errors.BadRequest(
                    "a seat line is a seatrecord.line of kind 'seat' "
                    "with its panel's 'seated'; use record_seat for a record"
                )
            _needs_names(line, "line")
        if lines:
            self._logs.append(*lines)

    def seated_record(
        self,
        panel: str,
        shape: str,
        aliases: Iterable[str],
        seated: float,
        collection: str | None = None,
        awaits_delivery: bool = False,
    ) -> dict:
        """The ``"seated"`` line ``record_seated`` writes."""
        aliases = list(aliases)
        if (
            not isinstance(shape, str)
            or not shape
            or not all(isinstance(a, str) and a for a in aliases)
        ):
            raise errors.BadRequest("a seating needs a shape and aliases (non-empty strings)")
        if collection is not None and (not isinstance(collection, str) or not collection):
            raise errors.BadRequest("a seating's collection is a non-empty string or None")
        record = {
            "v": SCHEMA,
            "kind": "seated",
            "ts": utc_iso(time.time()),
            "panel": panel,
            "shape": shape,
            "seated": seated,
            "aliases": aliases,
        }
        if collection is not None:
            record["collection"] = collection
        if awaits_delivery:
            record["awaits_delivery"] = True
        return record

    def record_seated(
        self,
        panel: str,
        shape: str,
        aliases: Iterable[str],
        seated: float,
        collection: str | None = None,
        awaits_delivery: bool = False,
    ) -> None:
        """Append one ``"seated"`` line: the panel took a seat for each of ``aliases`` at
        ``seated`` (epoch seconds, the panel's start). Written when the panel is seated, so the
        next seating here (after its tail refresh) and in any other process sees it at once.
        ``collection`` (its model id, ``bench/<name>``) counts the panel in ``collection_stats``.
        ``awaits_delivery``: the caller will call ``record_delivered`` when its client has the
        reply, and until then the panel's seats are owed no verdict."""
        self._logs.append(
            self.seated_record(panel, shape, aliases, seated, collection, awaits_delivery)
        )

    def record_delivered(
        self, panel: str, content: str | None, tool_call_ids: Iterable[str | None] = ()
    ) -> None:
        """Append one ``"delivered"`` line: the caller received this panel's reply, whose text
        was ``content`` (only its ``reply_hash`` is written) and whose tool calls had these ids.
        From then on its answered seats are owed verdicts, and ``delivered_panel`` finds the
        panel by that text."""
        if panel_seq(panel) is None:
            raise errors.BadRequest(f"not a panel id: {panel!r}")
        ids = [t for t in tool_call_ids if isinstance(t, str) and t]
        self._logs.append(
            {
                "v": SCHEMA,
                "kind": "delivered",
                "ts": utc_iso(time.time()),
                "panel": panel,
                "hash": reply_hash(content),
                "tool_calls": ids,
            }
        )

    @staticmethod
    def _abandoned_line(panel: str) -> dict:
        return {"v": SCHEMA, "kind": "abandoned", "ts": utc_iso(time.time()), "panel": panel}

    def record_seats(
        self, recs: list[dict], now: float | None = None, *, seatings: Iterable[dict] = ()
    ) -> None:
        """Append many seat records in one locked write (bulk loaders; a panel's seats that
        ended together), after the ``"seated"`` lines of ``seatings`` (dicts of
        ``seated_record``'s arguments), as a gateway writes them."""
        lines = [self.seated_record(**s) for s in seatings]
        lines.extend(self.seat_record(r, now) for r in recs)
        if lines:
            self._logs.append(*lines)

    def panel_record(self, rec: dict, now: float | None = None) -> tuple[int, dict]:
        """``(seq, line)`` for the calls.jsonl line ``record_panel`` writes for ``rec``."""
        seq = panel_seq(rec.get("panel"))
        if seq is None:
            raise errors.BadRequest(f"not a panel id: {rec.get('panel')!r}; use new_panel()")
        if not self._logs.reserved(seq):
            raise errors.BadRequest(f"panel '{rec['panel']}' was not reserved with new_panel()")
        record = {"v": SCHEMA, "ts": utc_iso(time.time() if now is None else now)}
        record.update(rec)
        return seq, record

    def record_panel(self, rec: dict, *, evidence: Iterable[dict] = ()) -> None:
        """Append a finished panel to calls.jsonl and point its panels.idx slot at the line.
        ``evidence``: seat lines (as ``record_seat_lines`` takes them) whose own write failed,
        written with the panel, before it, in one write (one transaction in a database). A
        panel the caller left (``"abandoned": true``) also gets an ``"abandoned"`` evidence
        line, written first, so no reader counts its seats as owed in between."""
        seq, record = self.panel_record(rec)
        left = list(evidence)
        if record.get("abandoned") is True:
            left.append(self._abandoned_line(record["panel"]))
        self._logs.append_panels([(seq, record)], left)

    def record_panels(self, recs: list[dict], now: float | None = None) -> None:
        """Append many finished panels in one locked write (bulk loaders); same lines."""
        if not recs:
            return
        pairs = [self.panel_record(r, now) for r in recs]
        left = [
            self._abandoned_line(record["panel"])
            for _, record in pairs
            if record.get("abandoned") is True
        ]
        self._logs.append_panels(pairs, left)

    def cool_down(self, alias: str, seconds: float, reason: str = "") -> None:
        """Keep ``alias`` out of panels for ``seconds`` from now (after a rate limit); 0 ends
        a cooldown."""
        now = self._clock()
        record = {
            "v": SCHEMA,
            "kind": "cooldown",
            "ts": utc_iso(now),
            "alias": alias,
            "until": self._logs.shared_time(now) + max(0.0, seconds),
            "seconds": seconds,
            "reason": reason,
        }
        if self.database:
            record["clock"] = "database"  # every host reads it back onto its own clock
        self._logs.append(record)

    def record_probe(self, rec: dict) -> dict:
        """Append one probe's (or endpoint test's) seat record (``metrics/seats/record.py``) as a
        ``"probe"`` line. The index folds a probe line only as its model's newest outcome
        and probe (``outcomes``): probes are no seats, so they never count in stats or seating."""
        record = {"v": SCHEMA, "kind": "probe", "ts": utc_iso(time.time())}
        record.update((k, v) for k, v in rec.items() if k not in record)
        self._logs.append(record)
        return record

    def learn_window(self, alias: str, tokens: int) -> bool:
        """Record a context window an upstream stated, if lower than the one known; True if so."""
        if not isinstance(tokens, int) or tokens <= 0:
            raise errors.BadRequest(f"a context window is a positive integer, not {tokens!r}")
        with self._exclusive("window " + alias):
            with self._lock:
                known = self._index.window.get(alias)
            if known is not None and known <= tokens:
                return False
            self._write_held(
                {
                    "v": SCHEMA,
                    "kind": "window",
                    "ts": utc_iso(time.time()),
                    "alias": alias,
                    "tokens": tokens,
                }
            )
        return True

    def record_verdict(
        self,
        call: str,
        *,
        useful: bool,
        note: str = "",
        real: Iterable[str] = (),
        false: Iterable[str] = (),
        by: str = "local",
    ) -> dict:
        """Record whether a call's answer was useful; the last verdict wins, repeats are not
        written.

        Returns ``{"call", "written", "replaced", "verdict"}`` with the verdict now current.
        """
        if not isinstance(useful, bool):
            raise errors.BadRequest("'useful' must be true or false")
        real, false = [str(c) for c in real], [str(c) for c in false]
        note = "" if note is None else str(note)
        with self._exclusive("verdict " + call):
            seat = self._queries.seat(call)
            if seat is None:
                raise errors.NotFound(f"unknown call id '{call}'; {ID_HELP}")
            with self._lock:
                prev = self._index.verdicts.get(call)
            if prev is not None and bool(prev & 1) == useful:
                line = self._logs.evidence_at(prev >> V_OFFSET)
                if line is not None and [line.get(k) for k in ("note", "real", "false")] == [
                    note,
                    real,
                    false,
                ]:
                    return {
                        "call": call,
                        "written": False,
                        "replaced": False,
                        "verdict": verdict_view(line),
                    }
            record = {
                "v": SCHEMA,
                "kind": "verdict",
                "ts": utc_iso(time.time()),
                "call": call,
                "panel": seat.get("panel"),
                "alias": seat.get("alias"),
                "shape": seat.get("shape"),
                "collection": seat.get("collection"),
                "useful": useful,
                "note": note,
                "real": real,
                "false": false,
                "by": by,
            }
            self._write_held(record)
        return {
            "call": call,
            "written": True,
            "replaced": prev is not None,
            "verdict": verdict_view(record),
        }

    @contextmanager
    def _exclusive(self, key: str):
        """Hold off every other decision on ``key`` with the index caught up: decide, then
        ``_write_held``."""
        with self._decide:
            with self._logs.exclusive(key):
                with self._lock:
                    self._follow(force=True)
                yield

    def _write_held(self, record: dict) -> None:
        """Write one decision inside ``_exclusive``."""
        self._logs.write_held(record)

    def close(self) -> None:
        """Write the snapshot (if anything new was folded) and close the files."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            try:
                self._follow()
            except errors.DatabaseUnreachable:
                pass  # nothing more can be read; what was folded is saved below
            unsaved = self._unsaved
        if unsaved and self._logs.snapshots:
            self._write_snapshot()
        self._logs.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _needs_names(seat: dict, what: str) -> None:
    """A seat's call, alias and shape: what the index files it under."""
    for field in ("call", "alias", "shape"):
        if not isinstance(seat.get(field), str) or not seat[field]:
            raise errors.BadRequest(f"a seat {what} needs '{field}' (a non-empty string)")
