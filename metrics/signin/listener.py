"""The one-shot loopback listener that receives a provider's redirect after sign-in.

Invariants:

* It binds 127.0.0.1 only (never a wildcard address), on the port asked for or one the system
  picks, so nothing off this machine can reach it.
* It reads request heads only (at most ``MAX_HEAD`` bytes, each connection under its own short
  deadline) and answers each with a short plain-text page and ``Connection: close``.
* A request for another path (a browser's ``/favicon.ico``, a stray probe) gets 404 and the
  listener keeps waiting. The first request for ``/callback`` ends the wait, whatever it
  carries: the code when its state is the one this sign-in sent, else a refusal. A callback
  with a foreign state is a redirect this sign-in did not start (a stale tab, or a forged link),
  so the flow stops rather than waiting on, and the user starts again.
* ``wait`` returns by its deadline: ``UpstreamTimeout`` when no callback came by then. ``close``
  (from another thread too) ends a wait at once with ``Cancelled``.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import parse_qs, urlsplit

from panelist.metrics.errors import (
    BadRequest,
    Cancelled,
    Forbidden,
    UpstreamError,
    UpstreamTimeout,
)
from panelist.metrics.plaintext import visible

PATH = "/callback"
MAX_HEAD = 16 * 1024
CONNECTION_DEADLINE = 10.0  # a connection that sends no head in this long is dropped


def _respond(conn: socket.socket, status: str, text: str) -> None:
    body = (text + "\n").encode("utf-8")
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
        "Referrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    try:
        conn.sendall(head + body)
    except OSError:
        pass  # the browser went away; the outcome stands either way


def _read_head(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > MAX_HEAD:
            return None
        chunk = conn.recv(4096)
        if not chunk:
            return data or None
        data += chunk
    return data


class Listener:
    """One sign-in's callback listener (see the module docstring)."""

    def __init__(self, port: int = 0):
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise BadRequest(
                f"port {port!r} is not valid: give 0 (any free port) or 1-65535", param="port"
            )
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._sock.bind(("127.0.0.1", port))
            self._sock.listen(8)
        except OSError as exc:
            self._sock.close()
            raise BadRequest(
                f"cannot listen on 127.0.0.1:{port} for the sign-in callback "
                f"({exc.strerror or exc}); choose another --port, or 0 for any "
                "free one",
                param="port",
            ) from exc
        self.port = self._sock.getsockname()[1]
        self._closed = False

    def callback_url(self, state_in_query: str | None = None) -> str:
        url = f"http://127.0.0.1:{self.port}{PATH}"
        return f"{url}?state={state_in_query}" if state_in_query else url

    def wait(
        self, state: str, *, state_field: str, code_field: str, deadline: float, provider: str
    ) -> str:
        """The code of the first callback, once its state is checked (see the module
        docstring); ``deadline`` is a ``time.monotonic()`` value."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamTimeout(
                    f"no sign-in came back from {provider} in time; nothing was stored. Run the "
                    "command again and finish signing in in the browser (or allow longer with "
                    "--timeout)"
                )
            self._sock.settimeout(left)
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if self._closed:
                    raise Cancelled("the sign-in was cancelled; nothing was stored") from None
                raise UpstreamError(
                    f"the sign-in listener failed ({exc}); nothing was "
                    "stored; run the command again"
                ) from exc
            with conn:
                code = self._one(
                    conn,
                    state,
                    state_field,
                    code_field,
                    provider,
                    min(CONNECTION_DEADLINE, max(left, 0.1)),
                )
                if code is not None:
                    return code

    def _one(self, conn, state, state_field, code_field, provider, deadline) -> str | None:
        """The code of a callback with the right state; None to keep waiting (another path, or
        a connection that sent no head); raises when the callback ends the sign-in."""
        conn.settimeout(deadline)
        try:
            head = _read_head(conn)
        except OSError:
            return None
        if not head:
            return None
        line = head.split(b"\n", 1)[0].decode("latin-1").strip()
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            _respond(conn, "405 Method Not Allowed", "Only the sign-in callback is served here.")
            return None
        target = urlsplit(parts[1])
        if target.path != PATH:
            _respond(conn, "404 Not Found", "Not the sign-in callback.")
            return None
        query = parse_qs(target.query, keep_blank_values=True)
        got = query.get(state_field, [])
        if got != [state]:
            _respond(
                conn,
                "400 Bad Request",
                "This sign-in was not started here, or is "
                "stale; nothing was stored. Start the sign-in again.",
            )
            raise Forbidden(
                "the sign-in callback carried a state this sign-in did not send "
                "(a stale browser tab, or a link someone else made); nothing was "
                "stored; run the command again and use the URL it prints",
                param="state",
            )
        if "error" in query:
            said = visible(query["error"][0])[:100]
            _respond(
                conn,
                "400 Bad Request",
                f"{provider} did not sign you in ({said}); nothing was stored.",
            )
            raise UpstreamError(
                f"{provider} did not sign you in: it answered '{said}'; "
                "nothing was stored; run the command again to retry"
            )
        codes = query.get(code_field, [])
        if len(codes) != 1 or not codes[0]:
            _respond(
                conn,
                "400 Bad Request",
                "The callback carried no code; nothing was stored. Start the sign-in again.",
            )
            raise UpstreamError(
                f"{provider}'s callback carried no '{code_field}'; nothing was "
                "stored; run the command again"
            )
        _respond(
            conn,
            "200 OK",
            f"Sign-in to {provider} received; you can close this tab and "
            "return to Panelist, which says whether the key was stored.",
        )
        return codes[0]

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
