"""Stored endpoint keys: the values of key variables that sign-in obtained, kept outside the data
folder.

An endpoint reads its key from the variable it names (``keyenv``). A key obtained by signing in
to a provider (``metrics.signin``) has no shell to live in, so it is kept here, under the name of
that variable, and read when the variable is unset or empty: the environment always wins.

Invariants:

* The file is ``PANELIST_KEY_FILE`` if set, else ``$XDG_CONFIG_HOME/panelist/endpoint-keys.json``
  (by default ``~/.config/panelist/``): never in the data folder, which may be shared, copied or
  backed up with the logs. It is created with mode 0600 in a folder made 0700, and replaced whole
  (``atomic.write``) under a lock, so two sign-ins never lose each other's key.
* Only this module reads or writes the file; ``KeyEnvs.read`` is its one reader, and applies
  the same rules of which variables may be read to a stored value as to the environment.
* A key is never part of an error, a log line or the change log: errors name the variable and
  the file only.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from panelist.metrics.errors import ConfigInvalid
from panelist.metrics.store import atomic, configfile

FILE_ENV = "PANELIST_KEY_FILE"


def default_path() -> Path:
    env = os.environ.get(FILE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg).expanduser() / "panelist" / "endpoint-keys.json"


def _keys(doc: dict, path: Path) -> dict[str, str]:
    keys = doc.get("keys", {})
    if not isinstance(keys, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in keys.items()
    ):
        raise ConfigInvalid(
            f'{path}: "keys" must map variable names to key strings; fix or '
            "remove the file and sign in again"
        )
    return keys


class KeyStore:
    """The stored keys of one user (see the module docstring)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.Lock()
        self._seen: tuple[tuple | None, dict[str, str]] = (None, {})

    def _stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _read(self) -> dict[str, str]:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        except ValueError:
            # the parser's message may quote the file's text, which holds keys
            raise ConfigInvalid(
                f"{self.path} is not valid JSON; fix or remove it and sign in again"
            ) from None
        if not isinstance(doc, dict):
            raise ConfigInvalid(f"{self.path} must hold a JSON object; fix or remove it")
        return _keys(doc, self.path)

    def get(self, variable: str) -> str | None:
        """The stored value of ``variable``; the file is read again only when it changed (one
        ``stat`` a call otherwise), so a key stored by another process counts at once."""
        stamp = self._stamp()
        with self._lock:
            seen_stamp, keys = self._seen
        if stamp is None:
            return None
        if stamp != seen_stamp:
            keys = self._read()
            with self._lock:
                self._seen = (stamp, keys)
        return keys.get(variable) or None

    def put(self, variable: str, key: str) -> None:
        """Store ``key`` as the value of ``variable``, replacing any stored before."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with configfile.flocked(self.path.with_name(self.path.name + ".lock")):
            keys = dict(self._read())
            keys[variable] = key
            text = json.dumps({"v": 1, "keys": keys}, indent=2, sort_keys=True) + "\n"
            atomic.write(self.path, text, mode=0o600)
