"""Config files kept as versioned rows in PostgreSQL (``ConfigMirror``), so that every instance
on one database serves the same roster, collections, keys, grades and limits.

Each instance keeps reading its own config files (``configfile``: nothing that reads them
changes); the mirror carries edits between the files and the ``config`` table
(``pgschema``): an edit of a file, by any means (the dashboard, the command line, a hand edit),
is pushed as the name's next version, and a version pushed by another instance is written into
the file, woken by ``NOTIFY`` on ``pgschema.CONFIG_CHANNEL``.

Invariants:

* The highest version of a name is current; versions are only added. A push inserts
  ``version + 1`` of the version the file was last in step with, so of two instances editing
  the same file at once exactly one push lands. The other merges its edit with the version that
  landed (``configmerge``: three-way, from the version both started from) and pushes the
  result; only an edit of the very value the other changed cannot be merged, and that one is
  kept beside the file (``NAME.conflict-<time>.json``) and named on stderr, never dropped in
  silence. A file may bring its own merge (``merges``): keys.json's makes a revocation final
  in every merge (``server.keys.merge``).
* A file is written only under the lock ``configfile.update`` takes, and replaced whole
  (``configfile.write_atomic``), so an edit in progress is never overwritten half-way; a file
  that does not parse (a hand edit under way) is not pushed until it does.
* The version each file was last in step with is kept in ``config/.mirror.json``, so at start
  an edit made while the instance was stopped, or could not reach the database, is told from
  an old copy: it is merged and pushed, never overwritten. An unedited file takes the
  database's version; so does the file of an instance joining (no such record), except where
  its merge needs no base (keys.json, whose keys are never deleted, only revoked).
* A file deleted on one instance is written back from the database's version: deleting is no
  edit that could reach the others (they would all lose the file).
* An edit through the dashboard (``editing``) is made under the mirror's lock on a file just
  brought in step, and pushed before it is answered: it lands, is merged with what landed
  first, or is undone and refused (``Conflict``, 409) when it changed the very value another
  instance changed; with the database out of reach it is not made at all (503). So an edit
  answered 200 is never set aside later.
* A hand edit saved from a stale buffer (content nearer an older version than the one the file
  held) is merged from that older version, so it drops no other instance's edit; when it cannot
  be merged, or nothing of it would be left, it is set aside as a conflict file, which
  ``/ready`` and the dashboard's alerts name (``conflicts``) until someone removes it. An edit
  made by a tool (``configfile.update``, which logs the digest of what it wrote) read the file
  under its lock and is never stale.
* Every line of ``changes.jsonl`` is copied into ``config_changes`` (at least once; the offset
  reached is kept in ``.mirror.json``), so the change history holds every instance's edits.
* Unreachable database: the files keep serving as they are; the mirror retries and catches up
  (in both directions) once it is back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

from panelist.metrics import errors
from panelist.metrics.store import configfile, configmerge, jsonl, jsonwire, pgschema

NAMES = (
    "roster.json",
    "collections.json",
    "keys.json",
    "grades.json",
    "gateway.json",
    "budgets.json",
)
POLL = 0.5  # seconds between looks at the files' stamps (files send no notifications)
STATE = ".mirror.json"  # the versions the files were last in step with, kept for the next start
LOOKBACK = 20  # older versions a hand edit is compared with, to tell a stale buffer
CHANGES = "changes.jsonl"
CHANGES_BATCH = 256 * 1024  # bytes of changes.jsonl copied into the database per turn

_LATEST = (
    "SELECT DISTINCT ON (name) name, version, body FROM config "
    "WHERE name = ANY(%s) ORDER BY name, version DESC"
)


def _stamp(path: Path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _digest(doc) -> str:
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _by_tool(changes: Path, name: str, doc) -> bool:
    """Whether ``doc`` is what a tool last wrote into ``name`` (``configfile.update`` logs the
    digest of the document it wrote): such an edit read the file under its lock, never from a
    stale buffer."""
    for record in jsonl.backward(changes, within=64 * 1024):
        if record.get("file") == name:
            return record.get("digest") == configfile.version_of(doc)
    return False


def conflicts(folder: Path) -> list[str]:
    """The conflict files kept in a config folder (edits set aside), oldest first."""
    return sorted(p.name for p in Path(folder).glob("*.conflict-*.json"))


def _plain(base, ours, theirs):
    """The merge of a file without a policy of its own: three-way, and only from a known base
    (without one, an edit here cannot be told from an older copy)."""
    if base is None:
        raise configmerge.Clash(())
    return configmerge.merge(base, ours, theirs)


class ConfigMirror:
    """One instance's mirror of its config folder's ``names`` in the database ``db``;
    ``merges`` maps a name to its merge (``merge(base or None, ours, theirs)``, raising
    ``configmerge.Clash``) where a three-way merge from a known base is not all it needs."""

    def __init__(self, db, folder: Path, names=NAMES, merges=None):
        self.db = db
        self.folder = Path(folder)
        self.names = tuple(names)
        self._merges = dict(merges or {})
        self._base: dict[str, int] = {}  # name -> the version the file is in step with
        self._stamps: dict[str, tuple | None] = {}  # name -> the file's stamp at that time
        self._state_path = self.folder / STATE
        self._saved, changes_at, instance = self._load_state()  # as of the last stop
        # this folder's name in config_changes, and how far its changes.jsonl was copied there
        # (a folder mirrored for the first time starts at its end: `db import` copied the rest)
        self._instance = instance or uuid.uuid4().hex[:12]
        self._changes_at = changes_at if changes_at is not None else _size(self.folder / CHANGES)
        self._lock = threading.Lock()  # one sync at a time
        self._migrated = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._listener = db.listener(pgschema.CONFIG_CHANNEL, self._woken, self._woken)
        self._thread = threading.Thread(target=self._run, name="config-mirror", daemon=True)
        self.syncs = 0  # completed syncs (tests wait on it)
        self.synced_at: float | None = None  # monotonic time of the last completed sync

    def _woken(self, *_):
        self._wake.set()

    def start(self) -> "ConfigMirror":
        self._listener.start()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except errors.DatabaseUnreachable:
                pass  # the files serve as they are; the next turn tries again
            except Exception as exc:  # a bug must not stop the mirror for good
                print(f"panelist: config mirror: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._wake.wait(POLL)
            self._wake.clear()

    def sync(self) -> None:
        """One turn: push the files edited here, take the versions pushed elsewhere."""
        with self._lock:
            self._sync()

    def _sync(self) -> None:
        if not self._migrated:  # an instance started before its database: not made yet
            if self.db.run(pgschema.current, transaction=False) != pgschema.VERSION:
                pgschema.migrate(self.db)
            self._migrated = True
        latest = {
            name: (version, body)
            for name, version, body in self.db.execute(_LATEST, (list(self.names),))
        }
        for name in self.names:
            self._one(name, latest.get(name))
        self._copy_changes()
        self.syncs += 1
        self.synced_at = time.monotonic()

    @contextlib.contextmanager
    def editing(self):
        """An edit of the config files (the block) that lands in the database before it is
        answered: the files are brought in step first, the block edits them (through
        ``configfile.update``), and each file it changed is pushed, merged with what landed
        meanwhile, or undone and refused with ``Conflict`` when another instance changed the
        same value. ``DatabaseUnreachable`` before the block (nothing edited) or while pushing
        (the edit undone): the caller is told nothing was made."""
        with self._lock:
            self._sync()
            before = {name: _stamp(self.folder / name) for name in self.names}
            yield
            for name in self.names:
                if _stamp(self.folder / name) != before[name]:
                    self._publish(name, self.folder / name)
            try:
                self._copy_changes()
            except errors.DatabaseUnreachable:
                pass  # the edit is stored; its history line is copied at the next turn

    def _publish(self, name: str, path: Path) -> None:
        stamp = _stamp(path)
        doc = self._read(path)
        if doc is None:
            return  # removed or unparseable: no edit of ours does that; the next turn sees it
        base = self._base.get(name, 0)
        old = self._body(name, base)
        try:
            if self._insert(name, base + 1, doc):
                self._settle(name, base + 1, doc, stamp)
                return
            merge = self._merges.get(name, _plain)
            latest = self._latest(name)
            for _ in range(3):
                try:
                    merged = merge(old, doc, latest[1])
                except configmerge.Clash as clash:
                    self._undo(name, path, latest)
                    raise errors.Conflict(
                        f"{name}: {clash} was changed on another instance at the same time; "
                        "this edit was not made; reload and try again",
                        code="stale",
                    ) from None
                if merged == latest[1] or self._insert(name, latest[0] + 1, merged):
                    version = latest[0] if merged == latest[1] else latest[0] + 1
                    self._take(name, path, (version, merged), expect=stamp)
                    return
                latest = self._latest(name)
            self._undo(name, path, latest)
            raise errors.Conflict(
                f"{name} kept changing on other instances while this edit "
                "was saved; it was not made; reload and try again",
                code="stale",
            )
        except errors.DatabaseUnreachable:
            if old is not None:
                self._undo(name, path, (base, old))
            raise

    def _undo(self, name: str, path: Path, latest) -> None:
        """Put the file back to ``latest`` (an edit of it refused)."""
        self._take(name, path, latest, force=True)

    def _copy_changes(self) -> None:
        """Copy the lines ``changes.jsonl`` gained since the last turn into ``config_changes``
        (whole lines only; the offset moves only after they landed)."""
        path = self.folder / CHANGES
        size = _size(path)
        if size < self._changes_at:
            self._changes_at = 0  # a new file in its place
        if size == self._changes_at:
            return
        with open(path, "rb") as f:
            f.seek(self._changes_at)
            chunk = f.read(CHANGES_BATCH)
        end = chunk.rfind(b"\n")
        if end < 0:
            return  # a line still being written
        records = []
        for line in chunk[: end + 1].splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append({**record, "instance": self._instance})
        if records:
            self.db.execute(
                "INSERT INTO config_changes (record) "
                "SELECT value FROM jsonb_array_elements(%s::jsonb)",
                (jsonwire.dumps(records),),
                retry=False,
            )
        self._changes_at += end + 1
        self._save_state()

    def _one(self, name: str, latest) -> None:
        path = self.folder / name
        known = name in self._base
        stamp = _stamp(path)
        if known and stamp == self._stamps.get(name):
            # not edited here since it was in step: take what landed elsewhere, if anything
            if latest is not None and latest[0] > self._base[name]:
                self._take(name, path, latest)
            return
        if stamp is None:
            # deleted here (or never made): a file is removed by no edit a host could mean for
            # every other, so the database's version is written back
            if latest is not None:
                self._take(name, path, latest, force=True)
            return
        doc = self._read(path)
        if doc is None:
            if not known and latest is not None:
                self._take(name, path, latest)  # nothing here to keep
            return  # else not parseable yet: looked at again next turn
        if latest is not None and latest[1] == doc:
            self._settle(name, latest[0], doc, stamp)
            return
        if known:
            base = self._base[name]
            if latest is not None and not _by_tool(self.folder / CHANGES, name, doc):
                older = self._stale_base(name, doc, base)
                if older != base:  # saved from a buffer older than the file it replaced
                    self._merge(name, path, self._body(name, older), doc, latest, stamp, stale=True)
                    return
        else:
            started = self._start_base(name, doc, latest)
            if started is None:
                self._take(name, path, latest)
                return
            base = started
            if base < 0:  # edited here from a version this database does not hold
                self._aside(
                    name, path, doc, latest, "edited from a version this database does not hold"
                )
                return
        if latest is None or latest[0] == base:
            if self._insert(name, base + 1, doc):
                self._settle(name, base + 1, doc, stamp)
                return
            latest = self._latest(name)
        # edited here and, from the same version, elsewhere: both edits are merged
        self._merge(name, path, self._body(name, base), doc, latest, stamp)

    def _start_base(self, name: str, doc, latest) -> int | None:
        """At start, the version an edit of the file was made from: the version it was last in
        step with, when it was edited while this instance was stopped (or could not reach the
        database); 0 (merged with no base) when the file's merge allows that; None when the
        database's version is simply taken (an instance joining, an unedited file); -1 when
        it was edited from a version the database does not hold."""
        saved = self._saved.get(name)
        if saved is not None and saved["digest"] == _digest(doc):
            return None if latest is not None else 0  # unedited since it was in step
        if saved is not None and _digest(self._body(name, saved["version"])) == saved["digest"]:
            return saved["version"]
        if latest is None:
            return 0
        if name in self._merges:
            return 0
        # edited since it was in step with a version another database held (a restored or
        # replaced one): kept aside, never overwritten in silence (-1); joining: taken (None)
        return -1 if saved is not None else None

    def _stale_base(self, name: str, doc, base: int) -> int:
        """The version a hand edit was most likely made from: of the file's version ``base``
        and the ``LOOKBACK`` before it, the one ``doc`` differs from in the fewest values, the
        older on a tie: an edit of just the value a newer version changed is as near the one
        before, and merging from there calls it what it may be, a clash, instead of letting it
        undo that version in silence."""
        rows = self.db.execute(
            "SELECT version, body FROM config WHERE name = %s AND version <= %s "
            "AND version >= %s ORDER BY version DESC",
            (name, base, base - LOOKBACK),
        )
        best, fewest = base, None
        for version, body in rows:
            apart = configmerge.distance(body, doc)
            if fewest is None or apart <= fewest:
                best, fewest = version, apart
        return best

    def _merge(self, name: str, path: Path, base, doc, latest, stamp, stale: bool = False) -> None:
        merge = self._merges.get(name, _plain)
        for _ in range(3):
            try:
                merged = merge(base, doc, latest[1])
            except configmerge.Clash as clash:
                self._aside(name, path, doc, latest, str(clash))
                return
            if stale and merged == latest[1]:
                # nothing of the edit would be left (it only undid newer versions): kept aside
                self._aside(
                    name,
                    path,
                    doc,
                    latest,
                    "saved from an older version, and it only takes back later edits",
                )
                return
            if merged == latest[1] or self._insert(name, latest[0] + 1, merged):
                version = latest[0] if merged == latest[1] else latest[0] + 1
                self._take(name, path, (version, merged), expect=stamp)
                return
            latest = self._latest(name)  # another landed meanwhile: merge with it too
        self._aside(name, path, doc, latest, "it kept changing")

    def _aside(self, name: str, path: Path, doc, latest, where: str) -> None:
        """An edit here that cannot be merged: kept beside the file, named on stderr, and the
        database's version taken."""
        aside = path.with_name(f"{path.stem}.conflict-{time.strftime('%Y%m%dT%H%M%S')}.json")
        configfile.write_atomic(aside, doc)
        print(
            f"panelist: {name} was edited here and on another instance in the same place "
            f"({where}); that edit is kept, this instance's is in {aside}",
            file=sys.stderr,
        )
        if latest is not None:
            self._take(name, path, latest, force=True)

    def _insert(self, name: str, version: int, doc) -> bool:
        """Push ``doc`` as ``version`` of ``name``; False if that version landed first."""
        return bool(
            self.db.execute(
                "WITH put AS (INSERT INTO config (name, version, body) VALUES (%s, %s, "
                "%s::jsonb) ON CONFLICT DO NOTHING RETURNING version) "
                "SELECT version, pg_notify(%s, %s) FROM put",
                (name, version, jsonwire.dumps(doc), pgschema.CONFIG_CHANNEL, name),
                retry=False,
            )
        )

    def _latest(self, name: str):
        rows = self.db.execute(_LATEST, ([name],))
        return (rows[0][1], rows[0][2]) if rows else None

    def _body(self, name: str, version: int):
        if version <= 0:
            return None
        rows = self.db.execute(
            "SELECT body FROM config WHERE name = %s AND version = %s", (name, version)
        )
        return rows[0][0] if rows else None

    def _take(
        self, name: str, path: Path, latest, force: bool = False, expect: tuple | None = None
    ) -> None:
        """Write version ``latest`` into the file, unless it was edited meanwhile here (since
        it was in step, or since ``expect``, the stamp it had when read)."""
        version, body = latest
        with configfile.flocked(path.with_name(path.name + ".lock")):
            now = _stamp(path)
            if expect is not None and now != expect:
                return  # edited again just now: merged next turn
            if (
                not force
                and expect is None
                and name in self._base
                and now != self._stamps.get(name)
            ):
                return  # edited here just now: pushed (or merged) next turn
            if self._read(path) != body:
                configfile.write_atomic(path, body)
            self._settle(name, version, body, _stamp(path))

    def _settle(self, name: str, version: int, body, stamp) -> None:
        """The file is in step with ``version``: remembered here, and on disk for the next
        start (so an edit made while this instance is stopped is told from an old copy)."""
        self._base[name], self._stamps[name] = version, stamp
        saved = {"version": version, "digest": _digest(body)}
        if self._saved.get(name) != saved:
            self._saved[name] = saved
            self._save_state()

    def _save_state(self) -> None:
        configfile.write_atomic(
            self._state_path,
            {
                "v": 1,
                "in_step": self._saved,
                "changes_at": self._changes_at,
                "instance": self._instance,
            },
        )

    def _load_state(self) -> tuple[dict, int | None, str | None]:
        try:
            doc = json.loads(self._state_path.read_bytes())
        except (OSError, ValueError):
            return {}, None, None
        if not isinstance(doc, dict):
            return {}, None, None
        try:
            saved = {
                n: {"version": int(e["version"]), "digest": str(e["digest"])}
                for n, e in doc["in_step"].items()
                if n in self.names
            }
        except (KeyError, TypeError, AttributeError, ValueError):
            saved = {}
        at = doc.get("changes_at")
        instance = doc.get("instance")
        return (
            saved,
            at if isinstance(at, int) and at >= 0 else None,
            instance if isinstance(instance, str) and instance else None,
        )

    @staticmethod
    def _read(path: Path):
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self._listener.close()
