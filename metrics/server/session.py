"""Dashboard sessions: who may open the dashboard when ``PANELIST_ADMIN_TOKEN`` is set.

Invariants:

* The admin token is only compared (``hmac.compare_digest`` of digests, so neither its length
  nor its content shows in timing), never stored, logged or echoed.
* A login gives a random session id, sent as an ``HttpOnly; SameSite=Strict`` cookie with an
  expiry; the server keeps only its SHA-256 and when it ends. A gateway key never opens a
  session, and a session never calls ``/v1`` as a key.
* The right token always gets in, at once: it is checked first, at one fixed cost (a digest
  and a constant-time compare), before any throttle, so guessers, however many and from
  whatever address (the admin's own, behind one NAT), cannot lock the admin out. What keeps a
  guesser out is the token itself: at least ``guard.MIN_TOKEN`` characters, and random ones (a
  right answer comes back sooner than a paced wrong one, which tells a guesser nothing its
  200 would not).
* Failed logins are counted per client address over a sliding minute; past ``MAX_FAILURES`` a
  wrong token from that address is refused (429 with ``Retry-After``) until the minute has
  passed. The address is the peer's, or the client's that a trusted proxy forwarded
  (``Guard.client_address``), so one proxy in front does not lock everyone out.
* Guessing from many addresses is slowed by one budget for them all: once ``GLOBAL_FAILURES``
  logins failed within the minute, the answer to every wrong token waits its turn, one every
  ``PACE`` seconds, in the order they came, one waiting per address, and more than
  ``MAX_WAITING`` addresses waiting are refused (429 with ``Retry-After``): the load guessing
  can put on the server is bounded, and the right token passes them all.
* Sessions live in this process's memory, or (``shared``) in a file the workers of one group
  share (``sessiontable``): either way a restart logs everyone out, which is the safe way
  round. With a database (``table``: ``sessiontable.DatabaseTable``) they live in it, so a
  browser may be sent to any instance, and a logout or an expiry holds on all of them. The table is bounded; the oldest session goes first. Failed logins are counted by
  each process on its own: with N workers an address may fail up to N × ``MAX_FAILURES``
  times a minute before every worker refuses it, and the global pace is each worker's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import deque

from panelist.metrics.errors import TooManyRequests, Unauthorized
from panelist.metrics.server.sessiontable import MemoryTable, SharedTable

COOKIE = "panelist_session"
LIFETIME = 12 * 3600  # seconds a session lasts
MAX_FAILURES = 5  # failed logins an address may make in WINDOW seconds
WINDOW = 60.0
MAX_SESSIONS = 1000
MAX_ADDRESSES = 10_000
GLOBAL_FAILURES = 20  # failed logins, from all addresses, in WINDOW before checks are paced
PACE = 0.5  # seconds between two checks while paced: at most 120 guesses a minute
MAX_WAITING = 64  # addresses whose check may wait its turn at once


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "replace")).digest()


class Sessions:
    """One server's logins. ``token`` None: the dashboard is open and every check passes."""

    def __init__(
        self,
        token: str | None,
        *,
        lifetime: float = LIFETIME,
        global_failures: int = GLOBAL_FAILURES,
        pace: float = PACE,
        clock=time.monotonic,
        sleep=None,
        shared: str | None = None,
        table=None,
    ):
        """``clock`` and ``sleep`` are the time the pacing reads and waits on (a test's own);
        ``shared``: the file of the sessions every worker of a group sees; ``table``: where
        the sessions are kept instead (a database's, every instance's)."""
        self._token = _digest(token) if token else None
        self.lifetime = lifetime
        self._lock = threading.Lock()
        # sha256(session id) -> when it ends
        self._live = (
            table
            if table is not None
            else SharedTable(shared, MAX_SESSIONS)
            if shared
            else MemoryTable(MAX_SESSIONS)
        )
        self._failures: dict[str, deque] = {}
        self._recent: deque = deque()  # when each failed login of the last WINDOW was, all told
        self._global, self._pace = global_failures, pace
        self._clock = clock
        self._sleep = sleep or (lambda seconds: threading.Event().wait(seconds))
        self._next_check = 0.0  # the earliest a paced check may run
        self._waiting: set[str] = set()  # addresses whose check waits its turn

    @property
    def required(self) -> bool:
        return self._token is not None

    def login(self, presented, address: str, now: float | None = None) -> str:
        """A new session id for the right token; 401 for a wrong one, 429 past the limit."""
        now = self._clock() if now is None else now
        if (
            isinstance(presented, str)
            and self._token is not None
            and hmac.compare_digest(_digest(presented), self._token)
        ):
            sid = secrets.token_urlsafe(32)
            with self._lock:
                self._failures.pop(address, None)
            self._live.add(_digest(sid), now + self.lifetime)
            return sid
        with self._lock:
            tries = self._failures.get(address)
            if tries is not None:
                while tries and tries[0] <= now - WINDOW:
                    tries.popleft()
                if len(tries) >= MAX_FAILURES:
                    wait = max(1, int(tries[0] + WINDOW - now) + 1)
                    raise TooManyRequests(
                        f"too many failed logins from this address; try again in {wait} s",
                        code="login_throttled",
                        headers={"Retry-After": str(wait)},
                    )
        now = self._await_turn(address, now)
        with self._lock:
            if len(self._failures) >= MAX_ADDRESSES and address not in self._failures:
                self._failures.pop(next(iter(self._failures)))
            self._failures.setdefault(address, deque()).append(now)
            self._recent.append(now)
        raise Unauthorized(
            "wrong admin token; it is the value of PANELIST_ADMIN_TOKEN where "
            "the server was started",
            code="wrong_token",
        )

    def _await_turn(self, address: str, now: float) -> float:
        """Wait until this check may run (at once unless the global budget is spent); the time
        it runs at."""
        with self._lock:
            while self._recent and self._recent[0] <= now - WINDOW:
                self._recent.popleft()
            if len(self._recent) < self._global:
                return now
            if address in self._waiting or len(self._waiting) >= MAX_WAITING:
                wait = max(1, int(len(self._waiting) * self._pace) + 1)
                why = (
                    "a login from this address is already waiting its turn"
                    if address in self._waiting
                    else "too many logins are waiting their turn"
                )
                raise TooManyRequests(
                    f"{why}: logins are slowed after many failed ones; try again in {wait} s",
                    code="login_throttled",
                    headers={"Retry-After": str(wait)},
                )
            start = max(now, self._next_check)
            self._next_check = start + self._pace  # the turn is taken now: order is arrival
            self._waiting.add(address)
        try:
            if start > now:
                self._sleep(start - now)
        finally:
            with self._lock:
                self._waiting.discard(address)
        return max(start, self._clock())

    def valid(self, sid: str | None, now: float | None = None) -> bool:
        if self._token is None:
            return True
        if not sid:
            return False
        now = time.monotonic() if now is None else now
        key = _digest(sid)
        ends = self._live.ends(key)
        if ends is None:
            return False
        if ends <= now:
            self._live.drop(key)
            return False
        return True

    def check(self, sid: str | None) -> None:
        """401 ``login_required`` unless the session is live (or no token is set)."""
        if not self.valid(sid):
            raise Unauthorized(
                "log in to the dashboard first (POST /api/login with the admin "
                "token, or open /login)",
                code="login_required",
            )

    def logout(self, sid: str | None) -> None:
        if sid:
            self._live.drop(_digest(sid))

    def cookie(self, sid: str, *, secure: bool = False) -> str:
        flags = "; Secure" if secure else ""
        return (
            f"{COOKIE}={sid}; Path=/; Max-Age={int(self.lifetime)}; HttpOnly; "
            f"SameSite=Strict{flags}"
        )

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
