"""A streaming request over a raw socket, its server-sent events read one at a time.

The wire-format tests use it where a client library would hide what they check: keep-alive
comments and ``ping`` events, when the head arrives, and a caller leaving at a chosen moment.
Invariants: the request is sent whole at construction; the head is read on first need
(``status``, ``headers``); ``close()`` (or the ``with`` block) closes the socket.
"""

from __future__ import annotations

import json
import socket

PATIENCE = 30.0


class RawStream:
    """``next()`` returns ``("comment", text)`` or ``(event name or None, data)``, the data
    parsed as JSON when it is JSON; HTTP/1.1 chunked framing is decoded by hand. ``EOFError``
    after the last event."""

    def __init__(self, server, path: str, body: dict, headers: dict | None = None):
        host, port = server.server_address[:2]
        raw = json.dumps(body).encode()
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Content-Type: application/json",
            f"Content-Length: {len(raw)}",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        self.sock = socket.create_connection((host, port), timeout=PATIENCE)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + raw)
        self.file = self.sock.makefile("rb")
        self._status: bytes | None = None
        self._headers: dict[str, str] = {}
        self.buffer, self.ended = b"", False

    def _read_head(self) -> None:
        if self._status is None:
            self._status = self.file.readline()
            while (line := self.file.readline()) not in (b"\r\n", b""):
                k, _, v = line.decode().partition(":")
                self._headers[k.strip().lower()] = v.strip()

    @property
    def status(self) -> int:
        self._read_head()
        return int(self._status.split()[1])

    @property
    def headers(self) -> dict[str, str]:
        self._read_head()
        return self._headers

    def body(self) -> dict:
        """The whole body of a reply that is not a stream (Content-Length framed)."""
        self._read_head()
        return json.loads(self.file.read(int(self._headers["content-length"])))

    def next(self):
        self._read_head()
        while b"\n\n" not in self.buffer:
            if self.ended:
                raise EOFError("the stream ended")
            size = int(self.file.readline().strip(), 16)
            if size == 0:
                self.ended = True
                continue
            self.buffer += self.file.read(size)
            self.file.read(2)
        block, self.buffer = self.buffer.split(b"\n\n", 1)
        text = block.decode()
        if text.startswith(":"):
            return "comment", text
        name, data = None, ""
        for line in text.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data = value
        try:
            return name, json.loads(data)
        except ValueError:
            return name, data

    def rest(self) -> list:
        """Every event left, up to the end of the stream."""
        events = []
        while True:
            try:
                events.append(self.next())
            except EOFError:
                return events

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> "RawStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
