"""Config files: JSON documents read whole and rewritten atomically under a lock.

Writers take an exclusive ``flock`` on a sibling ``.lock`` file, read the current document,
apply their change and replace it whole (``atomic.write``), so two ``collection save`` at once
never lose an update and a reader never sees half a file. Every change is appended to
``changes.jsonl`` with who, when, the old and the new value, and the digest of the document
written (``version_of``).
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from panelist.metrics.store import atomic, jsonwire
from panelist.metrics.errors import ConfigInvalid, Conflict
from panelist.metrics.store.jsonl import SCHEMA, Appender


def version_of(value) -> str:
    """A short digest of a stored value: an edit names the version it read, and is refused when
    the value changed meanwhile."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def check_version(what: str, stored, expect: str | None) -> None:
    """Refuse an edit made on a stale read. ``expect``: None (no check), "" (``what`` must not
    exist yet) or the version the editor read."""
    if expect is None:
        return
    if expect == "":
        if stored is not None:
            raise Conflict(f"{what} exists already; pick another name or edit it", code="exists")
    elif stored is None:
        raise Conflict(
            f"{what}: someone else removed it since you read it; reload and try again", code="stale"
        )
    elif version_of(stored) != expect:
        raise Conflict(
            f"{what}: someone else changed it since you read it; reload and try again", code="stale"
        )


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {"v": SCHEMA}
    except ValueError as exc:
        raise ConfigInvalid(f"{path} is not valid JSON ({exc}); fix or remove it") from exc
    if not isinstance(doc, dict):
        raise ConfigInvalid(f"{path} must hold a JSON object; fix or remove it")
    return doc


@contextlib.contextmanager
def flocked(lock_path: Path):
    """An exclusive ``flock`` on ``lock_path`` (made, with its folder, if missing) while the
    block runs: one writer at a time across threads and processes; a killed holder frees it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _locked(path: Path):
    return flocked(path.with_name(path.name + ".lock"))


def write_atomic(path: Path, doc: dict, mode: int = 0o666) -> None:
    """Replace ``path`` with ``doc`` as indented JSON, synced to disk (``atomic.write``);
    ``mode``: its permissions before the umask (``0o600``: a file holding secrets)."""
    atomic.write(path, jsonwire.dumps(doc, indent=2, sort_keys=True) + "\n", mode=mode)


def who() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return str(os.getuid())


def update(
    path: Path,
    change: Callable[[dict], tuple[str, object, object] | None],
    *,
    by: str | None = None,
    mode: int = 0o666,
) -> None:
    """Apply ``change(doc)`` under the lock; it edits ``doc`` in place and returns
    ``(what, old, new)`` to log, or None when nothing changed (then nothing is written)."""
    with _locked(path):
        doc = read(path)
        done = change(doc)
        if done is None:
            return
        what, old, new = done
        doc["v"] = SCHEMA
        write_atomic(path, doc, mode)
        log = Appender(path.with_name("changes.jsonl"))
        try:
            # the digest of what was written tells a mirror this edit from a hand edit
            log.append(
                {
                    "v": SCHEMA,
                    "ts": now_iso(),
                    "by": by or who(),
                    "file": path.name,
                    "what": what,
                    "old": old,
                    "new": new,
                    "digest": version_of(doc),
                }
            )
        finally:
            log.close()


class Cached:
    """A config file parsed once and re-read only when its inode, size or mtime changes, so a
    request pays one ``os.stat`` and still sees an edit made by another process."""

    def __init__(self, path: Path, parse: Callable[[dict], object]):
        self.path = path
        self._parse = parse
        self._stamp: tuple | None = None
        self._value: object = None

    def get(self):
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp or self._value is None:
            # parse before publishing the stamp, so a racing reader never pairs old data with it
            value = self._parse(read(self.path))
            self._value, self._stamp = value, stamp
        return self._value
