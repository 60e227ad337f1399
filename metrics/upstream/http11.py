"""The HTTP/1.1 response reader (RFC 9112): one response read from a socket, head then body.

It replaces ``http.client``, whose ``email``-based header parsing cost more CPU than the rest of a
call. ``Wire(sock).head()`` reads the status line and header fields of the final response (1xx
interim responses are skipped); ``body(reply)`` reads its body by Content-Length, by chunked
coding (extensions and trailers read and dropped) or up to the close, and says whether the
connection may carry another request; ``pieces(reply)`` reads the same body piece by piece, as
the bytes arrive (a streamed answer), and says so in ``keep`` at its end.

Invariants:

- A status or header line over ``MAX_LINE`` (64 KiB), more than ``MAX_HEADERS`` header or
  trailer lines, and a body over ``MAX_ANSWER_BYTES`` are refused (``NotHTTP``, ``TooBig``) as
  they are read, never buffered on.
- ``NotHTTP``'s message is ours: it never repeats what the server sent (which could echo the
  API key).
- The connection ending before any byte is ``Closed`` (a reused connection the server closed
  while it sat idle: the one case a request may be sent again); ending after part of an answer
  is ``Cut``.
- A connection is reusable only when the body's end is known (length or chunked) and was read,
  the reply is HTTP/1.1 without ``Connection: close``, and no byte arrived past the answer's end.
- With a ``meter`` (anything with ``take(n) -> bool``, the server's memory budget), a body
  over ``CHARGE_FROM`` bytes is charged to it as it is read: its length before any byte when
  that is known, else each piece as it arrives; ``charged`` says how much. When ``take`` says
  no, ``OverBudget`` is raised and nothing more is read. Smaller bodies are not charged: the
  seats at once bound them, and a lock per answer would slow the common case.
- Nothing here knows JSON, OpenAI or our errors: the transport translates these exceptions.
"""

from __future__ import annotations

import re
import socket
from typing import Iterator

MAX_ANSWER_BYTES = 32 * 1024 * 1024  # a reply larger than this is refused, not held in memory
# http.client's limits: a longer status, header, chunk-size or trailer line is refused, and so are
# more header (or trailer) lines than MAX_HEADERS
MAX_LINE = 65536
CHARGE_FROM = 64 * 1024  # a body this size or smaller is not charged to the meter
MAX_HEADERS = 100
_RECV = 65536  # bytes asked of the socket at once
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class Closed(ConnectionResetError):
    """Raised when the connection ends before any byte of an answer: on a reused connection, the
    server closed it while it sat idle (the one case a request is sent again)."""


class Cut(ConnectionError):
    """Raised when the connection ends after part of an answer."""


class NotHTTP(ValueError):
    """Raised when the bytes received do not parse as an HTTP/1.x response; its message is ours
    (it never repeats what the server sent, which could echo the API key)."""


class TooBig(Exception):
    """Raised when an answer's body would exceed MAX_ANSWER_BYTES."""


class OverBudget(Exception):
    """Raised when the meter had no room for more of an answer's body."""


class Reply:
    """A final response's head: status, and header fields by lower-cased name (repeated fields
    joined with ", ", RFC 9110 §5.3)."""

    __slots__ = ("status", "headers", "will_close")

    def __init__(self, status: int, headers: dict[str, str], will_close: bool):
        self.status = status
        self.headers = headers
        self.will_close = will_close  # HTTP/1.0 or Connection: close


class Wire:
    """Buffered reading of one response from a socket: ``head()`` then ``body(reply)``."""

    __slots__ = ("sock", "buf", "pos", "got", "to_close", "keep", "meter", "charged")

    def __init__(self, sock: socket.socket, meter=None):
        self.sock = sock
        self.meter = meter
        self.charged = 0  # bytes of the body taken from the meter
        self.buf = b""  # received and not yet consumed from self.pos on
        self.pos = 0
        self.got = False  # whether any byte arrived at all
        self.to_close = False  # whether the body was read up to the close
        self.keep = False  # ``pieces``: whether the connection may carry another request

    def _fill(self) -> bool:
        """Receive more; False at the end of the stream."""
        chunk = self.sock.recv(_RECV)
        if not chunk:
            return False
        self.got = True
        self.buf = self.buf[self.pos :] + chunk if self.pos < len(self.buf) else chunk
        self.pos = 0
        return True

    def _ended(self) -> ConnectionError:
        return (
            Cut("the connection ended mid-answer")
            if self.got
            else Closed("the connection ended before an answer")
        )

    def line(self) -> bytes:
        """The next line without its CRLF; a bare LF ends a line too (RFC 9112 §2.2)."""
        end = self.buf.find(b"\n", self.pos)
        while end < 0:
            seen = len(self.buf) - self.pos
            if seen > MAX_LINE:
                raise NotHTTP("a line over 64 KiB")
            if not self._fill():
                raise self._ended()
            end = self.buf.find(b"\n", self.pos + seen)
        start, self.pos = self.pos, end + 1
        if end - start > MAX_LINE:
            raise NotHTTP("a line over 64 KiB")
        if end > start and self.buf[end - 1] == 13:  # CR
            end -= 1
        return self.buf[start:end]

    def exact(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        buf, pos = self.buf, self.pos
        have = len(buf) - pos
        if have >= n:
            self.pos = pos + n
            return buf[pos : pos + n]
        out = bytearray(n)
        out[:have] = memoryview(buf)[pos:]
        self.buf, self.pos = b"", 0
        view = memoryview(out)
        while have < n:
            got = self.sock.recv_into(view[have:], min(n - have, 1 << 20))
            if not got:
                raise Cut("the connection ended mid-answer")
            self.got = True
            have += got
        return bytes(out)

    def some(self, n: int) -> bytes:
        """At most ``n`` bytes, as soon as any are here: the buffer's first, else one receive."""
        if self.pos < len(self.buf):
            out = self.buf[self.pos : self.pos + n]
            self.pos += len(out)
            return out
        chunk = self.sock.recv(min(n, _RECV))
        if not chunk:
            raise Cut("the connection ended mid-answer")
        self.got = True
        return chunk

    def rest(self) -> bytes:
        """Everything up to the close."""
        self.to_close = True
        parts = [self.buf[self.pos :]]
        size = len(parts[0])
        self.buf, self.pos = b"", 0
        while size <= MAX_ANSWER_BYTES:
            chunk = self.sock.recv(_RECV)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
            size += len(chunk)
            self._charge(size)
        raise TooBig

    def head(self) -> Reply:
        """Status line and header fields of the final response; 1xx interim ones are skipped
        (RFC 9110 §15.2: a client must accept any number of them before the final one)."""
        while True:
            lines = self._whole_head()
            if lines is None:  # judged by its first line before the rest is waited for
                version, status = _status_line(self.line())
                lines = self._field_lines()
            else:
                version, status = _status_line(lines[0])
                del lines[0]
            headers: dict[str, str] = {}
            name = None
            for line in lines:
                if line[0] in (32, 9):  # obs-fold (RFC 9112 §5.2): a continuation, joined by SP
                    if name is not None:
                        headers[name] += " " + line.strip(b" \t").decode("latin-1")
                    continue
                field, colon, value = line.partition(b":")
                if not colon:
                    continue  # not a field line: nothing we need can be in it
                name = field.strip(b" \t").lower().decode("latin-1")
                text = value.strip(b" \t").decode("latin-1")
                headers[name] = headers[name] + ", " + text if name in headers else text
            if 100 <= status <= 199 and status != 101:
                continue
            # HTTP/1.0 keep-alive is not worth its rules: such a connection is simply not reused
            will_close = version == b"HTTP/1.0"
            if not will_close and "connection" in headers:
                tokens = headers["connection"].lower().split(",")
                will_close = "close" in [t.strip() for t in tokens]
            return Reply(status, headers, will_close)

    def _whole_head(self) -> list[bytes] | None:
        """The usual head, all received and its lines ended by CRLF alone, split at once (as
        ``line`` would split it); None for any other, which is read line by line."""
        buf, pos = self.buf, self.pos
        if pos == len(buf):
            if not self._fill():
                raise self._ended()
            buf, pos = self.buf, self.pos
        end = buf.find(b"\r\n\r\n", pos, pos + MAX_LINE)
        if end <= pos or buf.count(b"\n", pos, end) != buf.count(b"\r\n", pos, end):
            return None
        lines = buf[pos:end].split(b"\r\n")
        if len(lines) > MAX_HEADERS + 1:
            return None
        self.pos = end + 4
        return lines

    def _field_lines(self) -> list[bytes]:
        lines: list[bytes] = []
        for _ in range(MAX_HEADERS + 1):
            line = self.line()
            if not line:
                return lines
            lines.append(line)
        raise NotHTTP(f"more than {MAX_HEADERS} header lines")

    def body(self, reply: Reply) -> tuple[bytes, bool]:
        """The body (RFC 9112 §6.3), and whether the connection may carry another request."""
        status, headers = reply.status, reply.headers
        keep = not reply.will_close
        if status in (101, 204, 304):  # never a body; a 101 switched away from HTTP
            return b"", keep and status != 101
        framing = _framing(headers)
        if framing == "chunked":
            data = self.chunked()
            # a Content-Length beside Transfer-Encoding is ignored, the connection not reused
            keep = keep and "content-length" not in headers
        elif isinstance(framing, int):  # _framing gives "chunked", a length or None
            self._charge(framing)
            data = self.exact(framing)
        else:  # a response without chunked last, or without a length: up to the close
            return self.rest(), False
        # bytes past the answer's end mean the next answer's start cannot be trusted
        return data, keep and self.pos == len(self.buf)

    def pieces(self, reply: Reply) -> Iterator[bytes]:
        """``body`` as it arrives: each piece of it as soon as it is here (chunked coding
        undone), within the same limits. Once the last piece was read, ``keep`` says whether
        the connection may carry another request (until then it is False)."""
        self.keep = False
        status, headers = reply.status, reply.headers
        if status in (101, 204, 304):
            self.keep = not reply.will_close and status != 101
            return
        framing = _framing(headers)
        if framing is None:  # up to the close
            self.to_close = True
            size = 0
            while True:
                chunk = self.buf[self.pos :] or self.sock.recv(_RECV)
                self.buf, self.pos = b"", 0
                if not chunk:
                    return
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise TooBig
                self._charge(size)
                yield chunk
        if framing == "chunked":
            size = 0
            while (n := self._chunk_size()) > 0:
                size += n
                if size > MAX_ANSWER_BYTES:
                    raise TooBig
                self._charge(size)
                yield from self._exactly(n)
                if self.line():
                    raise NotHTTP("a chunk longer than its size")
            self._trailers()
            keep = "content-length" not in headers
        else:
            assert isinstance(framing, int)  # _framing gives "chunked", a length or None
            self._charge(framing)
            yield from self._exactly(framing)
            keep = True
        self.keep = keep and not reply.will_close and self.pos == len(self.buf)

    def _charge(self, size: int) -> None:
        """The body has reached ``size`` bytes (or will: its length): take what is not charged
        yet from the meter."""
        if self.meter is None or size <= CHARGE_FROM or size <= self.charged:
            return
        if not self.meter.take(size - self.charged):
            raise OverBudget
        self.charged = size

    def _exactly(self, n: int) -> Iterator[bytes]:
        while n > 0:
            piece = self.some(n)
            n -= len(piece)
            yield piece

    def chunked(self) -> bytes:
        """A chunked body (RFC 9112 §7.1): extensions ignored, the trailer section dropped."""
        parts = []
        size = 0
        while (n := self._chunk_size()) > 0:
            size += n
            if size > MAX_ANSWER_BYTES:
                raise TooBig
            self._charge(size)
            parts.append(self.exact(n))
            if self.line():
                raise NotHTTP("a chunk longer than its size")
        self._trailers()
        return b"".join(parts)

    def _chunk_size(self) -> int:
        digits = self.line().partition(b";")[0].strip(b" \t")
        if not _HEX.fullmatch(digits):
            raise NotHTTP("a chunk size that is not hexadecimal")
        return int(digits, 16)

    def _trailers(self) -> None:
        for _ in range(MAX_HEADERS + 1):
            if not self.line():
                return
        raise NotHTTP(f"more than {MAX_HEADERS} trailer lines")


def _status_line(line: bytes) -> tuple[bytes, int]:
    """The version and status of a status line."""
    version, _, rest = line.partition(b" ")
    code = rest.lstrip(b" ")[:3]
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(code) != 3
        or not code.isdigit()
        or rest.lstrip(b" ")[3:4] not in (b"", b" ")
    ):
        raise NotHTTP("a status line that is not HTTP/1.x")
    return version, int(code)


def _framing(headers: dict[str, str]) -> int | str | None:
    """How a body's end is known (RFC 9112 §6.3): "chunked", its length, or None (the close)."""
    coding = headers.get("transfer-encoding")
    if coding is not None:
        return "chunked" if coding.rpartition(",")[2].strip().lower() == "chunked" else None
    length = headers.get("content-length")
    if length is None:
        return None
    values = {v.strip() for v in length.split(",")}  # repeated, all equal, is allowed
    size = values.pop() if len(values) == 1 else ""
    if not size.isdigit() or not size.isascii():
        raise NotHTTP("a Content-Length that is not one number")
    if len(size) > 15 or int(size) > MAX_ANSWER_BYTES:
        raise TooBig
    return int(size)
