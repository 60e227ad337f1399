"""How the search index (``search.py``) takes in log lines: a calls.jsonl line becomes a row of
``panels`` (its start, collection, key, whether a seat failed, whether the caller left, its
answered seats and how many still owe a verdict), a row of ``seats`` per seat, a row of the
text table (prompt; answers) and its block's start span; an evidence line of a verdict, a
delivery, an abandonment or a seating that awaits delivery updates what a panel owes.

Invariants: everything runs in the caller's transaction (``Fold`` never commits); the fold is
order-free between the two logs (evidence about a panel not yet folded is kept, and counted
when its line comes); only whole lines are read, up to the last newline found before reading;
evidence lines of other kinds are passed over without being parsed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.store import jsonl

MAX_TEXT = 1 << 20  # characters of a prompt (and of the answers) made searchable
BLOCK_BITS = 10  # panels of a block whose start times are kept (1024)
CHUNK = 500  # panels inserted per statement batch
BLOCK = 1 << 20  # bytes of evidence.jsonl scanned at a time
FAILED = frozenset({"error", "empty"})
ANSWERED = frozenset({"ok", "tool_calls"})
_EVIDENCE = re.compile(rb'"kind":\s*"(verdict|delivered|abandoned|seated)"')


class Fold:
    """One batch's folding of log lines into the tables (in the caller's transaction)."""

    def __init__(self, db):
        self.db = db
        self.panels = 0

    def calls(
        self, path: Path, offset: int, limit: int | None, end: int | None = None
    ) -> tuple[int, bool]:
        """Fold calls.jsonl lines from ``offset`` (those that start before ``end``, if given);
        returns (the offset reached, whether that is its last whole line)."""
        records: list[tuple[int, dict]] = []
        lines = jsonl.lines(path, offset)
        done = True
        try:
            for start, line in lines:
                if end is not None and start >= end:
                    done = False
                    break
                offset = start + len(line)
                record = jsonl.parse_line(line)
                seq = panel_seq(record.get("panel")) if record is not None else None
                if seq is not None and record is not None:
                    records.append((seq, record))
                if limit is not None and len(records) >= limit:
                    done = False
                    break
        finally:
            lines.close()
        for i in range(0, len(records), CHUNK):
            self._panels(records[i : i + CHUNK])
        return offset, done or _at_end(path, offset)

    def panel_records(self, records: list[tuple[int, dict]]) -> None:
        """Fold panels given as ``(seq, record)`` (from the database instead of calls.jsonl)."""
        for i in range(0, len(records), CHUNK):
            self._panels(records[i : i + CHUNK])

    def evidence_record(self, record: dict) -> None:
        """Fold one evidence record (from the database); kinds that do not matter here are
        passed over."""
        if record.get("kind") in ("verdict", "delivered", "abandoned", "seated"):
            self._evidence(record)

    def _panels(self, records: list[tuple[int, dict]]) -> None:
        """Insert a chunk of panels, with what evidence said of them before they came."""
        db = self.db
        seqs = [seq for seq, _ in records]
        marks = ",".join("?" * len(seqs))
        held = {r[0] for r in db.execute(f"SELECT seq FROM panels WHERE seq IN ({marks})", seqs)}
        judged: dict[int, set[str]] = {}
        for seq, label in db.execute(f"SELECT seq, label FROM judged WHERE seq IN ({marks})", seqs):
            judged.setdefault(seq, set()).add(label)
        delivery = {
            r[0]: r[1:]
            for r in db.execute(
                f"SELECT seq, awaits, delivered, abandoned FROM delivery WHERE seq IN ({marks})",
                seqs,
            )
        }
        rows, seat_rows, texts = [], [], []
        for seq, record in records:
            if seq in held:
                continue  # the same panel twice (a hand-copied line): counted once
            held.add(seq)
            row, seats, text = _panel_rows(
                seq, record, judged.get(seq, ()), delivery.get(seq, (0, 0, 0))
            )
            rows.append(row)
            seat_rows += seats
            texts.append(text)
        db.executemany(
            "INSERT INTO panels(seq, panel, started, collection, key, failed, "
            "abandoned, answered, owed, owes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        db.executemany(
            "INSERT OR IGNORE INTO seats(alias, seq, label, status, seconds, failed) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            seat_rows,
        )
        db.executemany("INSERT INTO panel_text(rowid, prompt, answers) VALUES (?, ?, ?)", texts)
        spans: dict[int, list[float]] = {}
        for row in rows:
            if row[2] is not None:
                span = spans.setdefault(row[0] >> BLOCK_BITS, [row[2], row[2]])
                span[0], span[1] = min(span[0], row[2]), max(span[1], row[2])
        db.executemany(
            "INSERT INTO blocks(block, lo, hi) VALUES (?, ?, ?) ON CONFLICT(block) "
            "DO UPDATE SET lo = min(lo, excluded.lo), hi = max(hi, excluded.hi)",
            [(block, lo, hi) for block, (lo, hi) in spans.items()],
        )
        self.panels += len(rows)

    def evidence(self, path: Path, offset: int, limit: int | None) -> tuple[int, bool]:
        """Fold the evidence lines that matter here (verdicts, deliveries, abandonments and
        seatings that await delivery) from ``offset``, a block of whole lines at a time: every
        other line is passed over unparsed. Returns (offset reached, whether at the end)."""
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            return offset, True
        with f:
            fd = f.fileno()
            # only up to the last newline found first: what follows may be cut and rewritten
            end = jsonl.complete_end(fd, os.fstat(fd).st_size, offset)
            first = offset
            while offset < end:
                if limit is not None and offset - first >= limit:
                    return offset, False
                block = os.pread(fd, min(BLOCK, end - offset), offset)
                while not block.endswith(b"\n") and b"\n" not in block:
                    block += os.pread(
                        fd, min(BLOCK, end - offset - len(block)), offset + len(block)
                    )  # a line longer than a block
                block = block[: block.rfind(b"\n") + 1]
                self._evidence_block(block)
                offset += len(block)
        return offset, True

    def _evidence_block(self, block: bytes) -> None:
        # inside a JSON string a quote is escaped, so only a record's own kind matches
        for m in _EVIDENCE.finditer(block):
            start = block.rfind(b"\n", 0, m.start()) + 1
            end = block.find(b"\n", m.end()) + 1
            line = block[start:end]
            if m.group(1) == b"seated" and b'"awaits_delivery"' not in line:
                continue
            record = jsonl.parse_line(line)
            if record is not None and record.get("kind") == m.group(1).decode():
                self._evidence(record)

    def _evidence(self, record: dict) -> None:
        kind = record.get("kind", "")
        db = self.db
        if kind == "verdict":
            call = record.get("call")
            if not isinstance(call, str):
                return
            panel, _, label = call.partition(".")
            seq = panel_seq(panel)
            if seq is None or not label:
                return
            if (
                db.execute(
                    "INSERT OR IGNORE INTO judged(seq, label) VALUES (?, ?)", (seq, label)
                ).rowcount
                != 1
            ):
                return  # judged before: a replacing verdict changes nothing here
            row = db.execute("SELECT answered FROM panels WHERE seq = ?", (seq,)).fetchone()
            if row is not None and label in row[0].split():
                db.execute("UPDATE panels SET owed = owed - 1 WHERE seq = ?", (seq,))
            return
        seq = panel_seq(record.get("panel"))
        if seq is None or (kind == "seated" and record.get("awaits_delivery") is not True):
            return
        column = {"delivered": "delivered", "abandoned": "abandoned", "seated": "awaits"}[kind]
        db.execute(
            f"INSERT INTO delivery(seq, {column}) VALUES (?, 1) "
            f"ON CONFLICT(seq) DO UPDATE SET {column} = 1",
            (seq,),
        )
        db.execute(
            "UPDATE panels SET owes = (SELECT d.delivered OR NOT (d.awaits OR d.abandoned "
            "OR panels.abandoned) FROM delivery d WHERE d.seq = panels.seq) "
            "WHERE seq = ?",
            (seq,),
        )


def _panel_rows(seq: int, record: dict, judged, delivery) -> tuple[tuple, list, tuple]:
    """The panels row, the seats rows and the text row of one calls.jsonl record."""
    panel = record["panel"]
    seats = (
        [s for s in record.get("seats") or () if isinstance(s, dict)]
        if isinstance(record.get("seats"), list)
        else []
    )
    if isinstance(record.get("merger"), dict):
        seats.append(record["merger"])
    answered, mine, answers, failed = [], [], [], False
    for s in seats:
        call, alias, status = s.get("call"), s.get("alias"), s.get("status")
        if not isinstance(call, str) or not call.startswith(panel + "."):
            continue
        label = call[len(panel) + 1 :]
        is_failed = status in FAILED
        failed = failed or is_failed
        if status in ANSWERED:
            answered.append(label)
        if isinstance(alias, str) and alias:
            seconds = s.get("seconds")
            mine.append(
                (
                    alias,
                    seq,
                    label,
                    status if isinstance(status, str) else None,
                    seconds if isinstance(seconds, (int, float)) else None,
                    int(is_failed),
                )
            )
        answer = s.get("answer")
        if isinstance(answer, str) and answer:
            answers.append(answer[:MAX_TEXT])
    owed = sum(1 for label in answered if label not in judged)
    abandoned = record.get("abandoned") is True
    awaits, delivered, left = delivery
    owes = int(bool(delivered) or not (awaits or left or abandoned))
    started = record.get("started")
    prompt = record.get("prompt")
    return (
        (
            seq,
            panel,
            started if isinstance(started, (int, float)) else None,
            _text(record.get("collection")),
            _text(record.get("key")),
            int(failed),
            int(abandoned),
            " ".join(answered),
            owed,
            owes,
        ),
        mine,
        (seq, prompt[:MAX_TEXT] if isinstance(prompt, str) else "", "\n".join(answers)[:MAX_TEXT]),
    )


def line_start(path: Path, at: int, floor: int, ceiling: int) -> int:
    """The first line start after ``at`` and before ``ceiling`` (``floor`` and ``ceiling``
    are line starts, ``floor <= at``); looks further back, down to ``floor``, while the lines
    there are longer than the span between. Used to cut a log's tail into windows of whole
    lines that are indexed newest first."""
    with open(path, "rb") as f:
        fd = f.fileno()
        while at > floor:
            data = os.pread(fd, ceiling - at + 1, at - 1)
            i = data.find(b"\n")
            if 0 <= i and at + i < ceiling:
                return at + i
            at = max(floor, at - max(1, ceiling - at))  # one line fills the span: go back
    return floor


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _at_end(path: Path, offset: int) -> bool:
    """Whether no whole line follows ``offset`` (a ``stat``, then at most one short read)."""
    if jsonl.stamp(path)[0] <= offset:
        return True
    lines = jsonl.lines(path, offset)
    try:
        return next(lines, None) is None
    finally:
        lines.close()
