"""One upstream call: an OpenAI-compatible chat completion over pooled keep-alive connections.

Invariants:

- ``Upstream.chat`` either returns an ``Answer`` with non-blank text or raises one class of
  ``metrics.errors``; socket, ``ssl`` and ``json`` errors and replies that are not HTTP/1.x are
  translated here and nowhere else.
- A response is read by the small HTTP/1.1 reader at the end of this module (RFC 9112), not by
  ``http.client``, whose ``email``-based header parsing cost more CPU than the rest of a call. It
  reads a body by Content-Length, by chunked coding (extensions and trailers read and dropped) or
  up to the close; skips 1xx interim responses; and refuses a status or header line over 64 KiB,
  more than 100 header or trailer lines, and a body over ``MAX_ANSWER_BYTES``.
- ``timeout`` bounds the whole call (connect, send, full response). One watchdog thread per
  ``Upstream`` shuts down the socket of any call whose deadline passed or whose ``cancel`` event
  is set, so neither a silent nor a byte-dripping server can hold a seat past its deadline.
- A pooled connection is idle, fully read and owned by nobody; a connection that errored, was
  shut down by the watchdog, was answered by HTTP/1.0 or with ``Connection: close``, sent a body
  delimited by its close, or sent bytes past the end of its answer never returns to the pool.
- A request is sent again only when a *reused* connection proves dead before any byte of the
  answer (the server's idle timer won the race), and then only once, on a fresh connection.
- Every JSON body an upstream sends is parsed by ``jsonwire.loads``: an ``Answer`` and every
  error message hold no lone surrogate (it became U+FFFD), and JSON nested too deep is an
  ``UpstreamBadReply``, never a ``RecursionError``.
- Error messages carry the HTTP status and the upstream's own words (at most 300 characters),
  never the request body. Neither they nor an ``Answer`` ever hold the call's API key or the
  proxy's credentials, even when an upstream or a proxy echoes them: each is replaced before
  any cut.
- Proxies (``metrics.upstream.proxy``) are read from the environment when an ``Upstream`` is built
  (``proxies=`` replaces them) and resolved once per base URL. An http upstream behind a proxy
  gets absolute-form requests (RFC 9112 §3.2.2); an https one a ``CONNECT`` tunnel (RFC 9110
  §9.3.6) with TLS to the upstream's own name inside it. Pooled connections are keyed by the
  proxy as well as the upstream, so a proxied and a direct connection never mix; the deadline
  and ``cancel`` cut a stalled proxy like a stalled upstream.
"""

from __future__ import annotations

import json
import math
import re
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from urllib.parse import quote, urlsplit

from panelist import __version__
from panelist.metrics.store import jsonwire
from panelist.metrics.upstream.proxy import Proxy, environment_proxies, proxy_for
from panelist.metrics.errors import (AuthFailed, Cancelled, ContextTooLong, EmptyAnswer,
                                     ModelNotFound, PaymentRequired, RateLimited,
                                     UpstreamBadReply, UpstreamError, UpstreamServerError,
                                     UpstreamTimeout, UpstreamUnreachable)

USER_AGENT = f"panelist/{__version__}"
TICK = 0.02          # how often the watchdog polls a plain Event or retries a shutdown
MESSAGE_CHARS = 300  # how much of an upstream's own message an error repeats
MAX_ANSWER_BYTES = 32 * 1024 * 1024   # a reply larger than this is refused, not held in memory

_CANCEL, _DEADLINE = "cancel", "deadline"

# How a reused connection that the server closed while it sat idle fails: on sending the request,
# or (RemoteDisconnected) with no byte of an answer. Only those two cases are sent again.
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

_RATE = re.compile(r"rate.?limit|too many requests", re.I)
_QUOTA = re.compile(r"insufficient.quota|exceeded your current quota", re.I)
_TOO_LONG = re.compile(
    r"context.length|context.window|maximum context|context.size|reduce the length|too many tokens"
    r"|prompt is too long|input is too long|exceeds? the (?:available )?context|max_model_len",
    re.I)
# Each pattern's one group is the window the upstream states (OpenAI, vLLM, llama.cpp, Anthropic).
_WINDOW = re.compile(
    r"(?:maximum context length|context window|context length|context size|max_model_len|n_ctx)"
    r"(?: is| of|:|=)?\s*(\d[\d,]*)"
    r"|>\s*(\d[\d,]*)\s*(?:tokens?\s*)?maximum", re.I)
_TOKEN = re.compile(r"[\x21-\x7e]+")   # what a bearer token may be made of, as sent
_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.I)


@dataclass(slots=True)
class Answer:
    text: str        # choices[0].message.content, list-of-parts content joined to text
    tokens: dict     # {"prompt", "completion", "total"}: ints from "usage", or None
    seconds: float
    model: str       # the model id the upstream reported, "" if none
    # the calls the model asked of the caller's tools, in OpenAI's form:
    # {"id", "type": "function", "function": {"name", "arguments" (a JSON string)}}
    tool_calls: list = field(default_factory=list)
    finish_reason: str = "stop"


class CancelFlag(threading.Event):
    """A cancel event that wakes the watchdog the moment it is set, so calls carrying it cost no
    polling while they run. A plain ``threading.Event`` works too; it is polled every TICK."""

    def __init__(self):
        super().__init__()
        self._wakers: list = []

    def set(self) -> None:
        super().set()
        for wake in list(self._wakers):
            wake()


class _Call:
    """One call in flight, as the watchdog sees it."""

    __slots__ = ("deadline", "cancel", "sock", "shut", "reason")

    def __init__(self, deadline: float, cancel: threading.Event | None):
        self.deadline = deadline
        self.cancel = cancel
        self.sock: socket.socket | None = None   # what the watchdog would shut down now
        self.shut: socket.socket | None = None   # what it did shut down, so it does so once
        self.reason: str | None = None           # _CANCEL or _DEADLINE once the call is doomed


class _Target:
    """A parsed base URL: where to connect, the request's fixed head, its name in messages, and
    the proxy it is reached through (resolved once, here)."""

    __slots__ = ("key", "scheme", "host", "port", "head", "label", "proxy", "dial", "authority",
                 "secrets", "listing")

    def __init__(self, base_url: str, proxies):
        try:
            parts = urlsplit(base_url)
            port = parts.port
        except ValueError as exc:
            raise UpstreamUnreachable(f"endpoint URL {base_url!r} cannot be parsed; write it like "
                                      "http://127.0.0.1:8000/v1") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamUnreachable(
                f"endpoint URL {base_url!r} must start with http:// or https:// and name a host; "
                "write it like http://127.0.0.1:8000/v1")
        default = 443 if parts.scheme == "https" else 80
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, port or default
        try:
            host = f"[{self.host}]" if ":" in self.host else self.host.encode("idna").decode()
        except UnicodeError as exc:
            raise UpstreamUnreachable(f"endpoint URL {base_url!r} names a host that is not a "
                                      "valid DNS name; check the endpoint URL") from exc
        proxy = self.proxy = proxy_for(self.scheme, self.host, self.port, proxies)
        self.key = (self.scheme, self.host, self.port, proxy.key if proxy else None)
        self.dial = (proxy.host, proxy.port) if proxy else (self.host, self.port)
        self.secrets = proxy.secrets if proxy else ()
        self.authority = f"{host}:{self.port}".encode()   # a CONNECT's target: always with port
        authority = host if self.port == default else f"{host}:{self.port}"
        self.label = f"upstream {host}:{self.port}" + (f" via {proxy.label}" if proxy else "")

        def target_of(leaf: str) -> tuple[str, bytes]:
            path = quote(parts.path.rstrip("/") + leaf, safe="/%:@!$&'()*+,;=~")
            if parts.query:
                path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=~?")
            if proxy and self.scheme == "http":   # the proxy forwards it: it needs the whole URL
                return f"http://{authority}{path}", proxy.auth
            return path, b""
        path, via = target_of("/chat/completions")
        self.head = (f"POST {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {USER_AGENT}\r\n"
                     "Accept: application/json\r\nAccept-Encoding: identity\r\n"
                     "Content-Type: application/json\r\n").encode() + via
        path, via = target_of("/models")
        self.listing = (f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {USER_AGENT}"
                        "\r\nAccept: application/json\r\nAccept-Encoding: identity\r\n"
                        ).encode() + via


class Upstream:
    """Makes chat-completion calls; one instance is shared by every thread of a process."""

    def __init__(self, *, max_idle_per_host: int = 64, proxies: dict[str, str] | None = None,
                 tls: ssl.SSLContext | None = None):
        """``proxies``: ``{"http"|"https"|"all": proxy URL, "no": NO_PROXY}``; default: read from
        the environment now (``metrics.upstream.proxy``), never again. ``tls``: the context https
        upstreams are checked with; default: the system's trusted certificates."""
        self.max_idle_per_host = max_idle_per_host
        self.proxies = environment_proxies() if proxies is None else dict(proxies)
        self._lock = threading.Lock()
        self._idle: dict[tuple, list[socket.socket]] = {}
        self._inflight: set[_Call] = set()
        # the watchdog sleeps until the nearest deadline; new calls, cancels and close wake it
        self._wake = threading.Condition(self._lock)
        self._planned: float | None = None   # when the watchdog means to look next (None: never)
        self._watchdog: threading.Thread | None = None
        self._closed = False
        self._targets: dict[str, _Target] = {}
        self._tls = tls

    # -- the call ---------------------------------------------------------------------------------
    def chat(self, base_url: str, api_key: str | None, body: dict, *, timeout: float,
             cancel: threading.Event | None = None) -> Answer:
        """POST ``body`` (with ``"stream": false``) to ``{base_url}/chat/completions``."""
        started = time.monotonic()
        target = self._target(base_url)
        payload = json.dumps({**body, "stream": False}).encode()
        response, data, secrets = self._call(target, target.head, payload, api_key, started,
                                             timeout, cancel)
        if not 200 <= response.status <= 299:
            raise _refusal(response.status, response, data, target.label, secrets, target.proxy)
        return _answer(response, data, target.label, secrets, time.monotonic() - started)

    def models(self, base_url: str, api_key: str | None, *, timeout: float) -> list[dict]:
        """``GET {base_url}/models``: the entries of the endpoint's model list (each has an
        ``id``; many providers add ``context_length``, pricing and the like), as sent."""
        started = time.monotonic()
        target = self._target(base_url)
        response, data, secrets = self._call(target, target.listing, None, api_key, started,
                                             timeout, None)
        if not 200 <= response.status <= 299:
            raise _refusal(response.status, response, data, target.label, secrets, target.proxy)
        try:
            listing = jsonwire.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UpstreamBadReply(f"{target.label} listed its models with a body that is not "
                                   "JSON; check that the endpoint URL is OpenAI-compatible (it "
                                   "usually ends in /v1)",
                                   upstream_status=response.status) from exc
        entries = listing.get("data") if isinstance(listing, dict) else listing
        if not isinstance(entries, list):
            raise UpstreamBadReply(f"{target.label} answered GET /models without a 'data' list; "
                                   "check that the endpoint URL is OpenAI-compatible",
                                   upstream_status=response.status)
        return [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]

    def _target(self, base_url: str) -> _Target:
        target = self._targets.get(base_url)
        if target is None:
            target = _Target(base_url, self.proxies)
            if len(self._targets) > 1024:   # endpoints are few; this only bounds a misuse
                self._targets.clear()
            self._targets[base_url] = target
        return target

    def _call(self, target: _Target, head: bytes, payload: bytes | None, api_key: str | None,
              started: float, timeout: float, cancel) -> tuple:
        """One request with its checks and deadline: ``(response, body, secrets to scrub)``."""
        if self._closed:
            raise Cancelled(f"call to {target.label} not made: this Upstream is closed; "
                            "build a new one")
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"call to {target.label} cancelled: the panel no longer needs it")
        if timeout <= 0:
            raise UpstreamTimeout(f"{target.label} not called: the deadline had already passed; "
                                  "raise the seat's timeout")
        auth = b""
        if api_key:
            if not _TOKEN.fullmatch(api_key):
                raise AuthFailed(f"the API key for {target.label} holds spaces or characters a "
                                 "header cannot carry; check the environment variable it is read "
                                 "from")
            auth = b"Authorization: Bearer " + api_key.encode() + b"\r\n"
        # One write per request: head and body in one segment, so the server never waits for a
        # second packet (TCP_NODELAY is set) and the call costs a single send.
        if payload is None:
            request = b"%s%s\r\n" % (head, auth)
        else:
            request = b"%s%sContent-Length: %d\r\n\r\n%s" % (head, auth, len(payload), payload)

        call = _Call(started + timeout, cancel)
        self._enter(call)
        try:
            response, data = self._exchange(target, request, call, timeout)
        finally:
            with self._lock:
                self._inflight.discard(call)
        secrets = ((api_key, "[api key]"),) + target.secrets if api_key else target.secrets
        return response, data, secrets

    def _exchange(self, target: _Target, request: bytes, call: _Call,
                  timeout: float) -> tuple[_Reply, bytes]:
        """Send the request, read the whole response; the one place socket errors are caught."""
        sock = self._take(target.key)
        while True:
            reused, keep, sent, reading = sock is not None, False, False, False
            try:
                if sock is None:
                    sock = self._connect(target, call)
                else:
                    sock.settimeout(max(call.deadline - time.monotonic(), 0.001))
                    call.sock = sock
                wire = _Wire(sock)
                try:
                    sock.sendall(request)
                    sent = True
                    reply = wire.head()
                except _STALE as exc:
                    # the server had closed a reused connection before reading this request
                    stale = sent if isinstance(exc, _Closed) else not sent
                    if reused and stale and call.reason is None:
                        self._give_back(target.key, sock, call, False)
                        sock = None
                        continue   # once: a fresh connection is never retried
                    raise
                reading = True
                data, keep = wire.body(reply)
                if wire.to_close and call.reason is not None:
                    # a body read up to the close also ends when the watchdog shuts the socket
                    raise ConnectionAbortedError("shut down by the watchdog")
                return reply, data
            except _TooBig:
                raise _too_big(target.label) from None
            except _ProxyRefused as exc:
                raise _proxy_refusal(target.proxy, f"({exc.status})",
                                     target.authority.decode(), exc.status) from None
            except (OSError, ValueError) as exc:
                raise self._failure(exc, target, call, timeout, reading) from exc
            finally:
                if sock is not None:
                    self._give_back(target.key, sock, call, keep)

    def _failure(self, exc: BaseException, target: _Target, call: _Call, timeout: float,
                 reading: bool) -> UpstreamError:
        label, proxy = target.label, target.proxy
        if call.reason == _CANCEL or self._closed:
            return Cancelled(f"call to {label} cancelled: the panel no longer needs its answer")
        if call.reason == _DEADLINE or isinstance(exc, TimeoutError):
            return UpstreamTimeout(f"{label} gave no complete answer within {timeout:g} s; "
                                   "raise the seat's timeout or seat a faster model")
        if isinstance(exc, socket.gaierror) and proxy:   # the proxy resolves the upstream's name
            return UpstreamUnreachable(f"cannot resolve the host of {proxy.label} "
                                       f"({exc.strerror}); check {proxy.setting}")
        if isinstance(exc, ConnectionRefusedError) and proxy:
            return UpstreamUnreachable(f"cannot connect to {proxy.label}: connection refused; "
                                       f"check that the proxy is running and {proxy.setting}")
        if isinstance(exc, socket.gaierror):
            return UpstreamUnreachable(f"cannot resolve host {target.host!r} ({exc.strerror}); "
                                       "check the endpoint URL")
        if isinstance(exc, ConnectionRefusedError):
            return UpstreamUnreachable(f"cannot connect to {label}: connection refused; check that "
                                       "the server is running and the endpoint URL's port")
        if isinstance(exc, ssl.SSLError):
            return UpstreamUnreachable(f"TLS with {label} failed ({exc.reason or exc}); check the "
                                       "URL's scheme and the server's certificate")
        if isinstance(exc, ConnectionError):
            when = "mid-answer" if reading or isinstance(exc, _Cut) else "before answering"
            return UpstreamUnreachable(f"{label} closed the connection {when}; try again, or "
                                       "check the server's logs")
        if isinstance(exc, _NotHTTP):   # its words are ours: nothing the server sent is repeated
            return UpstreamBadReply(f"{label} answered with something that is not HTTP/1.1 "
                                    f"({exc}); check the endpoint URL")
        if isinstance(exc, ValueError):
            return UpstreamBadReply(f"{label} answered with something that is not HTTP/1.1 "
                                    f"({type(exc).__name__}); check the endpoint URL")
        return UpstreamUnreachable(f"cannot reach {label} ({exc.strerror or exc}); check the "
                                   "endpoint URL and the network")

    # -- connections ------------------------------------------------------------------------------
    def _connect(self, target: _Target, call: _Call) -> socket.socket:
        """A fresh connection, registered with the call from its first syscall on."""
        sock = self._dial(target, call)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if target.scheme == "https":
                if target.proxy is not None:
                    _tunnel(sock, target.authority, target.proxy.auth)
                if self._tls is None:
                    self._tls = ssl.create_default_context()  # loading CA certs is slow: once
                # handshake only once registered, so the watchdog can cut a stalled handshake
                sock = self._tls.wrap_socket(sock, server_hostname=target.host,
                                             do_handshake_on_connect=False)
                call.sock = sock
                sock.do_handshake()
            return sock
        except BaseException:
            with self._lock:
                call.sock = None
            sock.close()
            raise

    def _dial(self, target: _Target, call: _Call) -> socket.socket:
        error: OSError | None = None
        host, port = target.dial   # the proxy's address when there is one
        for family, kind, proto, _, address in socket.getaddrinfo(
                host, port, 0, socket.SOCK_STREAM):
            if call.reason is not None:
                break
            sock = socket.socket(family, kind, proto)
            call.sock = sock
            try:
                sock.settimeout(max(call.deadline - time.monotonic(), 0.001))
                sock.connect(address)
                return sock
            except OSError as exc:
                error = exc
                with self._lock:
                    call.sock = None
                sock.close()
        raise error or OSError(f"no address found for {host}")

    def _take(self, key: tuple) -> socket.socket | None:
        with self._lock:
            idle = self._idle.get(key)
            return idle.pop() if idle else None   # the most recent is least likely timed out

    def _give_back(self, key: tuple, sock: socket.socket, call: _Call, keep: bool) -> None:
        # The call lets go of its socket under the lock, so the watchdog never shuts down a
        # descriptor that is being closed (and could be reused by another connection) meanwhile.
        with self._lock:
            call.sock = None
            if keep and call.shut is not sock and not self._closed:
                idle = self._idle.setdefault(key, [])
                if len(idle) < self.max_idle_per_host:
                    idle.append(sock)
                    return
        sock.close()

    # -- the watchdog -----------------------------------------------------------------------------
    def _enter(self, call: _Call) -> None:
        cancel = call.cancel
        if isinstance(cancel, CancelFlag) and self.poke not in cancel._wakers:
            cancel._wakers.append(self.poke)
        with self._lock:
            self._inflight.add(call)
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="panelist-watchdog",
                                                  daemon=True)
                self._watchdog.start()
            if self._planned is None or call.deadline < self._planned or \
                    (cancel is not None and not isinstance(cancel, CancelFlag)):
                self._wake.notify()

    def poke(self) -> None:
        """Make the watchdog look at every call in flight now (a cancel flag was set)."""
        with self._lock:
            self._wake.notify()

    def _watch(self) -> None:
        with self._lock:
            while True:
                if self._closed and not self._inflight:
                    return
                now = time.monotonic()
                nearest = None
                for call in self._inflight:
                    if call.reason is None:
                        if self._closed or (call.cancel is not None and call.cancel.is_set()):
                            call.reason = _CANCEL
                        elif now >= call.deadline:
                            call.reason = _DEADLINE
                        else:
                            look = call.deadline
                            if call.cancel is not None and not isinstance(call.cancel, CancelFlag):
                                look = min(look, now + TICK)
                            nearest = look if nearest is None else min(nearest, look)
                            continue
                    sock = call.sock
                    if sock is not None and sock is not call.shut:
                        try:
                            # the plain socket's shutdown, also for TLS: it only wakes the
                            # blocked reader and leaves the TLS state to the calling thread
                            socket.socket.shutdown(sock, socket.SHUT_RDWR)
                            call.shut = sock
                            continue
                        except OSError:
                            pass
                    if call.shut is None:  # not connected yet: look again shortly
                        nearest = now + TICK if nearest is None else min(nearest, now + TICK)
                self._planned = nearest
                self._wake.wait(None if nearest is None else max(nearest - now, 0.001))

    def close(self) -> None:
        """Close every idle connection; calls still in flight end with ``Cancelled``."""
        with self._lock:
            self._closed = True
            idle = [sock for socks in self._idle.values() for sock in socks]
            self._idle.clear()
            self._wake.notify()   # the watchdog cancels what is in flight, then exits
        for sock in idle:
            sock.close()


def _too_big(label: str) -> UpstreamBadReply:
    return UpstreamBadReply(f"{label} sent an answer over {MAX_ANSWER_BYTES >> 20} MiB; check "
                            "that the endpoint URL points at a chat completions API")


# -- a tunnel through an HTTP proxy (RFC 9110 §9.3.6) ----------------------------------------------
def _tunnel(sock: socket.socket, authority: bytes, auth: bytes) -> None:
    """Ask the proxy on ``sock`` for a tunnel to ``authority`` (``host:port``); on return, the
    socket carries bytes to and from the upstream as they are. Raises ``_ProxyRefused`` for a
    status other than 2xx, and the reader's errors for anything that is not an answer."""
    sock.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n%s\r\n"
                 % (authority, authority, USER_AGENT.encode(), auth))
    wire = _Wire(sock)
    reply = wire.head()
    if not 200 <= reply.status <= 299:
        raise _ProxyRefused(reply.status)
    # A 2xx to CONNECT has no body, whatever its header fields say (§9.3.6), and the upstream
    # speaks only after our TLS hello: a byte here belongs to nobody we can trust.
    if wire.pos != len(wire.buf):
        raise _NotHTTP("bytes after the proxy's answer to CONNECT")


class _ProxyRefused(Exception):
    """Raised when a proxy answers CONNECT with a status other than 2xx."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def _proxy_refusal(proxy: Proxy, said: str, upstream: str, status: int) -> UpstreamError:
    """What a proxy's refusal (``said``: "(status) its words") means, naming the proxy and its
    variable, never its credentials; ``status`` is the proxy's, kept as ``upstream_status``."""
    if status == 407:
        if proxy.auth:
            return AuthFailed(f"{proxy.label} refused the credentials in {proxy.setting} {said}; "
                              "check the user and password written there", upstream_status=status)
        return AuthFailed(f"{proxy.label} asks for credentials {said}; write them into "
                          f"{proxy.setting} as http://user:password@host:port",
                          upstream_status=status)
    return UpstreamUnreachable(
        f"{proxy.label} would not open a tunnel to {upstream} {said}; check that the proxy lets "
        "you reach this host and port and that the endpoint URL is right, or list the host in "
        "NO_PROXY to connect directly", upstream_status=status)


# -- reading a reply ------------------------------------------------------------------------------
def _answer(response: _Reply, data: bytes, label: str, secrets: tuple,
            seconds: float) -> Answer:
    up = {"upstream_status": response.status}   # every error below read a 2xx reply
    try:
        reply = jsonwire.loads(data)
    except ValueError as exc:   # not JSON, not UTF-8, or nested deeper than jsonwire allows
        why = str(exc) if isinstance(exc, jsonwire.JSONRefused) else "not UTF-8"
        raise UpstreamBadReply(
            f"{label} answered {response.status} with a body that is not JSON we can read ({why}; "
            f"it starts: {_snippet(data, secrets)}); "
            "check that the endpoint URL is OpenAI-compatible (it usually ends in /v1)",
            **up) from exc
    if not isinstance(reply, dict):
        raise UpstreamBadReply(f"{label} answered {response.status} with JSON that is not an "
                               "object; check that the endpoint URL is OpenAI-compatible",
                               **up)
    error = reply.get("error")
    if error:
        message, codes, error = _error_parts(reply, data, secrets)
        raise _classified(response.status, message, codes, error, response, label,
                          fallback=UpstreamServerError,
                          advice="try again later or seat another model")
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise UpstreamBadReply(f"{label} answered {response.status} without choices[0].message; "
                               "check that the endpoint serves OpenAI chat completions", **up)
    text = _text(message.get("content"))
    calls = _tool_calls(message.get("tool_calls"), label, up)
    finish = choice.get("finish_reason")
    finish = _trim(_scrub(finish, secrets)) if isinstance(finish, str) else None
    if not text.strip() and not calls:
        why = f" (finish_reason {finish!r})" if finish else ""
        advice = ("raise max_tokens: the answer was cut off before any text" if finish == "length"
                  else "try again, or seat another model")
        raise EmptyAnswer(f"{label} answered with no text{why}; {advice}", **up)
    usage = reply.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens = {"prompt": _count(usage.get("prompt_tokens")),
              "completion": _count(usage.get("completion_tokens")),
              "total": _count(usage.get("total_tokens"))}
    model = reply.get("model")
    model = model if isinstance(model, str) else ""
    if secrets:   # an upstream that echoes the key must not have it logged or served
        text, model = _scrub(text, secrets), _scrub(model, secrets)
        calls = jsonwire.loads(_scrub(jsonwire.dumps(calls), secrets)) if calls else calls
    finish = finish or ("tool_calls" if calls else "stop")
    return Answer(text, tokens, seconds, model, calls, finish)


def _tool_calls(raw, label: str, up: dict) -> list[dict]:
    """The tool calls of an answer, normalised to OpenAI's form; a malformed one is refused
    whole, since running half of what a model asked for is worse than running none."""
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        raise UpstreamBadReply(f"{label} answered with 'tool_calls' that is not a list; check "
                               "that the endpoint serves OpenAI chat completions", **up)
    calls = []
    for i, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            raise UpstreamBadReply(f"{label} answered with tool call {i} without a function "
                                   "name; check that the endpoint serves OpenAI chat "
                                   "completions", **up)
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        elif not isinstance(args, str):   # some servers send the object itself
            args = jsonwire.dumps(args)
        cid = call.get("id")
        # an id is how a conversation finds the seat that made the call: never reuse one
        cid = cid if isinstance(cid, str) and cid else f"call_{uuid.uuid4().hex[:24]}"
        calls.append({"id": cid, "type": "function",
                      "function": {"name": name, "arguments": args}})
    return calls


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for part in content:   # content parts: [{"type": "text", "text": ...}, ...]
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "".join(parts)


def _count(value) -> int | None:
    return value if type(value) is int else None


# -- classifying a refusal ------------------------------------------------------------------------
def _refusal(status: int, response: _Reply | None, data: bytes, label: str,
             secrets: tuple = (), proxy: Proxy | None = None) -> UpstreamError:
    """The error a non-2xx reply means; it carries the reply's status as ``upstream_status``."""
    message, codes, error = _error_parts(None, data, secrets)
    said = f"({status}) {message}"
    up = {"upstream_status": status}
    if status == 407 and proxy is not None:   # only a proxy asks for proxy credentials
        return _proxy_refusal(proxy, said, label, status)
    if status in (429, 403) and _QUOTA.search(codes):
        return PaymentRequired(f"{label} refused for quota or billing {said}; check the "
                               "account's plan and credit for this model", **up)
    if status == 429:
        wait = _retry_after(response, message)
        then = f"; retry after {wait:g} s" if wait is not None else "; retry later"
        return RateLimited(f"{label} rate-limited the call {said}{then}, or lower this model's "
                           "concurrency", retry_after=wait, **up)
    if status == 402:
        return PaymentRequired(f"{label} wants payment {said}; check the account's plan and "
                               "credit for this model", **up)
    if status in (401, 403):
        return AuthFailed(f"{label} refused the API key {said}; check the endpoint's key (the "
                          "environment variable it names)", **up)
    if status in (400, 413):
        return _classified(status, message, codes, error, response, label,
                           fallback=UpstreamBadReply,
                           advice="check the parameters passed on to this model")
    if status in (404, 410):   # 410: the provider withdrew the model or the route
        return ModelNotFound(f"{label} answered {said}; the served model id may be wrong or "
                             "withdrawn (model not found), or the endpoint URL may lack its /v1 "
                             "prefix", **up)
    if 500 <= status <= 599:
        return UpstreamServerError(f"{label} failed {said}; try again later or seat another "
                                   "model", **up)
    return UpstreamBadReply(f"{label} rejected the request {said}; check the parameters passed "
                            "on to this model", **up)


def _classified(status: int, message: str, codes: str, error: dict, response, label: str, *,
                fallback: type[UpstreamError], advice: str) -> UpstreamError:
    """An error body read for what it says: quota, rate limit or context length, else fallback."""
    said = f"({status}) {message}"
    if _QUOTA.search(codes):
        return PaymentRequired(f"{label} refused for quota or billing {said}; check the "
                               "account's plan and credit for this model",
                               upstream_status=status)
    if 200 <= status <= 299 and _RATE.search(codes):
        wait = _retry_after(response, message)
        return RateLimited(f"{label} rate-limited the call {said}; retry later", retry_after=wait,
                           upstream_status=status)
    if _TOO_LONG.search(codes):
        window = _window(codes, error)
        size = f" of {window} tokens" if window else ""
        return ContextTooLong(f"{label} says the prompt exceeds its context window{size} {said}; "
                              "shorten the prompt or seat a model with a larger window",
                              window=window, upstream_status=status)
    return fallback(f"{label} answered with an error {said}; {advice}", upstream_status=status)


def _error_parts(reply, data: bytes, secrets: tuple) -> tuple[str, str, dict]:
    """The upstream's message to show (scrubbed, trimmed); its code, type and whole message, to
    match rules against; and its error object."""
    if reply is None:
        try:
            reply = jsonwire.loads(data)
        except ValueError:   # not JSON, not UTF-8, or nested too deep: shown as a snippet
            reply = None
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
    elif isinstance(error, str):
        message, error = error, {}
    elif isinstance(reply, dict):   # vLLM and others put the fields at the top level
        message, error = reply.get("message") or reply.get("detail"), reply
    else:
        message, error = None, {}
    if not isinstance(message, str):
        message = json.dumps(message) if message is not None else _snippet(data, secrets)
    message = _scrub(message, secrets)
    codes = " ".join(str(error.get(k) or "") for k in ("code", "type")) + " " + message
    return _trim(message), codes, error


def _window(text: str, error: dict) -> int | None:
    if type(error.get("n_ctx")) is int:   # llama.cpp states the window as a field
        return error["n_ctx"]
    match = _WINDOW.search(text)
    if match:
        return int((match.group(1) or match.group(2)).replace(",", ""))
    return None


def _retry_after(response, message: str) -> float | None:
    """Seconds to wait: Retry-After (seconds or HTTP-date, RFC 9110 §10.2.3), else the message."""
    value = response.headers.get("retry-after") if response is not None else None
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                date = parsedate_to_datetime(value)
                seconds = date.timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                seconds = math.nan
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    match = _TRY_AGAIN.search(message)
    if match:
        amount = float(match.group(1))
        return amount / 1000 if match.group(2).lower() == "ms" else amount
    return None


def _snippet(data: bytes, secrets: tuple) -> str:
    """The start of a body that is not an error object, whitespace folded, secrets scrubbed."""
    for secret, hidden in secrets:   # in the bytes, before a cut could leave a piece behind
        data = data.replace(secret.encode(), hidden.encode())
    text = " ".join(data[:4 * MESSAGE_CHARS].decode("utf-8", "replace").split())
    return _trim(text) or "an empty body"


def _scrub(text: str, secrets: tuple) -> str:
    """``text`` with each (secret, stand-in) pair replaced, the API key as "[api key]".
    Always before trimming, so a cut can never leave part of a secret behind."""
    for secret, hidden in secrets:
        text = text.replace(secret, hidden)
    return text


def _trim(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "…"



# -- the HTTP/1.1 response reader (RFC 9112) -------------------------------------------------------
# http.client's limits: a longer status, header, chunk-size or trailer line is refused, and so are
# more header (or trailer) lines than MAX_HEADERS
MAX_LINE = 65536
MAX_HEADERS = 100
_RECV = 65536        # bytes asked of the socket at once
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class _Closed(ConnectionResetError):
    """Raised when the connection ends before any byte of an answer: on a reused connection, the
    server closed it while it sat idle (the one case a request is sent again)."""


class _Cut(ConnectionError):
    """Raised when the connection ends after part of an answer."""


class _NotHTTP(ValueError):
    """Raised when the bytes received do not parse as an HTTP/1.x response; its message is ours
    (it never repeats what the server sent, which could echo the API key)."""


class _TooBig(Exception):
    """Raised when an answer's body would exceed MAX_ANSWER_BYTES."""


class _Reply:
    """A final response's head: status, and header fields by lower-cased name (repeated fields
    joined with ", ", RFC 9110 §5.3)."""

    __slots__ = ("status", "headers", "will_close")

    def __init__(self, status: int, headers: dict[str, str], will_close: bool):
        self.status = status
        self.headers = headers
        self.will_close = will_close   # HTTP/1.0 or Connection: close


class _Wire:
    """Buffered reading of one response from a socket: ``head()`` then ``body(reply)``."""

    __slots__ = ("sock", "buf", "pos", "got", "to_close")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""    # received and not yet consumed from self.pos on
        self.pos = 0
        self.got = False  # whether any byte arrived at all
        self.to_close = False   # whether the body was read up to the close

    def _fill(self) -> bool:
        """Receive more; False at the end of the stream."""
        chunk = self.sock.recv(_RECV)
        if not chunk:
            return False
        self.got = True
        self.buf = self.buf[self.pos:] + chunk if self.pos < len(self.buf) else chunk
        self.pos = 0
        return True

    def _ended(self) -> ConnectionError:
        return _Cut("the connection ended mid-answer") if self.got else \
            _Closed("the connection ended before an answer")

    def line(self) -> bytes:
        """The next line without its CRLF; a bare LF ends a line too (RFC 9112 §2.2)."""
        end = self.buf.find(b"\n", self.pos)
        while end < 0:
            seen = len(self.buf) - self.pos
            if seen > MAX_LINE:
                raise _NotHTTP("a line over 64 KiB")
            if not self._fill():
                raise self._ended()
            end = self.buf.find(b"\n", self.pos + seen)
        start, self.pos = self.pos, end + 1
        if end - start > MAX_LINE:
            raise _NotHTTP("a line over 64 KiB")
        if end > start and self.buf[end - 1] == 13:   # CR
            end -= 1
        return self.buf[start:end]

    def exact(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        buf, pos = self.buf, self.pos
        have = len(buf) - pos
        if have >= n:
            self.pos = pos + n
            return buf[pos:pos + n]
        out = bytearray(n)
        out[:have] = memoryview(buf)[pos:]
        self.buf, self.pos = b"", 0
        view = memoryview(out)
        while have < n:
            got = self.sock.recv_into(view[have:], min(n - have, 1 << 20))
            if not got:
                raise _Cut("the connection ended mid-answer")
            self.got = True
            have += got
        return bytes(out)

    def rest(self) -> bytes:
        """Everything up to the close."""
        self.to_close = True
        parts = [self.buf[self.pos:]]
        size = len(parts[0])
        self.buf, self.pos = b"", 0
        while size <= MAX_ANSWER_BYTES:
            chunk = self.sock.recv(_RECV)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
            size += len(chunk)
        raise _TooBig

    def head(self) -> _Reply:
        """Status line and header fields of the final response; 1xx interim ones are skipped
        (RFC 9110 §15.2: a client must accept any number of them before the final one)."""
        while True:
            line = self.line()
            version, _, rest = line.partition(b" ")
            code = rest.lstrip(b" ")[:3]
            if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or \
                    not code.isdigit() or rest.lstrip(b" ")[3:4] not in (b"", b" "):
                raise _NotHTTP("a status line that is not HTTP/1.x")
            status = int(code)
            headers: dict[str, str] = {}
            name = None
            for _ in range(MAX_HEADERS + 1):
                line = self.line()
                if not line:
                    break
                if line[0] in (32, 9):   # obs-fold (RFC 9112 §5.2): a continuation, joined by SP
                    if name is not None:
                        headers[name] += " " + line.strip(b" \t").decode("latin-1")
                    continue
                field, colon, value = line.partition(b":")
                if not colon:
                    continue   # not a field line: nothing we need can be in it
                name = field.strip(b" \t").lower().decode("latin-1")
                text = value.strip(b" \t").decode("latin-1")
                headers[name] = headers[name] + ", " + text if name in headers else text
            else:
                raise _NotHTTP(f"more than {MAX_HEADERS} header lines")
            if 100 <= status <= 199 and status != 101:
                continue
            # HTTP/1.0 keep-alive is not worth its rules: such a connection is simply not reused
            will_close = version == b"HTTP/1.0"
            if not will_close and "connection" in headers:
                tokens = headers["connection"].lower().split(",")
                will_close = "close" in [t.strip() for t in tokens]
            return _Reply(status, headers, will_close)

    def body(self, reply: _Reply) -> tuple[bytes, bool]:
        """The body (RFC 9112 §6.3), and whether the connection may carry another request."""
        status, headers = reply.status, reply.headers
        keep = not reply.will_close
        if status in (101, 204, 304):   # never a body; a 101 switched away from HTTP
            return b"", keep and status != 101
        coding = headers.get("transfer-encoding")
        if coding is not None:
            if coding.rpartition(",")[2].strip().lower() != "chunked":
                return self.rest(), False   # a response without chunked last: up to the close
            data = self.chunked()
            # a Content-Length beside Transfer-Encoding is ignored, the connection not reused
            keep = keep and "content-length" not in headers
        elif (length := headers.get("content-length")) is not None:
            values = {v.strip() for v in length.split(",")}   # repeated, all equal, is allowed
            size = values.pop() if len(values) == 1 else ""
            if not size.isdigit() or not size.isascii():
                raise _NotHTTP("a Content-Length that is not one number")
            if len(size) > 15 or int(size) > MAX_ANSWER_BYTES:
                raise _TooBig
            data = self.exact(int(size))
        else:
            return self.rest(), False
        # bytes past the answer's end mean the next answer's start cannot be trusted
        return data, keep and self.pos == len(self.buf)

    def chunked(self) -> bytes:
        """A chunked body (RFC 9112 §7.1): extensions ignored, the trailer section dropped."""
        parts = []
        size = 0
        while True:
            line = self.line()
            digits = line.partition(b";")[0].strip(b" \t")
            if not _HEX.fullmatch(digits):
                raise _NotHTTP("a chunk size that is not hexadecimal")
            n = int(digits, 16)
            if n == 0:
                break
            size += n
            if size > MAX_ANSWER_BYTES:
                raise _TooBig
            parts.append(self.exact(n))
            if self.line():
                raise _NotHTTP("a chunk longer than its size")
        for _ in range(MAX_HEADERS + 1):
            if not self.line():
                return b"".join(parts)
        raise _NotHTTP(f"more than {MAX_HEADERS} trailer lines")
