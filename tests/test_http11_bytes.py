"""The HTTP/1.1 response reader (``upstream.http11``) byte by byte, with no socket: a reply's
bytes are handed to ``Wire`` in pieces cut at every point (and one byte at a time), and what it
reads (status, header fields, body, whether the connection may be reused) must not depend on
where the cuts fell. Bad replies end in the reader's own errors, whose messages never repeat
what the server sent."""

from collections import deque

import pytest

from panelist.metrics.upstream.http11 import (
    MAX_ANSWER_BYTES,
    MAX_HEADERS,
    CHARGE_FROM,
    Closed,
    Cut,
    NotHTTP,
    OverBudget,
    TooBig,
    Wire,
)


class Pieces:
    """What ``Wire`` asks of a socket (``recv``, ``recv_into``), answered from ``pieces`` in
    order and never more than asked; then the end of input."""

    def __init__(self, pieces):
        self.pieces = deque(p for p in pieces if p)
        self.reads = 0

    def recv(self, n: int) -> bytes:
        self.reads += 1
        if not self.pieces:
            return b""
        piece = self.pieces.popleft()
        if len(piece) > n:
            self.pieces.appendleft(piece[n:])
            piece = piece[:n]
        return piece

    def recv_into(self, view, n: int = 0) -> int:
        data = self.recv(n or len(view))
        view[: len(data)] = data
        return len(data)


def cuts(data: bytes):
    """``data`` whole, in two pieces at every point, and one byte at a time."""
    yield [data]
    for i in range(1, len(data)):
        yield [data[:i], data[i:]]
    yield [data[i : i + 1] for i in range(len(data))]


def read(pieces, stream: bool = False):
    """``(status, headers, body, keep)`` of the reply in ``pieces``."""
    wire = Wire(Pieces(pieces))
    reply = wire.head()
    if stream:
        body = b"".join(wire.pieces(reply))
        keep = wire.keep
    else:
        body, keep = wire.body(reply)
    return reply.status, reply.headers, body, keep


def same_everywhere(data: bytes, expected, stream: bool = False) -> None:
    for pieces in cuts(data):
        assert read(pieces, stream) == expected, f"cut as {[len(p) for p in pieces]}"


LENGTH = (
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"a": "bc"}'
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4;name=value\r\nhell\r\n7\r\no, worl\r\n1\r\nd\r\n0\r\nX-Trailer: dropped\r\n\r\n"
)


@pytest.mark.parametrize("stream", [False, True], ids=["body", "pieces"])
def test_a_body_by_its_length_reads_the_same_wherever_the_bytes_are_cut(stream):
    same_everywhere(
        LENGTH,
        (200, {"content-type": "application/json", "content-length": "11"}, b'{"a": "bc"}', True),
        stream,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["body", "pieces"])
def test_a_chunked_body_drops_its_extensions_and_trailers_wherever_cut(stream):
    same_everywhere(CHUNKED, (200, {"transfer-encoding": "chunked"}, b"hello, world", True), stream)


def test_pieces_hands_out_a_streamed_body_as_it_arrives():
    # each piece is given as soon as it is here, without waiting for the rest of the body
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    sock = Pieces([head, b"5\r\nfirst\r\n", b"6\r\nsecond\r\n", b"0\r\n\r\n"])
    wire = Wire(sock)
    pieces = wire.pieces(wire.head())
    assert next(pieces) == b"first"
    assert list(sock.pieces) == [b"6\r\nsecond\r\n", b"0\r\n\r\n"]  # not read ahead
    assert list(pieces) == [b"second"]
    assert wire.keep


def test_interim_replies_are_skipped_for_the_final_one():
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + LENGTH
    same_everywhere(
        data,
        (200, {"content-type": "application/json", "content-length": "11"}, b'{"a": "bc"}', True),
    )


def test_bare_line_feeds_end_lines_as_crlf_does():
    data = b"HTTP/1.1 201 Created\nX-One: 1\nContent-Length: 2\n\nok"
    same_everywhere(data, (201, {"x-one": "1", "content-length": "2"}, b"ok", True))


def test_repeated_fields_are_joined_and_folded_lines_continue_the_last():
    data = (
        b"HTTP/1.1 200 OK\r\nVia: a\r\nVia: b\r\nX-Long: one\r\n  two\r\n\tthree\r\n"
        b"not a field line\r\nContent-Length: 0\r\n\r\n"
    )
    same_everywhere(
        data, (200, {"via": "a, b", "x-long": "one two three", "content-length": "0"}, b"", True)
    )


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",
    ],
    ids=["http/1.0", "connection-close"],
)
def test_a_reply_that_closes_is_read_but_its_connection_not_reused(data):
    status, _, body, keep = read([data])
    assert (status, body, keep) == (200, b"ok", False)


def test_a_body_without_a_length_is_read_up_to_the_close():
    data = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this, until the end"
    same_everywhere(
        data, (200, {"content-type": "text/plain"}, b"all of this, until the end", False)
    )
    same_everywhere(
        data,
        (200, {"content-type": "text/plain"}, b"all of this, until the end", False),
        stream=True,
    )


@pytest.mark.parametrize("status", [204, 304])
def test_replies_that_never_have_a_body_read_none(status):
    data = b"HTTP/1.1 %d X\r\nContent-Length: 5\r\n\r\n" % status
    assert read([data]) == (status, {"content-length": "5"}, b"", True)


def test_bytes_past_the_answer_forbid_reusing_the_connection():
    status, _, body, keep = read([LENGTH + b"HTTP/1.1 200 OK\r\n"])
    assert (status, body, keep) == (200, b'{"a": "bc"}', False)


def test_transfer_encoding_beside_content_length_frames_by_chunks_and_is_not_reused():
    data = CHUNKED.replace(b"chunked\r\n", b"chunked\r\nContent-Length: 3\r\n", 1)
    status, _, body, keep = read([data])
    assert (status, body, keep) == (200, b"hello, world", False)


def test_a_repeated_content_length_of_one_value_is_one_length():
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"
    assert read([data])[2:] == (b"ok", True)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"HTTP/2 200 OK\r\n\r\n", "a status line that is not HTTP/1.x"),
        (b"SECRET-KEY sk-123 leaked\r\n\r\n", "a status line that is not HTTP/1.x"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "a status line that is not HTTP/1.x"),
        (b"HTTP/1.1 20x OK\r\n\r\n", "a status line that is not HTTP/1.x"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", "a Content-Length that is not one"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "a Content-Length that is not one"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: \xd9\xa7\r\n\r\n",
            "a Content-Length that is not one",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not hexadecimal"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
            "a chunk longer than its size",
        ),
    ],
    ids=[
        "version",
        "not-http",
        "four-digits",
        "letters",
        "two-lengths",
        "negative",
        "arabic-digit",
        "chunk-size",
        "long-chunk",
    ],
)
def test_a_reply_that_is_not_http_is_refused_in_our_words(data, why):
    for pieces in ([data], [data[i : i + 1] for i in range(len(data))]):
        with pytest.raises(NotHTTP) as refused:
            read(pieces)
        assert why in str(refused.value)
        assert "SECRET" not in str(refused.value) and "sk-123" not in str(refused.value)


def test_too_many_header_lines_are_refused_as_they_come():
    fields = b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS + 1))
    for data in (
        b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n",  # whole at once
        b"HTTP/1.1 200 OK\n" + fields.replace(b"\r\n", b"\n") + b"\n",
    ):  # by lines
        with pytest.raises(NotHTTP, match=f"more than {MAX_HEADERS} header lines"):
            read([data])


def test_too_many_trailer_lines_are_refused():
    trailers = b"".join(b"T-%d: v\r\n" % i for i in range(MAX_HEADERS + 1))
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + trailers + b"\r\n"
    with pytest.raises(NotHTTP, match="trailer lines"):
        read([data])


def test_a_line_over_64_kib_is_refused_before_its_end_is_awaited():
    sock = Pieces([b"HTTP/1.1 200 OK\r\nX-Big: ", b"a" * 70_000] + [b"a" * 65536] * 100)
    wire = Wire(sock)
    with pytest.raises(NotHTTP, match="64 KiB"):
        wire.head()
    assert sock.pieces, "it stopped reading at the cap, not at the end of the input"


def test_a_length_over_the_cap_is_refused_before_any_byte_of_the_body():
    sock = Pieces(
        [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_ANSWER_BYTES + 1), b"body"]
    )
    wire = Wire(sock)
    reply = wire.head()
    with pytest.raises(TooBig):
        wire.body(reply)
    assert list(sock.pieces) == [b"body"]


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200",  # in the status line
        b"HTTP/1.1 200 OK\r\nContent-Len",  # in the fields
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # in a body by length
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",  # in a chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",  # in the trailers
    ],
    ids=["status-line", "fields", "length", "chunk", "trailers"],
)
def test_an_answer_cut_anywhere_is_cut_not_closed(data):
    for pieces in cuts(data):
        with pytest.raises(Cut):
            read(pieces)
        with pytest.raises(Cut):
            read(pieces, stream=True)


def test_no_byte_at_all_is_closed_the_one_case_a_request_may_be_sent_again():
    with pytest.raises(Closed):
        read([])
    assert not issubclass(Cut, Closed) and not issubclass(Closed, Cut)


class Meter:
    """A memory budget of ``room`` bytes, as the server's (``take(n) -> bool``)."""

    def __init__(self, room: int):
        self.room = room
        self.taken: list[int] = []

    def take(self, n: int) -> bool:
        if n > self.room:
            return False
        self.room -= n
        self.taken.append(n)
        return True


def test_a_large_body_is_charged_by_its_length_before_it_is_read():
    size = CHARGE_FROM + 1
    data = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size
    meter = Meter(10 * size)
    wire = Wire(Pieces([data]), meter=meter)
    body, keep = wire.body(wire.head())
    assert (len(body), keep, meter.taken, wire.charged) == (size, True, [size], size)
    meter = Meter(size - 1)
    sock = Pieces([data[: data.index(b"\r\n\r\n") + 4], b"x" * size])
    wire = Wire(sock, meter=meter)
    reply = wire.head()
    with pytest.raises(OverBudget):
        wire.body(reply)
    assert sock.pieces, "no byte of the body was read once the meter said no"


def test_a_chunked_body_is_charged_as_it_grows_and_small_ones_never():
    half = CHARGE_FROM // 2 + 1
    chunk = b"%x\r\n" % half + b"y" * half + b"\r\n"
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 3 + b"0\r\n\r\n"
    meter = Meter(10 * half)
    wire = Wire(Pieces([data]), meter=meter)
    body, _ = wire.body(wire.head())
    assert len(body) == 3 * half
    assert meter.taken == [2 * half, half] and wire.charged == 3 * half  # none for the first
    small = Meter(0)
    wire = Wire(Pieces([LENGTH]), meter=small)
    assert wire.body(wire.head())[0] == b'{"a": "bc"}' and small.taken == []
