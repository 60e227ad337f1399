"""Request heads byte by byte, with no socket: the handler's head parser (``parse_request``) fed
a head in pieces cut at every point, and the head loop's reading of a head still arriving
(``heads._framing``, ``connection.ends_head``) at every prefix. Where the bytes are cut never
changes what is read; a bad head gets the status RFC 9112 calls for and a message that says what
to send instead."""

import io
import json
from types import SimpleNamespace

import pytest

from panelist.metrics.server.front.connection import MAX_HEAD, MAX_HEADERS, ends_head
from panelist.metrics.server.front.handler import Handler
from panelist.metrics.server.front.heads import _HEALTH, _framing


class Pieces(io.RawIOBase):
    """A client's bytes as a file, each read answered with at most the next piece."""

    def __init__(self, pieces):
        self.pieces = [p for p in pieces if p]

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if not self.pieces:
            return 0
        piece = self.pieces.pop(0)
        n = min(len(buf), len(piece))
        buf[:n] = piece[:n]
        if n < len(piece):
            self.pieces.insert(0, piece[n:])
        return n


def cuts(data: bytes):
    """``data`` whole, in two pieces at every point, and one byte at a time."""
    yield [data]
    for i in range(1, len(data)):
        yield [data[:i], data[i:]]
    yield [data[i : i + 1] for i in range(len(data))]


class Parsed:
    """One head read by the handler's parser: what it understood, or the refusal it sent."""

    def __init__(self, pieces):
        handler = Handler.__new__(Handler)  # the parser alone: no connection, no server loop
        handler.server = SimpleNamespace(common_headers={})
        handler.rfile = io.BufferedReader(Pieces(pieces))
        handler.wfile = io.BytesIO()
        handler.request_version = handler.default_request_version
        handler.command = None
        handler.raw_requestline = handler.rfile.readline(65537)
        handler._consumed = len(handler.raw_requestline)
        self.ok = handler.parse_request()
        self.handler = handler
        self.rest = handler.rfile.read()
        reply = handler.wfile.getvalue()
        head, _, body = reply.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1]) if reply else None
        self.error = json.loads(body)["error"]["message"] if body else None

    @property
    def fields(self) -> dict:
        return dict(self.handler.headers.items())


HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8122\r\n"
    b"Content-Type: application/json\r\nContent-Length: 7\r\nX-Note: first\r\n"
    b"x-note: second\r\nX-Folded: one\r\n two\r\n\r\n"
)


def read_ok(pieces):
    parsed = Parsed(pieces)
    assert parsed.ok, parsed.error
    h = parsed.handler
    return (
        h.command,
        h.path,
        h.request_version,
        parsed.fields,
        h.close_connection,
        h._expect_continue,
        parsed.rest,
    )


def test_a_head_reads_the_same_wherever_its_bytes_are_cut():
    expected = (
        "POST",
        "/v1/chat/completions",
        "HTTP/1.1",
        {
            "host": "127.0.0.1:8122",
            "content-type": "application/json",
            "content-length": "7",
            "x-note": "first",
            "x-folded": "one two",
        },
        False,
        False,
        b'{"a":1}',
    )
    for pieces in cuts(HEAD + b'{"a":1}'):
        assert read_ok(pieces) == expected, f"cut as {[len(p) for p in pieces]}"


def test_bare_line_feeds_end_a_head_as_crlf_does():
    data = b"GET /health HTTP/1.1\nHost: x\nAccept: */*\n\n"
    for pieces in cuts(data):
        assert read_ok(pieces) == (
            "GET",
            "/health",
            "HTTP/1.1",
            {"host": "x", "accept": "*/*"},
            False,
            False,
            b"",
        )


def test_header_names_are_read_in_any_case():
    parsed = Parsed([b"GET / HTTP/1.1\r\nCONTENT-type: text/plain\r\n\r\n"])
    assert parsed.handler.headers["Content-Type"] == "text/plain"
    assert "content-TYPE" in parsed.handler.headers and parsed.handler.headers["X"] is None


@pytest.mark.parametrize(
    "head, close",
    [
        (b"GET / HTTP/1.1\r\n\r\n", False),
        (b"GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n", True),
        (b"GET / HTTP/1.0\r\n\r\n", True),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", False),
    ],
    ids=["1.1", "1.1-close", "1.0", "1.0-keep-alive"],
)
def test_whether_the_connection_stays_open_follows_version_and_connection(head, close):
    assert Parsed([head]).handler.close_connection is close


def test_expect_100_continue_is_noticed_on_http_1_1_only():
    assert Parsed([b"POST / HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n"]).handler._expect_continue
    assert not Parsed([b"POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"]).handler._expect_continue


def test_a_path_starting_with_two_slashes_names_no_other_host():
    assert Parsed([b"GET //evil.example/x HTTP/1.1\r\n\r\n"]).handler.path == "/evil.example/x"


REFUSED = [
    (b"GET / HTTP/x.y\r\n\r\n", 400, "Bad request version"),
    (b"GET / HTTP/2.0\r\n\r\n", 505, "Invalid HTTP version"),
    (b"GET /\r\n\r\n", 505, "send HTTP/1.1"),
    (b"POST /\r\n\r\n", 400, "Bad HTTP/0.9 request type"),
    (b"GET / now HTTP/1.1\r\n\r\n", 400, "Bad request syntax"),
    (b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "CR or NUL"),
    (b"GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 400, "CR or NUL"),
    (b"GET / HTTP/1.1\r\n folded: first\r\n\r\n", 400, "may not start with whitespace"),
    (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "Name: value"),
    (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "Name: value"),
    (b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400, "the host header is repeated"),
    (
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        400,
        "the Content-Length header is repeated",
    ),
    (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
        "the Transfer-Encoding header is repeated",
    ),
    (
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
        "send the body with Content-Length only",
    ),
    (b"POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\n", 400, "digits 0-9 only"),
    (b"POST / HTTP/1.1\r\nContent-Length: 3_0\r\n\r\n", 400, "digits 0-9 only"),
    (b"POST / HTTP/1.1\r\nContent-Length: \xd9\xa7\r\n\r\n", 400, "digits 0-9 only"),
    (b"POST / HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n", 400, "at most 18"),
]


@pytest.mark.parametrize(
    "head, status, why", REFUSED, ids=[f"{i}-{r[1]}" for i, r in enumerate(REFUSED)]
)
def test_a_bad_head_is_refused_with_its_status_and_what_to_do(head, status, why):
    for pieces in ([head], [head[i : i + 1] for i in range(len(head))]):
        parsed = Parsed(pieces)
        assert not parsed.ok
        assert parsed.status == status and why in parsed.error
        assert parsed.handler.close_connection  # nothing after a refused head is trusted


def test_too_many_header_lines_are_431():
    fields = b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS + 1))
    parsed = Parsed([b"GET / HTTP/1.1\r\n" + fields + b"\r\n"])
    assert (parsed.ok, parsed.status, parsed.error) == (False, 431, "Too many headers")
    fields = b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS))
    assert Parsed([b"GET / HTTP/1.1\r\n" + fields + b"\r\n"]).ok


def test_a_head_over_its_cap_is_431_saying_to_send_fewer_fields():
    field = b"X-Big: " + b"a" * 60_000 + b"\r\n"
    parsed = Parsed([b"GET / HTTP/1.1\r\n" + field + field + b"\r\n"])
    assert not parsed.ok and parsed.status == 431
    assert f"over {MAX_HEAD // 1024} KB" in parsed.error and "fewer or shorter" in parsed.error


def test_a_line_over_64_kib_is_431():
    parsed = Parsed([b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"])
    assert (parsed.ok, parsed.status) == (False, 431)


def test_a_refusal_on_an_openai_route_is_in_openais_error_shape():
    parsed = Parsed([b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"])
    reply = json.loads(parsed.handler.wfile.getvalue().partition(b"\r\n\r\n")[2])
    assert reply["error"]["type"] == "invalid_request_error"
    assert b"Connection: close" in parsed.handler.wfile.getvalue()


# -- the head loop's reading of a head still arriving (heads.py) ---------------------------

POST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-length:  12 \r\n\r\n"


def test_a_head_is_whole_only_once_its_empty_line_came_wherever_cut():
    for data, body_at in (
        (POST, len(POST)),
        (POST.replace(b"\r\n", b"\n"), len(POST.replace(b"\r\n", b"\n"))),
    ):
        for i in range(len(data)):
            assert not ends_head(data[:i])
            if i < len(b"POST "):  # not yet known to be a write
                continue
            assert _framing(bytearray(data[:i])) == (
                12 if b"length:  12 \r\n" in data[:i] or b"length:  12 \n" in data[:i] else None,
                0,
            )
        assert ends_head(data)
        assert _framing(bytearray(data + b'{"a": "bc"}')) == (12, body_at)


def test_only_a_writes_length_counts_and_only_from_its_head():
    get = b"GET /v1/models HTTP/1.1\r\nContent-Length: 5\r\n\r\n"
    assert _framing(bytearray(get)) == (None, len(get))
    late = b"POST / HTTP/1.1\r\nHost: x\r\n\r\nContent-Length: 5\r\n"  # in the body
    assert _framing(bytearray(late)) == (None, late.index(b"\r\n\r\n") + 4)
    put = b"PUT / HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n"
    assert _framing(bytearray(put)) == (None, len(put))  # more digits than any size we read


@pytest.mark.parametrize(
    "head, health",
    [
        (b"GET /health HTTP/1.1\r\n", True),
        (b"HEAD /health?deep=1 HTTP/1.1\r\n", True),
        (b"GET /health/ HTTP/1.1\r\n", True),
        (b"GET /healthy HTTP/1.1\r\n", False),
        (b"POST /health HTTP/1.1\r\n", False),
        (b"GET /v1/health HTTP/1.1\r\n", False),
    ],
)
def test_a_health_check_is_told_from_its_request_line(head, health):
    assert bool(_HEALTH.match(head)) is health
