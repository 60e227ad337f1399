"""The one client of a running gateway: what ``panelist ask|verdict|pending --url`` and
``panelist mcp`` send, and how its failures read.

Invariants:

* Loopback (127.0.0.0/8, ::1, ``localhost``) is always reached directly, whatever the proxy
  variables say: a proxy elsewhere could never reach this machine's loopback. Any other host
  follows ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` (read from the process environment when a
  ``Remote`` is built, as urllib reads them).
* One key variable, ``PANELIST_KEY`` (``PANELIST_API_KEY``, its older name, when it is unset). The
  key is sent only in the ``Authorization`` header: never in an error, a reply or a log line.
* Every failure leaves here as a ``PanelistError`` whose message says what to do: a refusal of
  the gateway as the class of its status (its code, ``Retry-After`` and extra fields such as
  ``seats`` kept), anything else on the way (nothing listening, no answer in time, something
  that is not a gateway) as ``GatewayUnreachable``.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from panelist import __version__
from panelist.metrics.errors import (
    AllSeatsFailed,
    BadRequest,
    Conflict,
    Forbidden,
    GatewayUnreachable,
    MethodNotAllowed,
    NotFound,
    PanelistError,
    PayloadTooLarge,
    RequestTimeout,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
)
from panelist.metrics.store import jsonwire

DEFAULT_URL = "http://127.0.0.1:8123"  # where `panelist gateway` listens unless told otherwise
URL_VARIABLE = "PANELIST_URL"
KEY_VARIABLE = "PANELIST_KEY"
OLD_KEY_VARIABLE = "PANELIST_API_KEY"  # what `ask --url` read before; still read when unset
ASK_TIMEOUT = 3600.0  # a panel ends by its own deadline (panel_timeout); this only bounds a hang
QUICK_TIMEOUT = 60.0

# a refusal of the gateway becomes the error it was raised as there (wire status → class)
_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    408: RequestTimeout,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: TooManyRequests,
    503: Unavailable,
}
_OWN_FIELDS = ("message", "type", "param", "code")  # the rest of an error object are details


@dataclass(frozen=True)
class Caller:
    """Who calls the gateway, for the words of its errors: the command line and the MCP server
    are told the URL in different ways and list pending calls differently."""

    agent: str  # the User-Agent product
    who: str  # "this command", "this server"
    url_setting: str  # where the URL comes from
    pending: str  # where a call that outlived its wait shows up


CLI = Caller("panelist-cli", "this command", "--url", "`panelist pending --url URL`")
MCP = Caller("panelist-mcp", "this server", URL_VARIABLE, "the pending tool")


def key_from(env: Mapping[str, str]) -> tuple[str, str | None]:
    """The gateway key in ``env`` and the variable it came from (``PANELIST_KEY`` when none)."""
    for name in (KEY_VARIABLE, OLD_KEY_VARIABLE):
        if env.get(name):
            return name, env[name]
    return KEY_VARIABLE, None


def connect(url: str, caller: Caller, env: Mapping[str, str]) -> "Remote":
    """The gateway at ``url``, called with the key ``env`` holds, if any."""
    key_name, key = key_from(env)
    return Remote(url, key, key_name=key_name, caller=caller)


class Remote:
    """A running Panelist gateway: JSON over HTTP. The key lives only in ``_headers``."""

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        key_name: str = KEY_VARIABLE,
        caller: Caller = CLI,
    ):
        self.caller = caller
        self.base = check_url(url, caller)
        parts = urlsplit(self.base)
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.key_name = key_name
        self.keyed = bool(key)
        self._headers = {
            "Accept": "application/json",
            "User-Agent": f"{caller.agent}/{__version__}",
        }
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        proxies = {} if is_loopback(self.host) else urllib.request.getproxies()
        via = proxies.get(parts.scheme)
        self.proxy = _shown(via) if via and not urllib.request.proxy_bypass(self.host) else None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))

    def get(self, path: str, timeout: float = QUICK_TIMEOUT) -> dict:
        return self._call(urllib.request.Request(self.base + path, headers=self._headers), timeout)

    def post(self, path: str, body: dict, timeout: float = QUICK_TIMEOUT) -> dict:
        headers = dict(self._headers, **{"Content-Type": "application/json"})
        return self._call(
            urllib.request.Request(
                self.base + path, data=jsonwire.encode(body), headers=headers, method="POST"
            ),
            timeout,
        )

    def _call(self, req: urllib.request.Request, timeout: float) -> dict:
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            with exc:
                raise self._refused(exc.code, exc.read(), exc.headers) from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise self._unreachable(getattr(exc, "reason", exc), timeout) from exc
        return self._json(raw)

    def _unreachable(self, reason, timeout: float) -> GatewayUnreachable:
        where = f"the gateway at {self.base}"
        if self.proxy:
            where += f" through the proxy {self.proxy}"
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return GatewayUnreachable(
                f"{where} did not answer within {timeout:.0f} s; it may still be working: see "
                f"{self.caller.pending}, or check its log"
            )
        if isinstance(reason, ConnectionRefusedError) and not self.proxy:
            return GatewayUnreachable(
                f"no Panelist gateway is running at {self.base} "
                f"(connection refused); {self.start_hint()}"
            )
        check = "the proxy variables (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) and " if self.proxy else ""
        return GatewayUnreachable(
            f"cannot reach {where}: {reason}; check {check}"
            f"{self.caller.url_setting} and that the gateway runs there"
        )

    def start_hint(self) -> str:
        """The exact command that starts a gateway where the URL points."""
        setting = self.caller.url_setting
        if not is_loopback(self.host) or self.base.startswith("https:"):
            return (
                f"start the gateway on {self.host}, or give {setting} where one runs "
                f"(a local one: `panelist gateway`, default {DEFAULT_URL})"
            )
        args = "" if self.port == 8123 else f" --port {self.port}"
        return (
            f"start it with `panelist gateway{args}` (from a checkout: `python gateway.py"
            f"{args}`), or give {setting} where a gateway runs"
        )

    def _json(self, raw: bytes) -> dict:
        try:
            data = jsonwire.loads(raw)
        except (ValueError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict):
            raise GatewayUnreachable(
                f"{self.base} answered with something that is not a "
                f"Panelist reply; check that {self.caller.url_setting} "
                "names a Panelist gateway"
            )
        return data

    def _refused(self, status: int, raw: bytes, headers) -> PanelistError:
        try:
            error = jsonwire.loads(raw)["error"]
            message = error["message"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError):
            error, message = {}, f"HTTP {status} with no Panelist error in the body"
        if not isinstance(error, dict):
            error = {}
        text = f"the gateway at {self.base} refused ({status}): {message}"
        who = self.caller.who
        if status == 401:
            text += (
                f"; the {self.key_name} given to {who} was refused: set it to a live key "
                "(`panelist key list`)"
                if self.keyed
                else f"; set {KEY_VARIABLE} in the environment of {who} to a gateway key "
                "(make one with `panelist key create NAME`)"
            )
        elif status in (429, 503) and headers.get("Retry-After"):
            text += f" (try again in {headers['Retry-After']} s)"
        code = error.get("code") if isinstance(error.get("code"), str) else None
        details = {k: v for k, v in error.items() if k not in _OWN_FIELDS}
        kept = {"Retry-After": headers["Retry-After"]} if headers.get("Retry-After") else {}
        if status == 502 and isinstance(details.get("seats"), list):
            return AllSeatsFailed(
                text, details["seats"], code=code or "all_seats_failed", headers=kept
            )
        return _BY_STATUS.get(status, PanelistError)(text, code=code, headers=kept, details=details)


def check_url(url: str, caller: Caller = CLI) -> str:
    """``url`` as the base the gateway's routes hang from (``/v1`` and ``/`` trimmed);
    BadRequest naming where it came from when it is not an http(s) URL with a host."""
    base = (url or "").strip().rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    try:
        parts = urlsplit(base)
        parts.port  # raises on a port that is not a number
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
    ):
        where = "--url or PANELIST_URL" if caller is MCP else caller.url_setting
        raise BadRequest(
            f"'{_shown(str(url)[:200])}' ({where}) is not a gateway URL; "
            f"give one like {DEFAULT_URL} (http or https, a host, an optional "
            "port, no user:password)"
        )
    return base


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _shown(url: str) -> str:
    """``url`` with whatever precedes an ``@`` hidden: it may be a password."""
    if "@" not in url:
        return url
    head, _, rest = url.partition("//")
    return (head + "//" if rest else "") + "…@" + url.rsplit("@", 1)[1]
