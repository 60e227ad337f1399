"""The gateway's ledger: panels, seats, verdicts, cooldowns and learned windows, kept in JSONL, with
an in-memory index that follows the logs' tails so that every lookup costs the same at any log size.

Files in ``runs_dir``::

    calls.jsonl     one line per finished panel: the record given to ``record_panel`` (+ v, ts)
    evidence.jsonl  one line per seat answer, verdict, cooldown and learned window, and one
                    ``"seated"`` line per panel when it is seated (every alias it seated, before
                    any seat answers); every line carries ``"v": 1``, ``"kind"`` and ``"ts"``
                    (UTC ISO, ms, ``Z``)
    panels.idx      8 bytes (little-endian, unsigned) per panel seq: 0 while the panel is in
                    flight, then 1 + the byte offset of its calls.jsonl line. Its length is the
                    panel counter: ``new_panel`` appends a slot under ``flock``. Derived: when
                    it is missing (or empty) beside non-empty logs it is rebuilt from them, its
                    counter set past the highest seq either log names plus ``ID_MARGIN``.
    index.json      snapshot of the index below, for the evidence.jsonl inode and byte offset it
                    covers; derived, so when missing, unreadable or stale it is rebuilt by replay

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
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from panelist.metrics import errors, jsonl, jsonwire
from panelist.metrics.jsonl import SCHEMA, Appender, Tail

SLOT = 8                  # bytes per panels.idx slot
MAX_SEQ_DIGITS = 15       # a seq beyond this is no panel of ours (and would overflow pread)
# slots skipped when panels.idx is rebuilt: more than the panels any process can have in flight,
# whose ids the logs cannot show yet
ID_MARGIN = 4096
SNAPSHOT_VERSION = 1
BLOCK = 64 * 1024         # read size when walking calls.jsonl backwards
_PANEL_ID = re.compile(r"p(\d{8})-(\d{1,%d})" % MAX_SEQ_DIGITS)
_LOGGED_PANEL = re.compile(rb'"panel":"p\d{8}-(\d{1,%d})"' % MAX_SEQ_DIGITS)
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


class Ledger:
    """One process's view of a runs folder; many threads and processes may share the folder."""

    def __init__(self, runs_dir: Path, *, snapshot_every: int = 50_000,
                 recent_calls: int = 100_000):
        self.dir = Path(runs_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.calls_path = self.dir / "calls.jsonl"
        self.evidence_path = self.dir / "evidence.jsonl"
        self.idx_path = self.dir / "panels.idx"
        self.snapshot_path = self.dir / "index.json"
        self.snapshot_every = max(1, int(snapshot_every))
        self.recent_calls = max(0, int(recent_calls))

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
        # call -> offset of its current verdict line << 1 | useful. One int per judged call:
        # the note and claims are compared on the line itself, and the alias and shape a
        # replacement must uncount are the seat's, which the replacing record carries too.
        self._verdicts: dict[str, int] = {}
        # call -> (offset of the seat line, status, key); oldest first, at most recent_calls
        self._recent: OrderedDict[str, tuple] = OrderedDict()
        self._unsaved = 0  # records folded since the last snapshot

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
        n = 0
        for offset, record in self._tail.read():
            self._fold(offset, record)
            n += 1
        self._unsaved += n
        return n

    def _fold(self, offset: int, rec: dict) -> None:
        kind = rec.get("kind")
        try:
            if kind == "seat":
                self._fold_seat(offset, rec)
            elif kind == "seated":
                self._fold_seated(rec)
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
        recent = self._recent
        if call in recent:
            recent.move_to_end(call)
        recent[call] = (offset, _intern(rec.get("status")), _intern(rec.get("key")))
        while len(recent) > self.recent_calls:
            recent.popitem(last=False)

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

    def _fold_verdict(self, offset: int, rec: dict) -> None:
        call, alias, shape = rec["call"], _intern(rec["alias"]), _intern(rec["shape"])
        useful = bool(rec["useful"])
        prev = self._verdicts.get(call)
        if prev is not None:
            self._count(alias, shape, bool(prev & 1), -1)
        self._count(alias, shape, useful, +1)
        self._verdicts[call] = offset << 1 | useful

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
                "verdicts": dict(self._verdicts), "recent": list(self._recent.items())}

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
        except (KeyError, TypeError, ValueError, AttributeError):
            self._reset(None)
            return False
        return True

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
        seat["verdict"] = self._verdict_at(current >> 1) if current is not None else None
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
        """Recent seats that answered ("ok") and have no verdict yet, newest first."""
        self.refresh()
        offsets = []
        with self._lock:
            for call, (offset, status, owner) in reversed(self._recent.items()):
                if len(offsets) >= limit:
                    break
                if status == "ok" and call not in self._verdicts and (key is None or owner == key):
                    offsets.append(offset)
        return [r for r in _read_lines(self.evidence_path, offsets) if r is not None]

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
                for field in ("shape", "key"):
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

    def record_seated(self, panel: str, shape: str, aliases: Iterable[str], seated: float) -> None:
        """Append one ``"seated"`` line: the panel took a seat for each of ``aliases`` at
        ``seated`` (epoch seconds, the panel's start). Written when the panel is seated, so the
        next seating here (after its tail refresh) and in any other process sees it at once."""
        aliases = list(aliases)
        if not isinstance(shape, str) or not shape or not all(
                isinstance(a, str) and a for a in aliases):
            raise errors.BadRequest("a seating needs a shape and aliases (non-empty strings)")
        self._evidence.append({"v": SCHEMA, "kind": "seated", "ts": utc_iso(time.time()),
                               "panel": panel, "shape": shape, "seated": seated,
                               "aliases": aliases})

    def record_seats(self, recs: list[dict], now: float | None = None) -> None:
        """Append many seat records in one locked write (bulk loaders)."""
        if recs:
            self._evidence.append(*(self.seat_record(r, now) for r in recs))

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
        """Append a finished panel to calls.jsonl and point its panels.idx slot at the line."""
        seq, record = self.panel_record(rec)
        offset = self._calls.append(record)
        with self._idx_lock:
            os.pwrite(self._current_idx(), (offset + 1).to_bytes(SLOT, "little"), seq * SLOT)

    def record_panels(self, recs: list[dict], now: float | None = None) -> None:
        """Append many finished panels in one locked write (bulk loaders); same lines."""
        if not recs:
            return
        pairs = [self.panel_record(r, now) for r in recs]
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
                line = jsonl.read_line(self.evidence_path, prev >> 1)
                if line is not None and [line.get(k) for k in ("note", "real", "false")] \
                        == [note, real, false]:
                    return {"call": call, "written": False, "replaced": False,
                            "verdict": _verdict_view(line)}
            record = {"v": SCHEMA, "kind": "verdict", "ts": utc_iso(time.time()), "call": call,
                      "panel": seat.get("panel"), "alias": seat.get("alias"),
                      "shape": seat.get("shape"), "useful": useful, "note": note,
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
