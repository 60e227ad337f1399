"""Gateway keys: the secrets callers present when the gateway requires keys.

``config/keys.json`` holds ``{"v": 1, "keys": {name: {digest, hint, collections, rpm, races,
created}}, "revoked": {name: {hint, created, revoked}}}``.

Invariants:

* A key is ``pk_`` followed by 43 URL-safe characters (32 random bytes), so a leaked one is
  recognisable. It is shown once, by ``create``, and never stored: the file keeps its SHA-256 (hex)
  and its last four characters as a hint to tell keys apart. The change log gets the hint only.
* Names are unique and name the caller on every call it makes; ``local`` is reserved for the
  caller of a gateway that requires no key. A name is never reused, even after its key is
  revoked: the logs record calls, panels and verdicts by name, and a key judges and reads only
  its own, so a new key under an old name would inherit what the old key did.
* ``collections`` is None (every collection) or the non-empty set the key may call; ``rpm`` is None
  (no limit) or the requests a minute it may make; ``races`` is False for a key that may not
  start races (``--no-races``): a key made before the field existed may (it is absent).
* A presented key is hashed and found by its digest, then confirmed with ``hmac.compare_digest``:
  no step compares the secret itself, so response times say nothing about a guess.
* The file is re-read only when it changes (one ``stat`` per lookup), so a key created or revoked
  by another process counts at once, without a restart.
* A revocation is final: a name under ``revoked`` is refused even if an entry under ``keys``
  still names it (a file merged or edited by hand), and ``merge`` (how instances on one
  database combine two edits of the file) keeps every revocation either side made.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from panelist.metrics.store import configfile, configmerge
from panelist.metrics.roster.collection import NAME as COLLECTION_NAME
from panelist.metrics.roster.collection import PREFIX
from panelist.metrics.errors import ConfigInvalid, Conflict, NotFound
from panelist.metrics.home import Home

PREFIX_KEY = "pk_"
SHAPE = re.compile(r"pk_[A-Za-z0-9_-]{43}")  # token_urlsafe(32) is 43 characters
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
DASHBOARD = "dashboard"  # the caller of the dashboard's Ask (metrics.server.ask)
RESERVED = frozenset({"local", DASHBOARD})
MAX_RPM = 1_000_000


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def well_formed(secret: str) -> bool:
    return SHAPE.fullmatch(secret) is not None


@dataclass(frozen=True)
class Key:
    name: str
    digest: str
    hint: str
    collections: frozenset[str] | None = None
    rpm: int | None = None
    created: str = ""
    races: bool = True

    def public(self) -> dict:
        """What may be shown or logged: everything but the digest."""
        return {
            "name": self.name,
            "hint": self.hint,
            "collections": sorted(self.collections) if self.collections is not None else None,
            "rpm": self.rpm,
            "races": self.races,
            "created": self.created,
        }


def _parse(doc: dict) -> dict[str, Key]:
    """keys.json -> {digest: Key}; entries without a usable digest are left out, never guessed,
    and so is every revoked name."""
    out = {}
    revoked = doc.get("revoked")
    if not isinstance(revoked, dict):
        revoked = {}
    for name, k in (doc.get("keys") or {}).items():
        if not isinstance(k, dict) or not isinstance(k.get("digest"), str) or name in revoked:
            continue
        cols = k.get("collections")
        out[k["digest"]] = Key(
            name=name,
            digest=k["digest"],
            hint=str(k.get("hint", "")),
            collections=frozenset(cols) if isinstance(cols, list) else None,
            rpm=k.get("rpm") if isinstance(k.get("rpm"), int) else None,
            created=str(k.get("created", "")),
            races=k.get("races") is not False,
        )
    return out


def merge(base: dict | None, ours: dict, theirs: dict) -> dict:
    """Two edits of keys.json combined (``store.pgconfig``): every revocation either side made
    stands, every key either side made is kept unless revoked, and other changes merge three
    ways from ``base`` (None when unknown: keys are only ever added or revoked, so a union
    loses nothing and brings nothing revoked back). A name minted on both sides as different
    keys raises ``configmerge.Clash``."""
    revoked: dict = {}
    for doc in (theirs, ours):
        for name, entry in (doc.get("revoked") or {}).items():
            revoked.setdefault(name, entry)

    def rest(doc):
        # a revoked key is out of every side first, so no edit of it can clash with its end
        out = {k: v for k, v in (doc or {}).items() if k != "revoked"}
        out["keys"] = {n: k for n, k in (out.get("keys") or {}).items() if n not in revoked}
        return out

    merged = configmerge.merge(rest(base), rest(ours), rest(theirs))
    if revoked:
        merged["revoked"] = revoked
    return merged


def _collections(value, known) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.split(",")
    names = sorted({v.strip().removeprefix(PREFIX) for v in value if v.strip()})
    if not names:
        raise ConfigInvalid(
            "name at least one collection (--collections a,b), or leave it out "
            "to allow every collection"
        )
    bad = [n for n in names if not COLLECTION_NAME.fullmatch(n)]
    if bad:
        raise ConfigInvalid(f"not a collection name: {', '.join(bad)}")
    if known is not None:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigInvalid(
                f"unknown collection(s) {', '.join(unknown)}; see `panelist collection list`"
            )
    return names


class Keys:
    """One data folder's gateway keys."""

    def __init__(self, home: Home):
        self.path = home.file("keys.json")
        self._cache = configfile.Cached(self.path, _parse)

    def find(self, secret: str) -> Key | None:
        """The key whose secret this is, or None (unknown or revoked)."""
        presented = digest(secret)
        found = self._cache.get().get(presented)
        if found is None or not hmac.compare_digest(found.digest, presented):
            return None
        return found

    def all(self) -> list[Key]:
        return sorted(self._cache.get().values(), key=lambda k: k.name)

    def create(
        self,
        name: str,
        *,
        collections=None,
        rpm: int | None = None,
        known=None,
        by: str | None = None,
        races: bool = True,
    ) -> tuple[str, Key]:
        """Make a key; returns ``(secret, key)``. The secret exists only in this return value.

        ``known``: the collection names that exist, to refuse a typo; None skips that check."""
        if not isinstance(name, str) or not NAME.fullmatch(name) or name in RESERVED:
            raise ConfigInvalid(
                f"key name '{name}' is not valid: use 1-64 lower-case letters, "
                "digits or '-' (not 'local' or 'dashboard'); it names the "
                "caller in the logs"
            )
        cols = _collections(collections, known)
        if rpm is not None and (
            isinstance(rpm, bool) or not isinstance(rpm, int) or not 1 <= rpm <= MAX_RPM
        ):
            raise ConfigInvalid(f"--rpm must be a whole number from 1 to {MAX_RPM}")
        secret = PREFIX_KEY + secrets.token_urlsafe(32)
        entry: dict[str, Any] = {
            "digest": digest(secret),
            "hint": secret[-4:],
            "collections": cols,
            "rpm": rpm,
            "created": configfile.now_iso(),
        }
        if not races:
            entry["races"] = False

        def change(doc):
            keys = doc.setdefault("keys", {})
            if name in keys:
                raise Conflict(
                    f"key '{name}' exists; revoke it first "
                    f"(`panelist key revoke {name}`) or pick another name",
                    code="exists",
                )
            gone = (doc.get("revoked") or {}).get(name)
            if gone is not None:
                raise Conflict(
                    f"key name '{name}' belonged to a key revoked on {gone.get('revoked', '?')}; "
                    "names are never reused, so the logs' calls of that key stay its own; pick "
                    f"another name such as {name[:61]}-2",
                    code="exists",
                )
            keys[name] = entry
            return f"key {name}", None, {k: v for k, v in entry.items() if k != "digest"}

        configfile.update(self.path, change, by=by)
        return secret, _parse({"keys": {name: entry}})[entry["digest"]]

    def revoke(self, name: str, *, by: str | None = None) -> None:
        def change(doc):
            keys = doc.setdefault("keys", {})
            if name not in keys:
                raise NotFound(f"unknown key '{name}'; see `panelist key list`")
            old = keys.pop(name)
            doc.setdefault("revoked", {})[name] = {
                "hint": old.get("hint", ""),
                "created": old.get("created", ""),
                "revoked": configfile.now_iso(),
            }
            return f"key {name}", {k: v for k, v in old.items() if k != "digest"}, None

        configfile.update(self.path, change, by=by)
