"""Which HTTP proxy, if any, an upstream is reached through.

The settings are the conventional environment variables, read when an ``Upstream`` is built:
``HTTPS_PROXY`` for https upstreams, ``HTTP_PROXY`` for http ones, ``ALL_PROXY`` for either when
its own is unset, and ``NO_PROXY`` for hosts reached directly. Each may be written lower-case; the
lower-case one wins, and an empty lower-case one switches its upper-case twin off (the rules
curl and Python's urllib share).

Invariants:

- A ``Proxy`` never shows its credentials: ``label`` is ``proxy host:port``, and every message
  built here names the variable and the host, never the URL as written.
- ``NO_PROXY`` holds entries separated by commas or spaces: ``*`` (every host), a host name
  (that host and every name under it; a leading dot changes nothing), an IP address, a CIDR
  block (``10.0.0.0/8``), each optionally with ``:port`` (``[::1]:8080`` for IPv6) to match only
  that port. Loopback gets no special case: like curl, ``127.0.0.1`` and ``localhost`` go
  through the proxy unless ``NO_PROXY`` lists them.
- Only ``http://`` proxies are spoken to (a URL without a scheme is taken as one). Any other
  scheme refuses the call with a message, rather than quietly going around the proxy.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from panelist.metrics.errors import UpstreamUnreachable

_KINDS = ("http", "https", "all", "no")
_HIDDEN = "[proxy credentials]"


def environment_proxies(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The proxy settings in ``environ`` (default: the process environment) as
    ``{"http"|"https"|"all": proxy URL, "no": NO_PROXY}``, keeping only those set."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name, value in environ.items():  # any spelling first; lower-case ones override below
        kind = name.lower()[:-6] if name.lower().endswith("_proxy") else None
        if kind in _KINDS and value and name != name.lower():
            found[kind] = value
    if "REQUEST_METHOD" in environ:
        # Under CGI a request's "Proxy:" header arrives as HTTP_PROXY (httpoxy): never trust it.
        found.pop("http", None)
    for name, value in environ.items():
        kind = name[:-6] if name.endswith("_proxy") and name == name.lower() else None
        if kind in _KINDS:
            if value:
                found[kind] = value
            else:
                found.pop(kind, None)
    return found


class Proxy:
    """An HTTP proxy: where to connect, the header that authenticates us, and what to hide."""

    __slots__ = ("host", "port", "setting", "label", "auth", "secrets", "key")

    def __init__(self, url: str, setting: str):
        self.setting = setting  # the variable it came from, e.g. HTTPS_PROXY, for messages
        where = f"the proxy in {setting}"
        text = url.strip()
        if "://" not in text:
            text = "http://" + text  # "proxy.example:3128" is how many people write it
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise UpstreamUnreachable(
                f"{where} cannot be parsed; write it like "
                "http://proxy.example:3128 (or http://user:password@"
                "proxy.example:3128)"
            ) from None
        if parts.scheme != "http":
            raise UpstreamUnreachable(
                f"{where} is a {parts.scheme}:// proxy; upstreams are reached through http:// "
                f"proxies only: point {setting} at one, or list the host in NO_PROXY"
            )
        if not parts.hostname:
            raise UpstreamUnreachable(
                f"{where} names no host; write it like http://proxy.example:3128"
            )
        self.host, self.port = parts.hostname, port or 80
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.label = f"proxy {shown}:{self.port}"
        self.key = (self.host, self.port, parts.username, parts.password)
        self.auth = b""
        self.secrets: tuple[tuple[str, str], ...] = ()
        if parts.username is not None or parts.password is not None:
            user, password = unquote(parts.username or ""), unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self.auth = b"Proxy-Authorization: Basic " + token.encode() + b"\r\n"
            # What an echoing proxy or upstream could repeat back, the longest first so a shorter
            # one never leaves part of a longer one behind. The secret alone (the password, or
            # a user name that is a token) is hidden only from 8 characters on: a shorter one
            # would mangle ordinary words in answers.
            hidden = {token}
            secret = password or user
            if password:
                hidden |= {f"{user}:{password}", parts.netloc.rpartition("@")[0]}
            if len(secret) >= 8:
                hidden.add(secret)
            self.secrets = tuple((s, _HIDDEN) for s in sorted(hidden, key=len, reverse=True))


def proxy_for(scheme: str, host: str, port: int, proxies: Mapping[str, str]) -> Proxy | None:
    """The proxy a call to ``scheme://host:port`` goes through, or None to connect directly."""
    url = proxies.get(scheme)
    setting = f"{scheme.upper()}_PROXY"
    if not url:
        url, setting = proxies.get("all"), "ALL_PROXY"
    if not url or bypassed(host, port, proxies.get("no") or ""):
        return None
    return Proxy(url, setting)


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``no_proxy`` (NO_PROXY's value) lists ``host`` (lower-case, IPv6 unbracketed)."""
    host = host.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        address = None
    for entry in no_proxy.replace(",", " ").split():
        entry = entry.lower()
        if entry == "*":
            return True
        name, only = _split_port(entry)
        if only is not None and only != port:
            continue
        name = name.lstrip(".").rstrip(".")
        if not name:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass  # a name, not an address: never matches an address
        elif host == name or host.endswith("." + name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 address → (host, port)."""
    if entry.startswith("["):
        inside, _, after = entry[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
        return inside, int(port) if port.isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None
