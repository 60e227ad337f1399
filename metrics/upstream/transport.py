"""The transport under the upstream client: connections to an endpoint, kept alive and reused,
over TLS and through an HTTP proxy, each exchange bounded by its deadline and cancel event.

``Transport.exchange(origin, request, ...)`` sends one request's bytes and returns the final
response's head and whole body (read by ``metrics.upstream.http11``), or, given ``stream``, what
that reader of a 2xx body made of its pieces as they arrived; it knows nothing of JSON or of what
the body says. ``Origin`` is a parsed base URL: where to connect, through which proxy.

Invariants:

- Socket and ``ssl`` errors, and replies that are not HTTP/1.x, are translated here into one
  class of ``metrics.errors`` (``Cancelled``, ``UpstreamTimeout``, ``UpstreamUnreachable``,
  ``UpstreamBadReply``, or a proxy's refusal) and nowhere else; every message names the
  upstream (and proxy), never the request, the API key or the proxy's credentials. They name
  it by where it is (``upstream host:port``), for whoever holds the URL; ``named`` turns any
  such message into one that names the endpoint instead, for callers who must not learn where
  an endpoint lives.
- The deadline bounds the whole exchange (connect, TLS, tunnel, send, full response). One
  watchdog thread per ``Transport`` shuts down the socket of any exchange whose deadline passed
  or whose ``cancel`` event is set, so neither a silent nor a byte-dripping server can hold a
  seat past its deadline. A ``CancelFlag`` wakes the watchdog when set; a plain
  ``threading.Event`` is polled every ``TICK``.
- A pooled connection is idle, fully read and owned by nobody; a connection that errored, was
  shut down by the watchdog, was answered by HTTP/1.0 or with ``Connection: close``, sent a body
  delimited by its close, or sent bytes past the end of its answer never returns to the pool.
- A connection cut before its answer came (deadline, cancel, an answer too big, one given up
  unread) settles before it is let go, when its call carries a ``Release``: it is kept, shut,
  until the upstream ends the call or ``settle.SETTLE`` passed (``metrics.upstream.settle``),
  and only then is the release run, so a caller counting calls on the upstream counts this one
  as long as the upstream works on it. A call's release runs exactly once, when its exchange
  has ended and its connection has been pooled, closed or settled.
- A request is sent again only when a *reused* connection proves dead before any byte of the
  answer (the server's idle timer won the race), and then only once, on a fresh connection.
- Proxies (``metrics.upstream.proxy``) are read from the environment when a ``Transport`` is
  built (``proxies=`` replaces them) and resolved once per ``Origin``. An http upstream behind a
  proxy gets absolute-form requests (RFC 9112 §3.2.2); an https one a ``CONNECT`` tunnel (RFC
  9110 §9.3.6) with TLS to the upstream's own name inside it. Pooled connections are keyed by
  the proxy as well as the upstream, so a proxied and a direct connection never mix; the
  deadline and ``cancel`` cut a stalled proxy like a stalled upstream.
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from urllib.parse import quote, urlsplit

from panelist import __version__
from panelist.metrics.errors import (
    AuthFailed,
    Cancelled,
    OutOfMemoryBudget,
    UpstreamBadReply,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from panelist.metrics.upstream import http11
from panelist.metrics.upstream.http11 import Closed, Cut, NotHTTP, OverBudget, Reply, TooBig, Wire
from panelist.metrics.upstream.proxy import Proxy, environment_proxies, proxy_for
from panelist.metrics.upstream.settle import Release, Settler

USER_AGENT = f"panelist/{__version__}"
TICK = 0.02  # how often the watchdog polls a plain Event or retries a shutdown

_CANCEL, _DEADLINE = "cancel", "deadline"

# How a reused connection that the server closed while it sat idle fails: on sending the request,
# or (Closed) with no byte of an answer. Only those two cases are sent again.
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


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


def joined(flag: threading.Event, own: threading.Event) -> CancelFlag:
    """A flag set as soon as either is, for a call its set may cancel and that may be cut on
    its own. Only a ``CancelFlag`` parent is followed from then on (it wakes its wakers); one
    already set counts, a plain ``Event`` set later is not heard."""
    both = CancelFlag()
    for parent in (flag, own):
        if isinstance(parent, CancelFlag):
            parent._wakers.append(both.set)
    if flag.is_set() or own.is_set():
        both.set()
    return both


class _Call:
    """One call in flight, as the watchdog sees it."""

    __slots__ = ("deadline", "cancel", "sock", "shut", "reason", "release", "working")

    def __init__(
        self, deadline: float, cancel: threading.Event | None, release: Release | None = None
    ):
        self.deadline = deadline
        self.cancel = cancel
        self.release = release  # let go of once the exchange ended and its connection settled
        self.working = False  # the request went out whole and its answer has not all come
        self.sock: socket.socket | None = None  # what the watchdog would shut down now
        self.shut: socket.socket | None = None  # what it did shut down, so it does so once
        self.reason: str | None = None  # _CANCEL or _DEADLINE once the call is doomed


class Sent:
    """A request sent whose answer is not read yet (``Transport.begin``): ``end`` reads it,
    once; ``drop`` gives it up unread. ``fileno`` is its connection's, for a poll."""

    __slots__ = ("transport", "origin", "request", "call", "timeout", "meter", "sock", "reused")

    def __init__(
        self, transport: "Transport", origin: "Origin", request, call: _Call, timeout: float, meter
    ):
        self.transport, self.origin, self.request, self.call = transport, origin, request, call
        self.timeout, self.meter = timeout, meter
        self.sock: socket.socket | None = None
        self.reused = False

    def fileno(self) -> int:
        return self.sock.fileno() if self.sock is not None else -1

    def end(self, stream=None) -> tuple[Reply, object]:
        """The final response's head and body (``stream``: as ``Transport.exchange``'s)."""
        try:
            return self.transport._receive(self, stream)
        finally:
            self.transport._leave(self.call)

    def drop(self) -> None:
        """Give the answer up unread: the connection is closed, never reused."""
        if self.sock is not None:
            self.transport._give_back(self.origin.key, self.sock, self.call, False)
            self.sock = None
        self.transport._leave(self.call)


class Origin:
    """A parsed base URL: where to connect (``dial``: the proxy's address when there is one), its
    pool key, its name in messages, and how a request names its target (``target``)."""

    __slots__ = (
        "key",
        "scheme",
        "host",
        "port",
        "proxy",
        "dial",
        "authority",
        "host_field",
        "secrets",
        "label",
        "_path",
        "_query",
    )

    def __init__(self, base_url: str, proxies: dict):
        try:
            parts = urlsplit(base_url)
            port = parts.port
        except ValueError as exc:
            raise UpstreamUnreachable(
                f"endpoint URL {base_url!r} cannot be parsed; write it like "
                "http://127.0.0.1:8000/v1"
            ) from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamUnreachable(
                f"endpoint URL {base_url!r} must start with http:// or https:// and name a host; "
                "write it like http://127.0.0.1:8000/v1"
            )
        default = 443 if parts.scheme == "https" else 80
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, port or default
        try:
            host = f"[{self.host}]" if ":" in self.host else self.host.encode("idna").decode()
        except UnicodeError as exc:
            raise UpstreamUnreachable(
                f"endpoint URL {base_url!r} names a host that is not a "
                "valid DNS name; check the endpoint URL"
            ) from exc
        proxy = self.proxy = proxy_for(self.scheme, self.host, self.port, proxies)
        self.key = (self.scheme, self.host, self.port, proxy.key if proxy else None)
        self.dial = (proxy.host, proxy.port) if proxy else (self.host, self.port)
        self.secrets = proxy.secrets if proxy else ()  # (secret, stand-in) pairs to scrub
        self.authority = f"{host}:{self.port}".encode()  # a CONNECT's target: always with port
        self.host_field = host if self.port == default else f"{host}:{self.port}"
        self.label = f"upstream {host}:{self.port}" + (f" via {proxy.label}" if proxy else "")
        self._path, self._query = parts.path, parts.query

    def target(self, leaf: str) -> tuple[str, bytes]:
        """The request-target of ``{base path}{leaf}``, and the header fields the proxy needs
        (its credentials) when the request goes to the proxy in absolute form."""
        path = quote(self._path.rstrip("/") + leaf, safe="/%:@!$&'()*+,;=~")
        if self._query:
            path += "?" + quote(self._query, safe="/%:@!$&'()*+,;=~?")
        if self.proxy and self.scheme == "http":  # the proxy forwards it: it needs the whole URL
            return f"http://{self.host_field}{path}", self.proxy.auth
        return path, b""


class Transport:
    """Pooled keep-alive connections and their watchdog; one is shared by every thread."""

    def __init__(
        self,
        *,
        max_idle_per_host: int = 64,
        proxies: dict[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ):
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
        self._planned: float | None = None  # when the watchdog means to look next (None: never)
        self._watchdog: threading.Thread | None = None
        self._closed = False
        self._tls = tls
        self._settler = Settler()

    @property
    def closed(self) -> bool:
        return self._closed

    def origin(self, base_url: str) -> Origin:
        """``base_url`` parsed, its proxy resolved; raises ``UpstreamUnreachable`` if malformed."""
        return Origin(base_url, self.proxies)

    def exchange(
        self,
        origin: Origin,
        request: bytes | tuple,
        *,
        deadline: float,
        timeout: float,
        cancel: threading.Event | None,
        stream=None,
        meter=None,
    ) -> tuple[Reply, object]:
        """Send ``request`` (its whole bytes, or its parts in order: a big body shared by several
        requests goes out without being copied into each) by ``deadline`` (``time.monotonic()``; ``timeout``
        is what messages name); the final response's head and its whole body. ``stream(reply,
        pieces)``: reads a 2xx body instead, from an iterator of its bytes as they arrive, within
        the same deadline and cancel; what it returns takes the body's place. It must read the
        pieces to their end for the connection to be reused. ``meter``: the memory budget a
        large answer is charged to as it arrives (``http11.Wire``); what an answer took stays
        taken once it is returned (its holder gives it back), and goes back at once when the
        call fails."""
        return self.begin(
            origin, request, deadline=deadline, timeout=timeout, cancel=cancel, meter=meter
        ).end(stream)

    def begin(
        self,
        origin: Origin,
        request: bytes | tuple,
        *,
        deadline: float,
        timeout: float,
        cancel: threading.Event | None,
        meter=None,
        release: Release | None = None,
    ) -> "Sent":
        """``exchange`` in two halves: this one connects and sends ``request``; the ``Sent`` it
        returns reads the answer (``end``), and its ``fileno`` lets one thread wait on several
        answers at once. The deadline and ``cancel`` hold in between as during ``exchange``: the
        watchdog shuts the socket down, which a poll sees as readable. ``release``: let go of
        once the exchange has ended and its connection has been pooled, closed or has settled
        (see the module docstring), whatever happens."""
        call = _Call(deadline, cancel, release)
        self._enter(call)
        sent = Sent(self, origin, request, call, timeout, meter)
        try:
            self._send(sent, self._take(origin.key))
        except BaseException:
            sent.drop()
            raise
        return sent

    def _leave(self, call: _Call) -> None:
        with self._lock:
            self._inflight.discard(call)
            release, call.release = call.release, None  # the exchange lets go of it once
        if release is not None:
            release.done()

    # -- one exchange: the only place socket errors are caught -----------------------------------
    def _send(self, sent: "Sent", sock: socket.socket | None) -> None:
        """Send the request on ``sock`` (a pooled connection) or a fresh one; a pooled one found
        dead while sending (the server's idle timer won the race) is replaced once."""
        origin, call, request = sent.origin, sent.call, sent.request
        while True:
            sent.reused = sock is not None
            try:
                if sock is None:
                    sock = self._connect(origin, call)
                else:
                    sock.settimeout(max(call.deadline - time.monotonic(), 0.001))
                    call.sock = sock
                sent.sock = sock
                if isinstance(request, tuple):
                    for part in request:
                        sock.sendall(part)
                else:
                    sock.sendall(request)
                call.working = True
                return
            except _STALE as exc:
                # a reused connection is the pooled one this began with, never None
                if sent.reused and sock is not None and call.reason is None:
                    self._give_back(origin.key, sock, call, False)
                    sock = sent.sock = None
                    continue  # once: a fresh connection is never retried
                raise self._lost(sent, exc, False) from exc
            except (_ProxyRefused, OSError, ValueError) as exc:
                raise self._lost(sent, exc, False) from (
                    None if isinstance(exc, _ProxyRefused) else exc
                )

    def _receive(self, sent: "Sent", stream=None) -> tuple[Reply, object]:
        """Read the final response to a sent request (see ``exchange``); the connection goes
        back to the pool only when it may carry another request."""
        origin, call, meter = sent.origin, sent.call, sent.meter
        while True:
            keep, reading, answered, again = False, False, False, False
            sock = sent.sock
            assert sock is not None  # a request was sent on it; it goes back only below
            wire = Wire(sock, meter)
            try:
                try:
                    reply = wire.head()
                except Closed:
                    # the server had closed a reused connection before reading this request
                    again = sent.reused and call.reason is None
                    raise
                reading = True
                if stream is not None and 200 <= reply.status <= 299:
                    data = stream(reply, wire.pieces(reply))
                    keep = wire.keep
                else:
                    data, keep = wire.body(reply)
                if wire.to_close and call.reason is not None:
                    # a body read up to the close also ends when the watchdog shuts the socket
                    raise ConnectionAbortedError("shut down by the watchdog")
                answered = True
                return reply, data
            except (TooBig, OverBudget) as exc:
                raise self._lost(sent, exc, reading) from None
            except (OSError, ValueError) as exc:
                if not again:
                    raise self._lost(sent, exc, reading) from exc
            finally:
                if answered:
                    call.working = False
                if sent.sock is not None and not again:
                    self._give_back(origin.key, sent.sock, call, keep)
                    sent.sock = None
                if not answered and wire.charged:
                    meter.give(wire.charged)  # a failed answer holds nothing
            self._give_back(origin.key, sock, call, False)  # again: still sent.sock
            sent.sock = None
            self._send(sent, None)  # once, and on a fresh connection

    def _lost(self, sent: "Sent", exc: BaseException, reading: bool) -> UpstreamError:
        """The error an exchange that failed with ``exc`` raises; its connection is closed."""
        if sent.sock is not None:
            self._give_back(sent.origin.key, sent.sock, sent.call, False)
            sent.sock = None
        origin = sent.origin
        if isinstance(exc, TooBig):
            return _too_big(origin.label)
        if isinstance(exc, OverBudget):
            return _over_budget(origin.label)
        if isinstance(exc, _ProxyRefused):
            assert origin.proxy is not None  # raised only by a proxy's answer to CONNECT
            return proxy_refusal(
                origin.proxy, f"({exc.status})", origin.authority.decode(), exc.status
            )
        return self._failure(exc, origin, sent.call, sent.timeout, reading)

    def _failure(
        self, exc: BaseException, origin: Origin, call: _Call, timeout: float, reading: bool
    ) -> UpstreamError:
        label, proxy = origin.label, origin.proxy
        if call.reason == _CANCEL or self._closed:
            return Cancelled(f"call to {label} cancelled: the panel no longer needs its answer")
        if call.reason == _DEADLINE or isinstance(exc, TimeoutError):
            return UpstreamTimeout(
                f"{label} gave no complete answer within {_seconds(timeout)}; "
                "raise the seat's timeout or seat a faster model"
            )
        if isinstance(exc, socket.gaierror) and proxy:  # the proxy resolves the upstream's name
            return UpstreamUnreachable(
                f"cannot resolve the host of {proxy.label} ({exc.strerror}); check {proxy.setting}"
            )
        if isinstance(exc, ConnectionRefusedError) and proxy:
            return UpstreamUnreachable(
                f"cannot connect to {proxy.label}: connection refused; "
                f"check that the proxy is running and {proxy.setting}"
            )
        if isinstance(exc, socket.gaierror):
            return UpstreamUnreachable(
                f"cannot resolve the host of {label} ({exc.strerror}); check the endpoint URL"
            )
        if isinstance(exc, ConnectionRefusedError):
            return UpstreamUnreachable(
                f"cannot connect to {label}: connection refused; check that "
                "the server is running and the endpoint URL's port"
            )
        if isinstance(exc, ssl.SSLError):
            return UpstreamUnreachable(
                f"TLS with {label} failed ({exc.reason or exc}); check the "
                "URL's scheme and the server's certificate"
            )
        if isinstance(exc, ConnectionError):
            when = "mid-answer" if reading or isinstance(exc, Cut) else "before answering"
            return UpstreamUnreachable(
                f"{label} closed the connection {when}; try again, or check the server's logs"
            )
        if isinstance(exc, NotHTTP):  # its words are ours: nothing the server sent is repeated
            return UpstreamBadReply(
                f"{label} answered with something that is not HTTP/1.1 "
                f"({exc}); check the endpoint URL"
            )
        if isinstance(exc, ValueError):
            return UpstreamBadReply(
                f"{label} answered with something that is not HTTP/1.1 "
                f"({type(exc).__name__}); check the endpoint URL"
            )
        detail = exc.strerror if isinstance(exc, OSError) else None
        return UpstreamUnreachable(
            f"cannot reach {label} ({detail or exc}); check the endpoint URL and the network"
        )

    # -- connections ------------------------------------------------------------------------------
    def _connect(self, origin: Origin, call: _Call) -> socket.socket:
        """A fresh connection, registered with the call from its first syscall on."""
        sock = self._dial(origin, call)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if origin.scheme == "https":
                if origin.proxy is not None:
                    _tunnel(sock, origin.authority, origin.proxy.auth)
                if self._tls is None:
                    self._tls = ssl.create_default_context()  # loading CA certs is slow: once
                # handshake only once registered, so the watchdog can cut a stalled handshake
                sock = self._tls.wrap_socket(
                    sock, server_hostname=origin.host, do_handshake_on_connect=False
                )
                call.sock = sock
                sock.do_handshake()
            return sock
        except BaseException:
            with self._lock:
                call.sock = None
            sock.close()
            raise

    def _dial(self, origin: Origin, call: _Call) -> socket.socket:
        error: OSError | None = None
        host, port = origin.dial  # the proxy's address when there is one
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, port, 0, socket.SOCK_STREAM
        ):
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
            return idle.pop() if idle else None  # the most recent is least likely timed out

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
            release = call.release if call.working else None
        if release is not None:  # cut mid-call: kept until the upstream ends it
            self._settler.add(sock, release)
        else:
            sock.close()

    # -- the watchdog -----------------------------------------------------------------------------
    def _enter(self, call: _Call) -> None:
        cancel = call.cancel
        if isinstance(cancel, CancelFlag) and self.poke not in cancel._wakers:
            cancel._wakers.append(self.poke)
        with self._lock:
            self._inflight.add(call)
            if self._watchdog is None:
                self._watchdog = threading.Thread(
                    target=self._watch, name="panelist-watchdog", daemon=True
                )
                self._watchdog.start()
            if (
                self._planned is None
                or call.deadline < self._planned
                or (cancel is not None and not isinstance(cancel, CancelFlag))
            ):
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
            self._wake.notify()  # the watchdog cancels what is in flight, then exits
        self._settler.close()
        for sock in idle:
            sock.close()


# a proxy as our messages name it (``Proxy.label``): "proxy host:port"
_PROXY_LABEL = re.compile(r"\bproxy (?:\[[^\]\s]*\]|[^\s:\[\]]+):\d+")
# the path after a host, up to a space, a quote, a bracket or a clause's punctuation
_PATH = r"(?:/(?:[^\s\"'<>();,]*[^\s\"'<>();,.])?)?"


def named(text: str, base_url: str, name: str) -> str:
    """``text``, a message about a call to ``base_url``, with every way it may show where the
    upstream is (our ``upstream host:port``, its URL, host and port, in our words or the
    upstream's own) replaced by the endpoint's ``name``, and a proxy's address by "the proxy":
    what a caller reads names an endpoint as the roster does. Needs nothing but the URL, so it
    words the errors of any upstream a caller hands the seats core."""
    shown = f"endpoint '{name}'"
    text = _PROXY_LABEL.sub("the proxy", text)
    text = re.sub(re.escape(base_url.rstrip("/")) + _PATH, shown, text)
    try:
        host = urlsplit(base_url).hostname
    except ValueError:  # a URL that cannot be parsed: only its message quotes it, whole
        return text
    if not host:
        return text
    try:
        host = f"[{host}]" if ":" in host else host.encode("idna").decode()
    except UnicodeError:
        pass  # never a URL that reached an upstream; its raw form is all text can show
    where = re.compile(
        rf"(?<![\w.-])(?:upstream )?(?:https?://)?(?:[^\s/@]*@)?"
        rf"{re.escape(host)}(?::\d+)?{_PATH}(?![\w-])",
        re.I,
    )
    return where.sub(shown, text)


def _seconds(timeout: float) -> str:
    """A time limit as a person reads it: ``1 s`` for what the clock left at 0.99978."""
    return f"{round(timeout, 1) if timeout >= 0.1 else round(timeout, 3):g} s"


def _over_budget(label: str) -> OutOfMemoryBudget:
    return OutOfMemoryBudget(
        f"the answer of {label} was not read to its end: the server's "
        "memory budget for bytes in flight is used up "
        "(PANELIST_MAX_INFLIGHT_MB); raise PANELIST_MAX_INFLIGHT_MB or ask "
        "again when fewer large requests run"
    )


def _too_big(label: str) -> UpstreamBadReply:
    return UpstreamBadReply(
        f"{label} sent an answer over {http11.MAX_ANSWER_BYTES >> 20} MiB; "
        "check that the endpoint URL points at a chat completions API"
    )


# -- a tunnel through an HTTP proxy (RFC 9110 §9.3.6) ----------------------------------------------
def _tunnel(sock: socket.socket, authority: bytes, auth: bytes) -> None:
    """Ask the proxy on ``sock`` for a tunnel to ``authority`` (``host:port``); on return, the
    socket carries bytes to and from the upstream as they are. Raises ``_ProxyRefused`` for a
    status other than 2xx, and the reader's errors for anything that is not an answer."""
    sock.sendall(
        b"CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n%s\r\n"
        % (authority, authority, USER_AGENT.encode(), auth)
    )
    wire = Wire(sock)
    reply = wire.head()
    if not 200 <= reply.status <= 299:
        raise _ProxyRefused(reply.status)
    # A 2xx to CONNECT has no body, whatever its header fields say (§9.3.6), and the upstream
    # speaks only after our TLS hello: a byte here belongs to nobody we can trust.
    if wire.pos != len(wire.buf):
        raise NotHTTP("bytes after the proxy's answer to CONNECT")


class _ProxyRefused(Exception):
    """Raised when a proxy answers CONNECT with a status other than 2xx."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def proxy_refusal(proxy: Proxy, said: str, upstream: str, status: int) -> UpstreamError:
    """What a proxy's refusal (``said``: "(status) its words") means, naming the proxy and its
    variable, never its credentials; ``status`` is the proxy's, kept as ``upstream_status``."""
    if status == 407:
        if proxy.auth:
            return AuthFailed(
                f"{proxy.label} refused the credentials in {proxy.setting} {said}; "
                "check the user and password written there",
                upstream_status=status,
            )
        return AuthFailed(
            f"{proxy.label} asks for credentials {said}; write them into "
            f"{proxy.setting} as http://user:password@host:port",
            upstream_status=status,
        )
    return UpstreamUnreachable(
        f"{proxy.label} would not open a tunnel to {upstream} {said}; check that the proxy lets "
        "you reach this host and port and that the endpoint URL is right, or list the host in "
        "NO_PROXY to connect directly",
        upstream_status=status,
    )
