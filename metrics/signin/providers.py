"""Providers one can sign in to, read from ``config/providers.json``.

Shape (every field but ``params`` and ``fields.state`` required)::

    {"v": 1, "providers": {"openrouter": {
        "auth_url": "https://openrouter.ai/auth",           the page the browser opens
        "exchange_url": "https://openrouter.ai/api/v1/auth/keys",  where code + verifier go
        "base_url": "https://openrouter.ai/api/v1",          the endpoint's base URL
        "exchange_body": "json",                             or "form" (urlencoded)
        "fields": {"callback": "callback_url", "challenge": "code_challenge",
                   "method": "code_challenge_method", "code": "code",
                   "verifier": "code_verifier", "key": "key", "state": null},
        "params": {}}}}                                      fixed extras for the auth URL

``fields`` names the parameters in the provider's own words: ``callback``, ``challenge`` and
``method`` go on the auth URL, ``code`` is read from the redirect and sent with ``verifier`` to
the exchange, ``key`` is read from the exchange's JSON reply. ``state``: the auth URL parameter
the provider hands back on the redirect; null for a provider that has none, and then the state
rides in the callback URL's own query, which the provider keeps.

Invariants: ``auth_url`` and ``exchange_url`` are https (plain http only to a loopback host, for
a provider simulated on this machine), so the code and verifier travel to the provider only,
encrypted; ``base_url`` passes the roster's own endpoint checks. Every problem names the provider
and the field, and says what to write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from panelist.metrics.errors import ConfigInvalid, NotFound
from panelist.metrics.home import DEFAULTS, Home
from panelist.metrics.store import configfile

FILE = "providers.json"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")
PARAM = re.compile(r"[A-Za-z0-9_.\-\[\]]{1,64}")
FIELDS = ("callback", "challenge", "method", "code", "verifier", "key")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Provider:
    name: str
    auth_url: str
    exchange_url: str
    base_url: str
    exchange_body: str
    fields: dict
    params: dict


def _url(where: str, field: str, value) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or not parts.hostname or parts.scheme not in ("http", "https"):
        raise ConfigInvalid(f'{where}: "{field}" must be an https:// URL, not {value!r}')
    if field != "base_url" and parts.scheme != "https" and parts.hostname not in LOOPBACK:
        raise ConfigInvalid(
            f'{where}: "{field}" must be https:// (the code and verifier '
            f"travel on it); plain http is only for 127.0.0.1, not {value!r}"
        )
    if parts.username or parts.password or parts.fragment:
        raise ConfigInvalid(f'{where}: "{field}" must not carry a user:password or fragment')
    return value


def _provider(name: str, entry) -> Provider:
    where = f"{FILE}, provider '{name}'"
    if not NAME.fullmatch(name):
        raise ConfigInvalid(
            f"{FILE}: provider name {name!r} is not valid: use lower-case "
            "letters, digits, '-' or '_'"
        )
    if not isinstance(entry, dict):
        raise ConfigInvalid(
            f"{where}: must be an object with auth_url, exchange_url, base_url and fields"
        )
    for field in ("auth_url", "exchange_url", "base_url"):
        if field not in entry:
            raise ConfigInvalid(f'{where}: "{field}" is missing')
        _url(where, field, entry[field])
    body = entry.get("exchange_body", "json")
    if body not in ("json", "form"):
        raise ConfigInvalid(f'{where}: "exchange_body" must be "json" or "form", not {body!r}')
    fields = entry.get("fields")
    if not isinstance(fields, dict):
        raise ConfigInvalid(f'{where}: "fields" must be an object naming {", ".join(FIELDS)}')
    for field in FIELDS:
        if not isinstance(fields.get(field), str) or not PARAM.fullmatch(fields[field]):
            raise ConfigInvalid(
                f'{where}: "fields.{field}" must name the provider\'s '
                f"parameter (letters, digits, '_', '-', '.'), not "
                f"{fields.get(field)!r}"
            )
    state = fields.get("state")
    if state is not None and (not isinstance(state, str) or not PARAM.fullmatch(state)):
        raise ConfigInvalid(f'{where}: "fields.state" must name a parameter or be null')
    unknown = set(fields) - set(FIELDS) - {"state"}
    if unknown:
        raise ConfigInvalid(
            f'{where}: unknown field {min(unknown)!r} in "fields"; '
            f"known: {', '.join(FIELDS)}, state"
        )
    params = entry.get("params", {})
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and PARAM.fullmatch(k) and isinstance(v, str) for k, v in params.items()
    ):
        raise ConfigInvalid(f'{where}: "params" must map parameter names to strings')
    ours = {fields[f] for f in ("callback", "challenge", "method")} | {state}
    if set(params) & ours:
        raise ConfigInvalid(
            f'{where}: "params" must not set {min(set(params) & ours)!r}'
            ", which sign-in fills in itself"
        )
    return Provider(
        name,
        entry["auth_url"],
        entry["exchange_url"],
        entry["base_url"].rstrip("/"),
        body,
        dict(fields, state=state),
        dict(params),
    )


def parse(doc: dict) -> dict[str, Provider]:
    providers = doc.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigInvalid(f'{FILE}: "providers" must be an object of provider name → entry')
    return {name: _provider(name, entry) for name, entry in providers.items()}


class Providers:
    """The providers of one data folder; its file is seeded from the checkout's defaults."""

    def __init__(self, home: Home):
        path = home.file(FILE)
        self.path = path if path.exists() else DEFAULTS / FILE
        self._cached = configfile.Cached(self.path, parse)

    def all(self) -> dict[str, Provider]:
        return self._cached.get()

    def get(self, name: str) -> Provider:
        known = self.all()
        if name not in known:
            raise NotFound(
                f"no sign-in provider '{name}' in {self.path}; use one of: "
                f"{', '.join(sorted(known)) or '(none)'}, or add it there",
                param="provider",
            )
        return known[name]
