"""Key variables: which environment variables an endpoint may read its API key from.

An endpoint names the variable that holds its key (``key_env``); the value is read at call time
and sent as ``Authorization: Bearer`` to the endpoint's URL, which whoever edits the roster
chooses (on an open dashboard, anyone who reaches it). So an endpoint may read only a variable
meant for endpoint keys, never any secret the process happens to hold:

* a name starting ``PANELIST_KEY_`` (each endpoint's default is ``PANELIST_KEY_<NAME>``);
* a name the user listed by hand in ``config/key_envs.json`` (``{"allowed": ["OPENAI_API_KEY"]}``).
  Nothing in Panelist writes that file, so no API call or command can widen what is read;
* never ``PANELIST_ADMIN_TOKEN``, listed or not.

When the variable is unset or empty, the value sign-in stored for it (``keystore``, a file
outside the data folder) is read instead, under the same rules.

``KeyEnvs.problem`` says why a name may not be read; ``check`` refuses it when an endpoint is
saved or tested (``ConfigInvalid``: 400, param ``key_env``); ``read`` is the one place an
endpoint's key is read, and refuses (``KeyRefused``, before any call is made and without reading
the value) a name not allowed, even one a hand-edited roster names. The list is read again when
the file changes, so an edit applies to the next call without a restart. A list that cannot be
read allows nothing beyond ``PANELIST_KEY_*``, and every refusal says what is wrong with it.
"""

from __future__ import annotations

import os
import re

from panelist.metrics.errors import ConfigInvalid, KeyRefused
from panelist.metrics.home import Home
from panelist.metrics.roster.keystore import KeyStore
from panelist.metrics.store import configfile

PREFIX = "PANELIST_KEY_"
ADMIN_TOKEN = "PANELIST_ADMIN_TOKEN"  # the dashboard's login (``server.guard.Settings``)
FILE = "key_envs.json"
ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def default_key_env(endpoint: str) -> str:
    return PREFIX + re.sub(r"[^A-Z0-9]", "_", endpoint.upper())


def _allowed(doc: dict) -> frozenset[str]:
    names = doc.get("allowed", [])
    if not isinstance(names, list):
        raise ConfigInvalid(f'{FILE}: "allowed" must be a list of variable names, not {names!r}')
    wrong = [n for n in names if not isinstance(n, str) or not ENV_VAR.fullmatch(n)]
    if wrong:
        raise ConfigInvalid(
            f'{FILE}: {wrong[0]!r} in "allowed" is not an environment variable name'
        )
    return frozenset(names)


class KeyEnvs:
    """The key variables endpoints of one data folder may read (see the module docstring)."""

    def __init__(self, home: Home, store: KeyStore | None = None):
        self.path = home.file(FILE)
        self._allowed = configfile.Cached(self.path, _allowed)
        self.store = store or KeyStore()

    def problem(self, name: str, endpoint: str) -> str | None:
        """Why ``endpoint`` may not read its key from variable ``name``; None when it may."""
        own = default_key_env(endpoint)
        if name == ADMIN_TOKEN:
            return (
                f"key variable '{name}' holds the dashboard's admin token, which is never "
                f"sent to an endpoint, even when listed in {self.path}; put the endpoint's "
                f"key in {own}"
            )
        if name.startswith(PREFIX) and len(name) > len(PREFIX):
            return None
        try:
            if name in self._allowed.get():
                return None
            broken = ""
        except ConfigInvalid as exc:
            broken = f" (the list cannot be read now: {exc.message})"
        return (
            f"key variable '{name}' is not one endpoint keys are read from, so its value is "
            f"never sent: put the key in {own} (names starting {PREFIX} are always read), "
            f"or list '{name}' by hand in \"allowed\" of {self.path}, as "
            f'{{"allowed": ["{name}"]}}{broken}'
        )

    def check(self, name: str, endpoint: str) -> None:
        """Refuse, as a setting that is not valid, a key variable ``endpoint`` may not read."""
        problem = self.problem(name, endpoint)
        if problem is not None:
            raise ConfigInvalid(problem, param="key_env")

    def read(self, endpoint) -> str | None:
        """The key of ``endpoint`` (a ``roster.Endpoint``): its variable's value, else the value
        sign-in stored for that variable (``keystore``), None when neither is set (the endpoint is
        called without a key); ``KeyRefused`` when it may not be read."""
        problem = self.problem(endpoint.key_env, endpoint.name)
        if problem is not None:
            raise KeyRefused(
                f"endpoint '{endpoint.name}': {problem}; no call was made", param="key_env"
            )
        return os.environ.get(endpoint.key_env) or self.store.get(endpoint.key_env)
