"""Snapshots of the ledger's index: ``index.json`` beside the logs, so a ledger opens without
replaying evidence.jsonl from its start.

A snapshot records the evidence file it covers (its inode and the byte offset folded up to) and
every map of the index (``index.py``), written in columns where a map is large (parsing them
makes far fewer objects at start). It is derived data: ``load`` refuses one that is missing,
unreadable, of another ``SNAPSHOT_VERSION``, of another file, or whose offset is past the file's
end or not at a line boundary, and the ledger then replays the log into an empty index.
Versions: 2 added the query aggregates and packed verdict entries, 3 delivery states and
history, 4 histograms twice as fine (``histogram``: eight buckets a doubling), the recent
windows (``usage``) and each model's outcomes (``outcomes``), 5 the pairwise outcomes of
verdicts on one panel (``pairs``), 6 the queue of owed calls in the order each became owed
(``owed``: their places in the recent columns; the counts are still derived), 7 each shape's
patterns of panel outcomes beside its pairs (``pairs``: what the ratings' intervals need; an
older snapshot has only the pairs, and the patterns of panels long gone cannot be rebuilt from
them, so it is replayed like any older one), 8 the recent windows per gateway key and for the
whole gateway (``scopes``: an older snapshot lacks them, and only a replay counts them). An older
snapshot is replayed, never converted: its histograms cannot be split into finer buckets, and
only a replay reads each seat's seconds again.

Invariants: ``load`` fills the index wholly or leaves it empty (reset), never half; what a
snapshot does not hold is derived on load (each panel's answered calls and the owed counts, from
the recent map); the file is replaced whole (``store.atomic``), readable by this user only, so
two writers each leave a valid snapshot and either may win.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from pathlib import Path

from panelist.metrics.ledger.histogram import HIST_BUCKETS
from panelist.metrics.ledger.index import (
    ANSWERED,
    AWAITING,
    DELIVERED,
    ABANDONED,
    Index,
    Stats,
    intern,
)
from panelist.metrics.ledger.outcomes import Outcomes
from panelist.metrics.ledger import pairsfile
from panelist.metrics.ledger.pairs import Pairs
from panelist.metrics.ledger.usage import Usage
from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.store.jsonl import utc_iso

SNAPSHOT_VERSION = 8  # see the module docstring
_STATE_CODES = (-1, AWAITING, DELIVERED, ABANDONED)  # -1 stands for None in the snapshot


def capture(index: Index) -> dict:
    """Copies of the index, cheap enough to take under the ledger's lock (which the caller
    holds); encoding them, the slow part, happens after the lock is released (``save``)."""
    return {
        "ino": index.ino,
        "offset": index.offset,
        "past": sorted(index.past),
        "last_seated": dict(index.last_seated),
        "turns": dict(index.turns),
        "turn_of": dict(index.turn_of),
        "counts": {k: tuple(v) for k, v in index.counts.items()},
        "cooling_until": dict(index.cooling),
        "window": dict(index.window),
        "verdicts": dict(index.verdicts),
        "recent": list(index.recent.items()),
        "stats": {k: v.copy() for k, v in index.stats.items()},
        "alias_stats": {k: v.copy() for k, v in index.alias_stats.items()},
        "collections": {k: list(v) for k, v in index.collections.items()},
        "days": {d: dict(v) for d, v in index.days.items()},
        "top_day": index.top_day,
        "seatings": list(index.seatings.items()),
        "top_seating": index.top_seating,
        "key_last": dict(index.key_last),
        # a panel's calls are rebuilt from the recent map when the snapshot is loaded
        "panels": [(p, listed[0]) for p, listed in index.panels.items()],
        "tool_owner": list(index.tool_owner.items()),
        "delivered": list(index.delivered.items()),
        "usage": index.usage.copy(),
        "scopes": index.scopes.copy(),
        "outcomes": index.outcomes.copy(),
        "pairs": index.pairs.copy(),
        "owed": list(index.owed_calls),
    }


def encode(state: dict) -> bytes:
    """The snapshot file's bytes for a ``capture``."""
    recent = state["recent"]
    tag_of: dict[tuple, int] = {}  # (status, key) -> a small int
    data = {
        "v": SNAPSHOT_VERSION,
        "ts": utc_iso(time.time()),
        "ino": state["ino"],
        "offset": state["offset"],
        "past": state["past"],
        "last_seated": [[a, s, t] for (a, s), t in state["last_seated"].items()],
        "turns": {
            "shapes": state["turns"],
            "seats": [[a, s, n] for (a, s), n in state["turn_of"].items()],
        },
        "counts": [[a, s, u, n] for (a, s), (u, n) in state["counts"].items()],
        "cooling_until": state["cooling_until"],
        "window": state["window"],
        # columns, not a list per entry: parsing them makes far fewer objects at start
        "verdicts": {"calls": list(state["verdicts"]), "values": list(state["verdicts"].values())},
        "recent": {
            "calls": [c for c, _ in recent],
            "offsets": [v[0] for _, v in recent],
            "tags": [tag_of.setdefault(v[1:], len(tag_of)) for _, v in recent],
            "tag_table": list(tag_of),
        },
        "stats": {
            "shapes": [[a, s, *st.encode()] for (a, s), st in state["stats"].items()],
            "aliases": [[a, *st.encode()] for a, st in state["alias_stats"].items()],
        },
        "collections": state["collections"],
        "days": {"top": state["top_day"], "seats": [[d, per] for d, per in state["days"].items()]},
        "seatings": {
            "top": state["top_seating"],
            "panels": [x for pair in state["seatings"] for x in pair],
        },
        "key_last": state["key_last"],
        "panels": {
            "ids": [p for p, _ in state["panels"]],
            "states": [-1 if s is None else s for _, s in state["panels"]],
        },
        "tool_owner": {
            "ids": [t for t, _ in state["tool_owner"]],
            "panels": [o[0] for _, o in state["tool_owner"]],
            "aliases": [o[1] for _, o in state["tool_owner"]],
        },
        "delivered": {
            "hashes": [h for h, _ in state["delivered"]],
            "panels": [p for _, p in state["delivered"]],
        },
        "usage": state["usage"].encode(),
        "scopes": state["scopes"].encode(),
        "outcomes": state["outcomes"].encode(),
        "pairs": state["pairs"].encode(),
        # the queue's order, as places in the recent columns (the entries themselves are derived)
        "owed": _places(recent, state["owed"]),
    }
    return jsonwire.encode(data, separators=(",", ":"))


def _places(recent: list, calls: list) -> list[int]:
    """Where each of ``calls`` stands in the recent map's columns."""
    place = {call: i for i, (call, _) in enumerate(recent)}
    return [place[c] for c in calls if c in place]


def save(path: Path, state: dict) -> None:
    """Write a ``capture`` to ``path``, synced, this user's only; and its pairs beside it
    (``pairsfile``), for readers that need only those."""
    atomic.write(path, encode(state), mode=0o600)
    pairsfile.save(path.with_name(pairsfile.NAME), state["ino"], state["offset"], state["pairs"])


def load(path: Path, index: Index, evidence_path: Path, evidence_fd: int) -> bool:
    """Fill ``index`` from the snapshot at ``path`` if it is one of the evidence file at
    ``evidence_path`` (``evidence_fd``: a descriptor open on it); False, with the index left
    empty, if not."""
    try:
        st = os.stat(evidence_path)
    except OSError:
        return False

    def covers(ino, offset) -> bool:
        if ino != st.st_ino or not 0 <= offset <= st.st_size:
            return False
        # at a line boundary, or not a snapshot of this file
        return not offset or os.pread(evidence_fd, 1, offset - 1) == b"\n"

    return load_if(path, index, covers)


def load_if(path: Path, index: Index, covers) -> bool:
    """Fill ``index`` from the snapshot at ``path`` if ``covers(ino, offset)`` says it is one
    of the evidence the caller follows (for a database: its identity and an id it holds);
    False, with the index left empty, if not."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    try:
        ino, offset = data["ino"], data["offset"]
        if (
            data.get("v") != SNAPSHOT_VERSION
            or not isinstance(offset, int)
            or not covers(ino, offset)
        ):
            return False
        index.reset(ino, offset)
        index.past = {(int(x), int(i)) for x, i in data.get("past", ())}
        for a, s, t in data["last_seated"]:
            index.last_seated[(intern(a), intern(s))] = float(t)
        # a snapshot without turns predates "seated" lines: KeyError, so it is replayed
        index.turns = {intern(s): int(n) for s, n in data["turns"]["shapes"].items()}
        for a, s, n in data["turns"]["seats"]:
            index.turn_of[(intern(a), intern(s))] = int(n)
        for a, s, u, n in data["counts"]:
            index.counts[(intern(a), intern(s))] = [int(u), int(n)]
        index.cooling = {intern(a): float(t) for a, t in data["cooling_until"].items()}
        index.window = {intern(a): int(n) for a, n in data["window"].items()}
        verdicts, recent = data["verdicts"], data["recent"]
        if len(verdicts["calls"]) != len(verdicts["values"]) or not (
            len(recent["calls"]) == len(recent["offsets"]) == len(recent["tags"])
        ):
            raise ValueError("columns of unequal length")
        index.verdicts = dict(zip(verdicts["calls"], verdicts["values"]))
        tags = [(intern(st_), intern(k)) for st_, k in recent["tag_table"]]
        index.recent = OrderedDict(
            zip(
                recent["calls"],
                [(off, *tags[t]) for off, t in zip(recent["offsets"], recent["tags"])],
            )
        )
        while len(index.recent) > index.recent_calls:
            index.recent.popitem(last=False)
        stats = data["stats"]
        index.stats = {
            (intern(a), intern(s_)): Stats.decode(row) for a, s_, *row in stats["shapes"]
        }
        index.alias_stats = {intern(a): Stats.decode(row) for a, *row in stats["aliases"]}
        index.collections = {
            intern(c): [int(x) for x in row] for c, row in data["collections"].items()
        }
        for row in index.collections.values():
            if len(row) != 4:
                raise ValueError("a collection row is not [panels, seats, useful, not]")
        index.key_last = {intern(k): float(t) for k, t in data["key_last"].items()}
        days = data["days"]
        index.top_day = int(days["top"])
        index.days = {
            int(d): {intern(a): int(n) for a, n in per.items()} for d, per in days["seats"]
        }
        seatings = data["seatings"]
        index.top_seating = int(seatings["top"])
        flat = seatings["panels"]
        index.seatings = OrderedDict(
            (int(q), float(t)) for q, t in zip(flat[::2], flat[1::2], strict=True)
        )
        _load_history(index, data)
        index.usage = Usage.decode(data["usage"], HIST_BUCKETS, intern)
        index.scopes = Usage.decode(data["scopes"], HIST_BUCKETS, intern)
        index.outcomes = Outcomes.decode(data["outcomes"], intern)
        index.pairs = Pairs.decode(data["pairs"], index.panels_kept, intern)
        # the owed counts are derived from the recent map and the verdicts: recount them
        calls = recent["calls"]
        index.recount_owed([calls[i] for i in data["owed"]])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        index.reset(None)
        return False
    return True


def _load_history(index: Index, data: dict) -> None:
    """The delivery states, tool call owners and delivered replies of a snapshot; each
    panel's answered calls come back from the recent map."""
    panels = data["panels"]
    ids, states = panels["ids"], panels["states"]
    if len(ids) != len(states) or not all(s in _STATE_CODES for s in states):
        raise ValueError("bad delivery states")
    index.panels = OrderedDict((str(p), [None if s == -1 else s]) for p, s in zip(ids, states))
    for call, entry in index.recent.items():
        if entry[1] in ANSWERED:
            panel = call.partition(".")[0]
            listed = index.panels.get(panel)
            if listed is None:
                listed = index.panels[panel] = [None]
            listed.append(call)
    while len(index.panels) > index.panels_kept:  # nothing is counted yet: no _owe
        for call in index.panels.popitem(last=False)[1][1:]:
            index.recent.pop(call, None)
    for panel in [
        p
        for p, listed in index.panels.items()
        if len(listed) == 1 and (listed[0] is None or listed[0] == DELIVERED)
    ]:
        del index.panels[panel]  # as _unlist forgets them
    index.apart = {
        p: None
        for p, listed in index.panels.items()
        if listed[0] == AWAITING or listed[0] == ABANDONED
    }
    owners = data["tool_owner"]
    if not len(owners["ids"]) == len(owners["panels"]) == len(owners["aliases"]):
        raise ValueError("columns of unequal length")
    index.tool_owner = OrderedDict(
        (t, (p, None if a is None else intern(a)))
        for t, p, a in zip(owners["ids"], owners["panels"], owners["aliases"])
    )
    delivered = data["delivered"]
    index.delivered = OrderedDict(zip(delivered["hashes"], delivered["panels"], strict=True))
    for table in (index.tool_owner, index.delivered):
        while len(table) > index.recent_history:
            table.popitem(last=False)
