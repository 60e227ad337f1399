"""Dashboard sessions: who may open the dashboard when ``PANELIST_ADMIN_TOKEN`` is set.

Invariants:

* The admin token is only compared (``hmac.compare_digest`` of digests, so neither its length
  nor its content shows in timing), never stored, logged or echoed.
* A login gives a random session id, sent as an ``HttpOnly; SameSite=Strict`` cookie with an
  expiry; the server keeps only its SHA-256 and when it ends. A gateway key never opens a
  session, and a session never calls ``/v1`` as a key.
* Failed logins are counted per client address over a sliding minute; past ``MAX_FAILURES`` the
  address is refused (429 with ``Retry-After``) until the minute has passed, whatever it sends.
* Sessions live in this process's memory: a restart logs everyone out, which is the safe way
  round. The table is bounded; the oldest session goes first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque

from panelist.metrics.errors import TooManyRequests, Unauthorized

COOKIE = "panelist_session"
LIFETIME = 12 * 3600       # seconds a session lasts
MAX_FAILURES = 5           # failed logins an address may make in WINDOW seconds
WINDOW = 60.0
MAX_SESSIONS = 1000
MAX_ADDRESSES = 10_000


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "replace")).digest()


class Sessions:
    """One server's logins. ``token`` None: the dashboard is open and every check passes."""

    def __init__(self, token: str | None, *, lifetime: float = LIFETIME):
        self._token = _digest(token) if token else None
        self.lifetime = lifetime
        self._lock = threading.Lock()
        self._live: OrderedDict[bytes, float] = OrderedDict()   # sha256(session id) -> ends
        self._failures: dict[str, deque] = {}

    @property
    def required(self) -> bool:
        return self._token is not None

    def login(self, presented, address: str, now: float | None = None) -> str:
        """A new session id for the right token; 401 for a wrong one, 429 past the limit."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tries = self._failures.get(address)
            if tries is not None:
                while tries and tries[0] <= now - WINDOW:
                    tries.popleft()
                if len(tries) >= MAX_FAILURES:
                    wait = max(1, int(tries[0] + WINDOW - now) + 1)
                    raise TooManyRequests(f"too many failed logins from this address; try again "
                                          f"in {wait} s", code="login_throttled",
                                          headers={"Retry-After": str(wait)})
        if not isinstance(presented, str) or self._token is None or \
                not hmac.compare_digest(_digest(presented), self._token):
            with self._lock:
                if len(self._failures) >= MAX_ADDRESSES and address not in self._failures:
                    self._failures.pop(next(iter(self._failures)))
                self._failures.setdefault(address, deque()).append(now)
            raise Unauthorized("wrong admin token; it is the value of PANELIST_ADMIN_TOKEN where "
                               "the server was started", code="wrong_token")
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._failures.pop(address, None)
            self._live[_digest(sid)] = now + self.lifetime
            while len(self._live) > MAX_SESSIONS:
                self._live.popitem(last=False)
        return sid

    def valid(self, sid: str | None, now: float | None = None) -> bool:
        if self._token is None:
            return True
        if not sid:
            return False
        now = time.monotonic() if now is None else now
        key = _digest(sid)
        with self._lock:
            ends = self._live.get(key)
            if ends is None:
                return False
            if ends <= now:
                del self._live[key]
                return False
        return True

    def check(self, sid: str | None) -> None:
        """401 ``login_required`` unless the session is live (or no token is set)."""
        if not self.valid(sid):
            raise Unauthorized("log in to the dashboard first (POST /api/login with the admin "
                               "token, or open /login)", code="login_required")

    def logout(self, sid: str | None) -> None:
        if sid:
            with self._lock:
                self._live.pop(_digest(sid), None)

    def cookie(self, sid: str, *, secure: bool = False) -> str:
        flags = "; Secure" if secure else ""
        return (f"{COOKIE}={sid}; Path=/; Max-Age={int(self.lifetime)}; HttpOnly; "
                f"SameSite=Strict{flags}")

    @staticmethod
    def cleared() -> str:
        return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"

    @staticmethod
    def from_cookie(header: str | None) -> str | None:
        """The session id in a ``Cookie`` header, or None."""
        for part in (header or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and value:
                return value
        return None
