"""One sign-in, from the auth URL to the stored key: the flow the command line and the
dashboard share.

``SignIn(home, endpoint, provider)`` checks everything it can first (the provider's entry, the
endpoint's name and key variable), then makes the verifier and state and starts the listener,
so ``auth_url`` is ready to open. ``finish()`` waits for the callback, exchanges the code and
only then stores anything: the key under the endpoint's key variable (``roster.keystore``) and
the endpoint (created, or its base URL updated) in the roster. Any failure stores nothing.

Invariants: the key goes to the key store and nowhere else; ``finish`` returns what was done
without it. The listener is closed when ``finish`` returns or raises, and by ``cancel``.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlencode

from panelist.metrics.errors import BadRequest, ConfigInvalid
from panelist.metrics.home import Home
from panelist.metrics.roster.keystore import KeyStore
from panelist.metrics.roster.roster import Roster
from panelist.metrics.signin import pkce
from panelist.metrics.signin.exchange import exchange
from panelist.metrics.signin.listener import Listener
from panelist.metrics.signin.providers import Providers

DEFAULT_TIMEOUT = 300.0
MAX_TIMEOUT = 3600.0


class SignIn:
    """One sign-in of endpoint ``name`` at ``provider`` (see the module docstring)."""

    def __init__(
        self,
        home: Home,
        name: str,
        provider: str,
        *,
        port: int = 0,
        timeout: float = DEFAULT_TIMEOUT,
        store: KeyStore | None = None,
        by: str | None = None,
    ):
        if not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
            raise BadRequest(
                f"timeout {timeout!r} is not valid: give seconds above 0, at most {MAX_TIMEOUT:g}",
                param="timeout",
            )
        self.provider = Providers(home).get(provider)
        self.roster = Roster(home)
        old = self.roster.view().endpoints.get(name)
        # an endpoint signed in again keeps its key variable; its base URL becomes the provider's
        self.endpoint = self.roster.check_endpoint(
            name, self.provider.base_url, old.key_env if old else None
        )
        self.store = store or self.roster.key_envs.store
        if self.store.path.resolve().is_relative_to(home.root.resolve()):
            # the data folder is shared, copied and backed up with the logs: never a key's home
            raise ConfigInvalid(
                f"the key file {self.store.path} is inside the data folder "
                f"{home.root}, where keys are never kept; set PANELIST_KEY_FILE "
                "to a path outside it (or unset it for ~/.config/panelist/)",
                param="key_file",
            )
        self.by = by
        self.timeout = float(timeout)
        self._verifier = pkce.new_verifier()
        self._state = pkce.new_state()
        self.listener = Listener(port)
        fields = self.provider.fields
        callback = self.listener.callback_url(None if fields["state"] else self._state)
        params = dict(self.provider.params)
        params.update(
            {
                fields["callback"]: callback,
                fields["challenge"]: pkce.challenge(self._verifier),
                fields["method"]: pkce.METHOD,
            }
        )
        if fields["state"]:
            params[fields["state"]] = self._state
        sep = "&" if "?" in self.provider.auth_url else "?"
        self.auth_url = self.provider.auth_url + sep + urlencode(params)

    def finish(self) -> dict:
        """Wait for the callback, exchange its code and store the key; what was done."""
        deadline = time.monotonic() + self.timeout
        try:
            code = self.listener.wait(
                self._state,
                state_field=self.provider.fields["state"] or "state",
                code_field=self.provider.fields["code"],
                deadline=deadline,
                provider=self.provider.name,
            )
        finally:
            self.listener.close()
        key = exchange(self.provider, code, self._verifier)
        ep = self.endpoint
        self.store.put(ep.key_env, key)
        self.roster.add_endpoint(ep.name, ep.base_url, ep.key_env, by=self.by)
        return {
            "endpoint": ep.name,
            "provider": self.provider.name,
            "base_url": ep.base_url,
            "key_env": ep.key_env,
            "key_file": str(self.store.path),
            # a variable set in the environment wins over the stored key
            "environment_wins": bool(os.environ.get(ep.key_env)),
        }

    def cancel(self) -> None:
        self.listener.close()
