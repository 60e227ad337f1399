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
  the same file at once exactly one push lands; the other instance takes the version that
  landed, and its own edit is kept beside the file (``NAME.conflict-<time>.json``) and named on
  stderr, never silently dropped.
* A file is written only under the lock ``configfile.update`` takes, and replaced whole
  (``configfile.write_atomic``), so an edit in progress is never overwritten half-way; a file
  that does not parse (a hand edit under way) is not pushed until it does.
* At start the database wins over the files: an instance joining takes what is current; a name
  the database does not hold yet is pushed from the file as its first version.
* Unreachable database: the files keep serving as they are; the mirror retries and catches up
  (in both directions) once it is back.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from panelist.metrics import errors
from panelist.metrics.store import configfile, jsonwire, pgschema

NAMES = ("roster.json", "collections.json", "keys.json", "grades.json", "gateway.json")
POLL = 0.5   # seconds between looks at the files' stamps (files send no notifications)

_LATEST = ("SELECT DISTINCT ON (name) name, version, body FROM config "
           "WHERE name = ANY(%s) ORDER BY name, version DESC")


def _stamp(path: Path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class ConfigMirror:
    """One instance's mirror of its config folder's ``names`` in the database ``db``."""

    def __init__(self, db, folder: Path, names=NAMES):
        self.db = db
        self.folder = Path(folder)
        self.names = tuple(names)
        self._base: dict[str, int] = {}        # name -> the version the file is in step with
        self._stamps: dict[str, tuple | None] = {}   # name -> the file's stamp at that time
        self._lock = threading.Lock()          # one sync at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._listener = db.listener(pgschema.CONFIG_CHANNEL, self._woken, self._woken)
        self._thread = threading.Thread(target=self._run, name="config-mirror", daemon=True)
        self.syncs = 0                          # completed syncs (tests wait on it)

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

    def _one(self, name: str, latest) -> None:
        path = self.folder / name
        known = name in self._base
        edited = known and _stamp(path) != self._stamps.get(name)
        if latest is not None and not edited:
            if not known or latest[0] > self._base[name]:
                self._take(name, path, latest)
            return
        if latest is None and not known and _stamp(path) is None:
            return   # neither here nor there yet
        if latest is not None and not known:
            self._take(name, path, latest)
            return
        # a file to push: edited here since the last sync, or one the database lacks
        doc = self._read(path)
        if doc is None:
            return   # not parseable yet: looked at again next turn
        base = self._base.get(name, 0)
        if latest is not None and latest[1] == doc:
            self._base[name], self._stamps[name] = latest[0], _stamp(path)
            return
        if latest is None or latest[0] == base:
            stamp = _stamp(path)
            rows = self.db.execute(
                "WITH put AS (INSERT INTO config (name, version, body) VALUES (%s, %s, "
                "%s::jsonb) ON CONFLICT DO NOTHING RETURNING version) "
                "SELECT version, pg_notify(%s, %s) FROM put",
                (name, base + 1, jsonwire.dumps(doc), pgschema.CONFIG_CHANNEL, name),
                retry=False)
            if rows:
                self._base[name], self._stamps[name] = base + 1, stamp
                return
            latest = self.db.execute(_LATEST, ([name],))
            latest = (latest[0][1], latest[0][2]) if latest else None
        # edited here and elsewhere from the same version: the version that landed wins
        aside = path.with_name(f"{path.stem}.conflict-{time.strftime('%Y%m%dT%H%M%S')}.json")
        configfile.write_atomic(aside, doc)
        print(f"panelist: {name} was edited on another instance at the same time; that edit "
              f"is kept, this instance's is in {aside}", file=sys.stderr)
        if latest is not None:
            self._take(name, path, latest, force=True)

    def _take(self, name: str, path: Path, latest, force: bool = False) -> None:
        """Write version ``latest`` into the file, unless it was edited meanwhile here."""
        version, body = latest
        with configfile.flocked(path.with_name(path.name + ".lock")):
            if not force and name in self._base and _stamp(path) != self._stamps.get(name):
                return   # edited here just now: pushed (or found in conflict) next turn
            if self._read(path) != body:
                configfile.write_atomic(path, body)
            self._base[name], self._stamps[name] = version, _stamp(path)

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
