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
* Unreachable database: the files keep serving as they are; the mirror retries and catches up
  (in both directions) once it is back.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from panelist.metrics import errors
from panelist.metrics.store import configfile, configmerge, jsonwire, pgschema

NAMES = ("roster.json", "collections.json", "keys.json", "grades.json", "gateway.json",
         "budgets.json")
POLL = 0.5   # seconds between looks at the files' stamps (files send no notifications)
STATE = ".mirror.json"   # the versions the files were last in step with, kept for the next start

_LATEST = ("SELECT DISTINCT ON (name) name, version, body FROM config "
           "WHERE name = ANY(%s) ORDER BY name, version DESC")


def _stamp(path: Path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _digest(doc) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


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
        self._base: dict[str, int] = {}        # name -> the version the file is in step with
        self._stamps: dict[str, tuple | None] = {}   # name -> the file's stamp at that time
        self._state_path = self.folder / STATE
        self._saved = self._load_state()       # name -> {version, digest}, as of the last stop
        self._lock = threading.Lock()          # one sync at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._listener = db.listener(pgschema.CONFIG_CHANNEL, self._woken, self._woken)
        self._thread = threading.Thread(target=self._run, name="config-mirror", daemon=True)
        self.syncs = 0                          # completed syncs (tests wait on it)
        self.synced_at: float | None = None     # monotonic time of the last completed sync

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
                pass   # the files serve as they are; the next turn tries again
            except Exception as exc:   # a bug must not stop the mirror for good
                print(f"panelist: config mirror: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._wake.wait(POLL)
            self._wake.clear()

    def sync(self) -> None:
        """One turn: push the files edited here, take the versions pushed elsewhere."""
        with self._lock:
            latest = {name: (version, body) for name, version, body
                      in self.db.execute(_LATEST, (list(self.names),))}
            for name in self.names:
                self._one(name, latest.get(name))
            self.syncs += 1
            self.synced_at = time.monotonic()

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
                self._take(name, path, latest)   # nothing here to keep
            return   # else not parseable yet: looked at again next turn
        if latest is not None and latest[1] == doc:
            self._settle(name, latest[0], doc, stamp)
            return
        if known:
            base = self._base[name]
        else:
            base = self._start_base(name, doc, latest)
            if base is None:
                self._take(name, path, latest)
                return
            if base < 0:   # edited here from a version this database does not hold
                self._aside(name, path, doc, latest, "edited from a version this database "
                            "does not hold")
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
            return None if latest is not None else 0   # unedited since it was in step
        if saved is not None and _digest(self._body(name, saved["version"])) == saved["digest"]:
            return saved["version"]
        if latest is None:
            return 0
        if name in self._merges:
            return 0
        # edited since it was in step with a version another database held (a restored or
        # replaced one): kept aside, never overwritten in silence (-1); joining: taken (None)
        return -1 if saved is not None else None

    def _merge(self, name: str, path: Path, base, doc, latest, stamp) -> None:
        merge = self._merges.get(name, _plain)
        for _ in range(3):
            try:
                merged = merge(base, doc, latest[1])
            except configmerge.Clash as clash:
                self._aside(name, path, doc, latest, str(clash))
                return
            if merged == latest[1] or self._insert(name, latest[0] + 1, merged):
                version = latest[0] if merged == latest[1] else latest[0] + 1
                self._take(name, path, (version, merged), expect=stamp)
                return
            latest = self._latest(name)   # another landed meanwhile: merge with it too
        self._aside(name, path, doc, latest, "it kept changing")

    def _aside(self, name: str, path: Path, doc, latest, where: str) -> None:
        """An edit here that cannot be merged: kept beside the file, named on stderr, and the
        database's version taken."""
        aside = path.with_name(f"{path.stem}.conflict-{time.strftime('%Y%m%dT%H%M%S')}.json")
        configfile.write_atomic(aside, doc)
        print(f"panelist: {name} was edited here and on another instance in the same place "
              f"({where}); that edit is kept, this instance's is in {aside}", file=sys.stderr)
        if latest is not None:
            self._take(name, path, latest, force=True)

    def _insert(self, name: str, version: int, doc) -> bool:
        """Push ``doc`` as ``version`` of ``name``; False if that version landed first."""
        return bool(self.db.execute(
            "WITH put AS (INSERT INTO config (name, version, body) VALUES (%s, %s, "
            "%s::jsonb) ON CONFLICT DO NOTHING RETURNING version) "
            "SELECT version, pg_notify(%s, %s) FROM put",
            (name, version, jsonwire.dumps(doc), pgschema.CONFIG_CHANNEL, name), retry=False))

    def _latest(self, name: str):
        rows = self.db.execute(_LATEST, ([name],))
        return (rows[0][1], rows[0][2]) if rows else None

    def _body(self, name: str, version: int):
        if version <= 0:
            return None
        rows = self.db.execute("SELECT body FROM config WHERE name = %s AND version = %s",
                               (name, version))
        return rows[0][0] if rows else None

    def _take(self, name: str, path: Path, latest, force: bool = False,
              expect: tuple | None = None) -> None:
        """Write version ``latest`` into the file, unless it was edited meanwhile here (since
        it was in step, or since ``expect``, the stamp it had when read)."""
        version, body = latest
        with configfile.flocked(path.with_name(path.name + ".lock")):
            now = _stamp(path)
            if expect is not None and now != expect:
                return   # edited again just now: merged next turn
            if not force and expect is None and name in self._base and \
                    now != self._stamps.get(name):
                return   # edited here just now: pushed (or merged) next turn
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
            configfile.write_atomic(self._state_path, {"v": 1, "in_step": self._saved})

    def _load_state(self) -> dict:
        try:
            doc = json.loads(self._state_path.read_bytes())
            found = doc["in_step"]
            return {n: {"version": int(e["version"]), "digest": str(e["digest"])}
                    for n, e in found.items() if n in self.names}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

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
