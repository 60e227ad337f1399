"""Who may call: the checks every request to a Panelist server passes before any route runs.

Shared by every server (the gateway now, the dashboard later). A server reads its ``Settings``
once, when it is built, and owns one ``Guard``; nothing here is module-level state, so a test can
run servers with different settings side by side.

Settings, from the environment::

    PANELIST_ADMIN_TOKEN      16+ characters; needed to listen anywhere but loopback
    PANELIST_REQUIRE_KEYS=1   gateway keys on a loopback-only server too
    PANELIST_PUBLIC_URL       the URL callers use (behind a proxy); its host and origin are served
    PANELIST_ALLOWED_HOSTS    more Host names (``name`` or ``name:port``), comma-separated
    PANELIST_ALLOWED_ORIGINS  browser origins answered with CORS, comma-separated
    PANELIST_TRUSTED_PROXIES  addresses or networks of proxies in front (comma-separated): a
                              request from one of them is counted (login throttling) under the
                              client address its ``X-Forwarded-For`` names
    PANELIST_MAX_INFLIGHT_MB  request-body memory the server may hold at once (default 128)

Invariants, in the order a request meets them:

1. **Host** (against DNS rebinding): only a loopback name with the server's port, the bound
   address, the public URL's host and the allowed hosts are answered; others get 403. ``/health``
   answers any host: it says only that the server is up, and liveness probes use any address.
2. **Origin**: a request carrying an ``Origin`` that is neither the server's own nor allowed, or
   marked ``Sec-Fetch-Site: cross-site`` without an allowed origin, gets 403. Only a plain GET/HEAD
   navigation (a followed link) may come cross-site, as the Fetch Metadata isolation policy does.
3. **CORS** is answered on gateway routes (``/v1/…``, ``/bench/…``, Google's ``/v1beta/…`` and
   Ollama's ``/api/chat`` and its siblings) only, for allowed origins only:
   the origin is echoed with ``Vary: Origin``; never ``*``, never credentials (keys travel in a
   header, not a cookie). A preflight is answered before any key is asked for, since browsers send
   none with it.
4. **Caller**: without ``PANELIST_ADMIN_TOKEN`` or ``PANELIST_REQUIRE_KEYS`` every caller is
   ``local`` and any bearer is ignored. Otherwise every gateway route needs a gateway key (as
   ``Authorization: Bearer``, or ``x-api-key`` as Anthropic's clients send it, or
   ``x-goog-api-key`` as Google's do): missing,
   malformed or unknown gets 401 with ``WWW-Authenticate: Bearer`` and a message saying which; a
   key past its requests a minute gets 429 with ``Retry-After``. The admin token is never a key.
5. **Body**: a POST (or other write) must be ``Content-Type: application/json`` (415), which also
   keeps HTML forms, whose types a page may send cross-site without a preflight, from writing, and
   no longer than the server's cap (413).

No message, header or file written here holds a secret: keys are matched by digest, the admin
token is only compared, and refusals never echo what was presented.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from dataclasses import dataclass, field
from typing import Mapping, TypeVar
from urllib.parse import urlsplit

from panelist.metrics.server import keys as keystore
from panelist.metrics.roster.collection import PREFIX, parse_model_name
from panelist.metrics.errors import (
    BadRequest,
    ConfigInvalid,
    Forbidden,
    PanelistError,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)
from panelist.metrics.home import Home
from panelist.metrics.server.front.connection import too_large
from panelist.metrics.server.front.memory import MAX_IN_FLIGHT
from panelist.metrics.server import ratelimit
from panelist.metrics.server.ratelimit import RateCounter
from panelist.metrics.wire.errors import GEMINI_PREFIX, OLLAMA_PATHS

MIN_TOKEN = 16
# A refused login is answered after this pause (login.defs' FAIL_DELAY is 3 s): a client that
# waits for its answer tries at most once per pause per connection, and while it waits it holds
# no thread (``Route.refusal_pause``).
LOGIN_PAUSE = 2.0
MAX_LOGIN_PAUSE = 30.0
GATED = ("/v1/", "/bench/", GEMINI_PREFIX)  # gateway routes: keys and CORS apply here
# answered for any Host and Origin (probes use any address): they reveal nothing
OPEN_PATHS = frozenset({"/health", "/ready"})
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 §5.6.2 token: a plain header name
MAX_REQUESTED_HEADERS = 64
PREFLIGHT_MAX_AGE = "600"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 6750 §3: a missing key gets the bare challenge, a bad one says the token is invalid
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="panelist"'}
CHALLENGE_INVALID = {"WWW-Authenticate": 'Bearer realm="panelist", error="invalid_token"'}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}


# -- settings -------------------------------------------------------------------------------------
def _origin(value: str, what: str) -> str:
    """``scheme://host[:port]``, lower-cased, without a default port: what browsers send."""
    parts = urlsplit(value.strip())
    if (
        parts.scheme not in DEFAULT_PORTS
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
    ):
        raise ConfigInvalid(
            f"{what}: '{value}' is not an origin such as https://app.example "
            "(scheme, host and an optional port; '*' is never allowed)"
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigInvalid(f"{what}: '{value}' has a port that is not a number") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and port != DEFAULT_PORTS[parts.scheme]:
        host = f"{host}:{port}"
    return f"{parts.scheme}://{host}"


def _host_entry(value: str) -> str:
    entry = value.strip().lower()
    if not entry or "*" in entry or "/" in entry or " " in entry:
        raise ConfigInvalid(
            f"PANELIST_ALLOWED_HOSTS: '{value}' is not a host name "
            "(use name or name:port, comma-separated; '*' is never allowed)"
        )
    return entry


def _split(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v.strip()]


def _network(value) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if isinstance(value, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return value
    try:
        return ipaddress.ip_network(str(value).strip(), strict=False)
    except ValueError:
        raise ConfigInvalid(
            f"PANELIST_TRUSTED_PROXIES: '{value}' is not an address or network "
            "(such as 10.0.0.5 or 10.0.0.0/8), comma-separated"
        ) from None


def _megabytes(value: str | None) -> int:
    if value is None or not value.strip():
        return MAX_IN_FLIGHT // 2**20
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ConfigInvalid(
            f"PANELIST_MAX_INFLIGHT_MB must be a whole number of megabytes, at "
            f"least 1 (not '{value}')"
        )
    return int(value)


_Default = TypeVar("_Default", float, float | None)


def _seconds(value: str | None, default: _Default, name: str) -> float | _Default:
    """A number of seconds from the environment (``default`` when unset, None for a setting
    that then falls back elsewhere); its range is the setting's to check."""
    if value is None or not value.strip():
        return default
    try:
        return float(value)
    except ValueError:
        raise ConfigInvalid(f"{name} must be a number of seconds (not '{value.strip()}')") from None


def _address(value: str):
    try:
        return ipaddress.ip_address(value.strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Settings:
    """Who-may-call settings; validated when made, so a bad value stops the server at start."""

    admin_token: str | None = field(default=None, repr=False)
    require_keys: bool = False
    public_url: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    trusted_proxies: tuple = ()  # ip networks (strings are parsed when made)
    max_in_flight_mb: int = MAX_IN_FLIGHT // 2**20
    # seconds a refused login waits before it is answered (0: at once)
    login_pause: float = LOGIN_PAUSE
    # seconds a streamed answer may pause between tokens (None: gateway.json's stall_timeout)
    stall_timeout: float | None = None
    # the file in which the workers of one group share the dashboard's sessions (never from
    # the environment: the group makes it); None keeps them in this process's memory
    sessions: str | None = None

    def __post_init__(self):
        if self.admin_token is not None and len(self.admin_token) < MIN_TOKEN:
            raise ConfigInvalid(
                f"PANELIST_ADMIN_TOKEN is shorter than {MIN_TOKEN} characters; "
                "set a longer one (e.g. `python -c 'import secrets; "
                "print(secrets.token_urlsafe(24))'`)"
            )
        origins = [_origin(o, "PANELIST_ALLOWED_ORIGINS") for o in self.allowed_origins]
        if self.public_url is not None:
            origins.append(
                _origin(
                    self._public().scheme + "://" + self._public().netloc, "PANELIST_PUBLIC_URL"
                )
            )
        object.__setattr__(self, "allowed_origins", tuple(dict.fromkeys(origins)))
        object.__setattr__(self, "allowed_hosts", tuple(_host_entry(h) for h in self.allowed_hosts))
        object.__setattr__(
            self, "trusted_proxies", tuple(_network(p) for p in self.trusted_proxies)
        )
        if (
            isinstance(self.max_in_flight_mb, bool)
            or not isinstance(self.max_in_flight_mb, int)
            or self.max_in_flight_mb < 1
        ):
            raise ConfigInvalid(
                "PANELIST_MAX_INFLIGHT_MB must be a whole number of megabytes, "
                f"at least 1 (not {self.max_in_flight_mb!r})"
            )
        # NaN fails both comparisons
        if (
            isinstance(self.login_pause, bool)
            or not isinstance(self.login_pause, (int, float))
            or not 0 <= self.login_pause <= MAX_LOGIN_PAUSE
        ):
            raise ConfigInvalid(
                f"PANELIST_LOGIN_PAUSE must be a number of seconds from 0 to "
                f"{MAX_LOGIN_PAUSE:g} (not {self.login_pause!r})"
            )
        if self.stall_timeout is not None and not 0 < self.stall_timeout <= 86_400:
            raise ConfigInvalid(
                "PANELIST_STALL_TIMEOUT must be a number of seconds above 0 "
                f"and at most 86400 (not {self.stall_timeout!r}); unset it to "
                "use gateway.json's stall_timeout"
            )

    def _public(self):
        parts = urlsplit(self.public_url or "")
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ConfigInvalid(
                f"PANELIST_PUBLIC_URL: '{self.public_url}' is not a URL such as "
                "https://panelist.example.com"
            )
        return parts

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        flag = env.get("PANELIST_REQUIRE_KEYS", "").strip().lower()
        if flag not in _TRUE | _FALSE:
            raise ConfigInvalid(f"PANELIST_REQUIRE_KEYS must be 1 or 0, not '{flag}'")
        return cls(
            admin_token=env.get("PANELIST_ADMIN_TOKEN") or None,
            require_keys=flag in _TRUE,
            public_url=env.get("PANELIST_PUBLIC_URL") or None,
            allowed_hosts=tuple(_split(env.get("PANELIST_ALLOWED_HOSTS"))),
            allowed_origins=tuple(_split(env.get("PANELIST_ALLOWED_ORIGINS"))),
            trusted_proxies=tuple(_split(env.get("PANELIST_TRUSTED_PROXIES"))),
            max_in_flight_mb=_megabytes(env.get("PANELIST_MAX_INFLIGHT_MB")),
            login_pause=_seconds(
                env.get("PANELIST_LOGIN_PAUSE"), LOGIN_PAUSE, "PANELIST_LOGIN_PAUSE"
            ),
            stall_timeout=_seconds(
                env.get("PANELIST_STALL_TIMEOUT"), None, "PANELIST_STALL_TIMEOUT"
            ),
        )

    @property
    def keys_required(self) -> bool:
        return self.require_keys or self.admin_token is not None

    def check_bind(self, host: str) -> None:
        """Refuse to listen beyond loopback without an admin token (raised before binding)."""
        if is_loopback(host) or self.admin_token is not None:
            return
        raise ConfigInvalid(
            f"refusing to listen on '{host or '*'}': without an admin token only "
            "127.0.0.1 is served. Set PANELIST_ADMIN_TOKEN (at least "
            f"{MIN_TOKEN} characters); every /v1 and /bench call will then need a "
            "gateway key (`panelist key create NAME`)"
        )

    def hosts(self, port: int, bound: str) -> tuple[frozenset[str], frozenset[str]]:
        """``(host:port values, names served on any port)`` a Host header may carry."""
        exact = {f"{name}:{port}" for name in LOOPBACK_NAMES}
        if port == 80:
            exact.update(LOOPBACK_NAMES)
        try:
            ip = ipaddress.ip_address(bound)
        except ValueError:
            ip = None
        if ip is not None and not ip.is_unspecified:  # an address literal cannot be rebound
            exact.add(f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}")
        names: set[str] = set()
        if self.public_url is not None:
            parts = self._public()
            name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            public_port = parts.port or DEFAULT_PORTS[parts.scheme]
            exact.add(f"{name}:{public_port}")
            if public_port == DEFAULT_PORTS[parts.scheme]:
                exact.add(name)  # browsers leave a default port out of Host
        for entry in self.allowed_hosts:
            (exact if _port_of(entry) is not None else names).add(entry)
        return frozenset(exact), frozenset(names)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _port_of(host: str) -> str | None:
    name, colon, port = host.rpartition(":")
    if colon and port.isdigit() and (not name.startswith("[") or name.endswith("]")):
        return port
    return None


def _name_of(host: str) -> str:
    return host.rpartition(":")[0] if _port_of(host) is not None else host


# -- the caller -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Caller:
    """Who is calling: ``local`` (no keys required) or a gateway key, with what it may do."""

    name: str
    keyed: bool = False
    collections: frozenset[str] | None = None  # None: every collection
    rpm: int | None = None
    races: bool = True  # False: a key made with --no-races

    @property
    def scope(self) -> str | None:
        """The ``key`` a record must carry to be this caller's; None when every record is."""
        return self.name if self.keyed else None

    def may_use(self, collection: str) -> bool:
        return self.collections is None or collection in self.collections

    def check_model(self, model) -> None:
        """403 if the request's ``model`` names a collection outside this key's scope."""
        if self.collections is None:
            return
        try:
            name, _ = parse_model_name(model)
        except PanelistError:
            return  # not a collection name at all: the request parser says what is wrong
        if name not in self.collections:
            mine = ", ".join(PREFIX + c for c in sorted(self.collections))
            raise Forbidden(
                f"key '{self.name}' may not call {PREFIX}{name}; it may call {mine}", param="model"
            )

    def owns(self, record: dict) -> bool:
        return not self.keyed or record.get("key") == self.name

    def check_owner(self, record: dict | None, what: str) -> None:
        """403 if ``record`` (a call or panel) was made by another caller."""
        if record is not None and not self.owns(record):
            raise Forbidden(
                f"{what} was made with another key; a key sees and judges only its own calls"
            )


LOCAL = Caller("local")


# -- the guard ------------------------------------------------------------------------------------
class Guard:
    """One server's checks, precomputed from its settings and port when the server is built."""

    def __init__(
        self,
        settings: Settings,
        *,
        port: int,
        bound: str = "127.0.0.1",
        keys: keystore.Keys | None = None,
        rates: RateCounter | None = None,
        max_body: int = 20 * 1024 * 1024,
    ):
        self.settings = settings
        self.keys = keys
        self.rates = rates
        self.max_body = max_body
        self._hosts, self._host_names = settings.hosts(port, bound)
        self._origins = frozenset(settings.allowed_origins)
        self._vary = {"Vary": "Origin"} if self._origins else {}

    @classmethod
    def for_server(
        cls, settings: Settings, home: Home, *, port: int, bound: str, max_body: int
    ) -> "Guard":
        return cls(
            settings,
            port=port,
            bound=bound,
            keys=keystore.Keys(home),
            rates=ratelimit.of_home(home),
            max_body=max_body,
        )

    def close(self) -> None:
        if self.rates is not None:
            self.rates.close()

    @staticmethod
    def gated(path: str) -> bool:
        return (
            path.startswith(GATED) or path in ("/v1", "/bench", "/v1beta") or path in OLLAMA_PATHS
        )

    # 1-3: host, origin, the CORS headers every reply to this request carries
    def screen(self, method: str, path: str, headers) -> dict[str, str]:
        """Refuse a foreign host or origin (403); return the CORS headers for the reply."""
        if path in OPEN_PATHS:
            return {}
        host = (headers.get("Host") or "").strip().lower()
        if host not in self._hosts and _name_of(host) not in self._host_names:
            raise Forbidden(
                f"this server does not answer for host '{host[:100]}'; add it to "
                "PANELIST_ALLOWED_HOSTS or PANELIST_PUBLIC_URL if it is yours"
            )
        origin = headers.get("Origin")
        listed = origin is not None and origin.strip().lower() in self._origins
        if origin is not None and not listed:
            seen = origin.strip().lower()
            if seen != f"http://{host}" and seen != f"https://{host}":
                raise Forbidden(
                    f"requests from origin '{origin[:100]}' are refused; a browser "
                    "app on another origin must be listed in "
                    "PANELIST_ALLOWED_ORIGINS"
                )
        elif (
            origin is None
            and headers.get("Sec-Fetch-Site") == "cross-site"
            and not (method in ("GET", "HEAD") and headers.get("Sec-Fetch-Mode") == "navigate")
        ):
            raise Forbidden(
                "cross-site requests are refused; a browser app on another origin "
                "must be listed in PANELIST_ALLOWED_ORIGINS"
            )
        if not self.gated(path):
            return {}
        if listed:
            return {
                "Access-Control-Allow-Origin": origin.strip(),
                "Vary": "Origin",
                # what a browser app may read: when to come back, and the panel to judge
                "Access-Control-Expose-Headers": "Retry-After, X-Panelist-Panel",
            }
        return self._vary

    def preflight(self, path: str, headers) -> dict[str, str] | None:
        """The headers of a 204 answering a CORS preflight, or None if this is not one we answer."""
        origin = headers.get("Origin")
        method = headers.get("Access-Control-Request-Method")
        if (
            origin is None
            or method is None
            or not self.gated(path)
            or origin.strip().lower() not in self._origins
        ):
            return None
        if not TOKEN.fullmatch(method.strip()):
            raise BadRequest("Access-Control-Request-Method is not a method name")
        asked = [
            h.strip().lower()
            for h in (headers.get("Access-Control-Request-Headers") or "").split(",")
            if h.strip()
        ]
        if len(asked) > MAX_REQUESTED_HEADERS or not all(TOKEN.fullmatch(h) for h in asked):
            raise BadRequest("Access-Control-Request-Headers must list plain header names")
        allowed = dict.fromkeys(["authorization", "content-type", *asked])
        return {
            "Access-Control-Allow-Origin": origin.strip(),
            "Access-Control-Allow-Methods": "GET, POST",
            "Access-Control-Allow-Headers": ", ".join(allowed),
            "Access-Control-Max-Age": PREFLIGHT_MAX_AGE,
            "Vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        }

    def client_address(self, peer: str, headers) -> str:
        """The address a request comes from: the peer's, or, when the peer is a trusted proxy,
        the last address of ``X-Forwarded-For`` that is not itself a trusted proxy (the ones
        before it were written by the client, and prove nothing)."""
        nets = self.settings.trusted_proxies
        if not nets or not self._trusted(_address(peer)):
            return peer
        hops = [h for h in (headers.get("X-Forwarded-For") or "").split(",") if h.strip()]
        for hop in reversed(hops):
            ip = _address(hop)
            if ip is None:  # a proxy we trust wrote garbage: it, not the client, is who we know
                return peer
            if not self._trusted(ip):
                return str(ip)
        return peer

    def _trusted(self, ip) -> bool:
        return ip is not None and any(ip in net for net in self.settings.trusted_proxies)

    def check_admin_bearer(self, headers) -> None:
        """A route a machine reads (``/metrics``): open where no admin token is set (the
        server then listens on loopback only), else only with ``Authorization: Bearer`` and
        the admin token itself (401, which never echoes what was presented)."""
        token = self.settings.admin_token
        if token is None:
            return
        scheme, _, presented = (headers.get("Authorization") or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), token.encode()
        ):
            raise Unauthorized(
                "this route needs the admin token: send 'Authorization: Bearer "
                "<PANELIST_ADMIN_TOKEN>'",
                code="admin_token_required",
                headers=CHALLENGE,
            )

    # 4: the caller
    def identify(self, path: str, headers) -> Caller:
        """The caller of a gateway route: ``local``, or the key presented (401 / 429)."""
        if not self.settings.keys_required or not self.gated(path):
            return LOCAL
        auth, header = headers.get("Authorization"), "Authorization"
        for other in ("x-api-key", "x-goog-api-key"):
            if (auth is None or not auth.strip()) and (headers.get(other) or "").strip():
                # where Anthropic's and Google's clients send their key: the same key
                auth, header = "Bearer " + headers.get(other).strip(), other
        if auth is None or not auth.strip():
            raise Unauthorized(
                "missing gateway key: send 'Authorization: Bearer pk_…' or "
                "'x-api-key: pk_…' (make one with `panelist key create NAME`)",
                code="missing_key",
                headers=CHALLENGE,
            )
        scheme, _, secret = auth.strip().partition(" ")
        secret = secret.strip()
        # each refusal names the header the key came in, and the form that header takes
        if scheme.lower() != "bearer" or not keystore.well_formed(secret):
            form = f"{header}: pk_" if header != "Authorization" else "Authorization: Bearer pk_"
            raise Unauthorized(
                f"malformed gateway key in '{header}': expected '{form}' "
                "followed by 43 letters, digits, '-' or '_'",
                code="malformed_key",
                headers=CHALLENGE_INVALID,
            )
        key = self.keys.find(secret) if self.keys is not None else None
        if key is None:
            raise Unauthorized(
                f"unknown gateway key in '{header}': it was revoked or never made "
                "here; see `panelist key list`",
                code="unknown_key",
                headers=CHALLENGE_INVALID,
            )
        if key.rpm is not None and self.rates is not None:
            wait = self.rates.admit(key.name, key.rpm)
            if wait is not None:
                after = RateCounter.retry_after(wait)
                raise TooManyRequests(
                    f"key '{key.name}' is over its {key.rpm} requests a minute; retry in {after} s",
                    code="rate_limit_exceeded",
                    headers={"Retry-After": after},
                )
        return Caller(
            key.name, keyed=True, collections=key.collections, rpm=key.rpm, races=key.races
        )

    # 5: the body
    def check_body(self, method: str, headers, cap: int | None = None) -> None:
        """415 unless a write's body is declared JSON; 413 past the size cap (``cap``: the
        route's, else the server's). A write without a body (a DELETE, a POST that needs no
        input) has nothing to declare."""
        if method not in WRITES or not self.has_body(headers):
            return
        ctype = (headers.get("Content-Type") or "").partition(";")[0].strip().lower()
        if ctype != "application/json":
            raise UnsupportedMediaType(
                "send the body as JSON with 'Content-Type: application/json'"
            )
        cap = self.max_body if cap is None else cap
        length = (headers.get("Content-Length") or "").strip()
        if length.isascii() and length.isdigit() and int(length) > cap:  # 0-9 only
            raise PayloadTooLarge(too_large(int(length), cap))

    @staticmethod
    def has_body(headers) -> bool:
        """Whether the request carries body bytes a reply must read or close the connection on."""
        length = (headers.get("Content-Length") or "0").strip()
        return headers.get("Transfer-Encoding") is not None or length != "0"
