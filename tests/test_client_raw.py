"""The response reader against raw bytes from a scripted socket server: chunked bodies, interim
replies, bodies read to the close, heads that are garbage or oversized, and connections that are
or are not reused after each.

Tests assert outcomes and order, never speed."""

import threading

import pytest

from clientkit import COMPLETION, chunked, plain, raw_chat
from clientkit import raw, upstream  # noqa: F401  (fixtures)
from panelist.metrics.errors import (
    RateLimited,
    UpstreamBadReply,
    UpstreamTimeout,
    UpstreamUnreachable,
)


@pytest.mark.slow
def test_a_chunked_reply_with_extensions_and_a_trailer(upstream, raw):
    server = raw(chunked(), (chunked(pieces=(1, 2, 3)), False, 5), chunked(trailer=b""))
    for _ in range(3):
        answer = raw_chat(upstream, server)
        assert answer.text == "raw answer" and answer.tokens["total"] == 5
    assert server.connections == 1  # read to its last chunk and trailer: the connection is reused


@pytest.mark.slow
def test_interim_1xx_replies_are_skipped(upstream, raw):
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
    server = raw(interim + plain(), (interim + chunked(), False, 3))
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"
    assert server.connections == 1


@pytest.mark.slow
def test_a_reply_without_length_is_read_until_close_and_not_reused(upstream, raw):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    server = raw((head + COMPLETION, True, 0), (head + COMPLETION, True, 11))
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"
    assert server.connections == 2


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(COMPLETION), COMPLETION),
        plain(extra=b"Connection: keep-alive, Close\r\n"),
        plain() + b"\r\n",  # a byte past the answer's end
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
        b"%x\r\n%s\r\n0\r\n\r\n" % (len(COMPLETION), COMPLETION),
    ],
)
@pytest.mark.slow
def test_connections_that_cannot_be_trusted_are_not_reused(upstream, raw, reply):
    server = raw(reply, plain())
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"
    assert server.connections == 2


@pytest.mark.slow
def test_lenient_where_servers_differ(upstream, raw):
    bare_lf = b"HTTP/1.1 200\nCONTENT-length:   %d  \nX-Folded: a\n  b\nnot a field\n\n%s" % (
        len(COMPLETION),
        COMPLETION,
    )
    twice = plain(extra=b"Content-Length: %d\r\n" % len(COMPLETION))
    server = raw(bare_lf, twice)
    assert raw_chat(upstream, server).text == "raw answer"
    assert raw_chat(upstream, server).text == "raw answer"


@pytest.mark.slow
def test_retry_after_is_read_from_a_raw_reply(upstream, raw):
    body = b'{"error": {"message": "slow down", "type": "requests"}}'
    server = raw(
        b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )
    with pytest.raises(RateLimited) as caught:
        raw_chat(upstream, server)
    assert caught.value.retry_after == 7


@pytest.mark.parametrize(
    "reply, words",
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not HTTP/1.1"),
        (b"HTTP/2 200\r\n\r\n", "not HTTP/1.1"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "not HTTP/1.1"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * 70_000 + b"\r\n\r\n", "64 KiB"),
        (b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * 101 + b"\r\n", "more than 100 header lines"),
        (b"x" * 200_000, "64 KiB"),  # no line end at all: refused after 64 KiB, not buffered on
        (b"HTTP/1.1 200 OK\r\nContent-Length: 12, 13\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
            "hexadecimal",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
            "longer than its size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
            + b"T: 1\r\n" * 101
            + b"\r\n",
            "trailer",
        ),
    ],
)
@pytest.mark.slow
def test_garbage_and_oversized_heads_are_bad_replies(upstream, raw, reply, words):
    server = raw((reply, True, 0))
    with pytest.raises(UpstreamBadReply, match=words) as caught:
        raw_chat(upstream, server, timeout=60)  # refused as read, not left to the deadline
    assert "x" * 20 not in caught.value.message  # what the server sent is not repeated


@pytest.mark.parametrize(
    "reply",
    [
        plain(body=b"x" * 2000),
        chunked(body=b"x" * 2000, pieces=(999, 999)),
        (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 2000, True, 0),
    ],
)
@pytest.mark.slow
def test_an_answer_over_the_cap_is_refused(upstream, raw, reply, monkeypatch):
    monkeypatch.setattr("panelist.metrics.upstream.http11.MAX_ANSWER_BYTES", 1000)
    with pytest.raises(UpstreamBadReply, match="sent an answer over"):
        raw_chat(upstream, raw(reply))


@pytest.mark.parametrize(
    "reply",
    [
        plain()[:-10],
        chunked()[:-30],
        b"HTTP/1.1 200 OK\r\nContent-Ty",
    ],
)
@pytest.mark.slow
def test_a_reply_cut_short_is_unreachable(upstream, raw, reply):
    with pytest.raises(UpstreamUnreachable, match="closed the connection mid-answer"):
        raw_chat(upstream, raw((reply, True, 0)))


@pytest.mark.slow
def test_a_close_before_any_byte_on_a_fresh_connection_is_not_retried(upstream, raw):
    server = raw((b"", True, 0), plain())
    with pytest.raises(UpstreamUnreachable, match="before answering"):
        raw_chat(upstream, server)
    assert len(server.requests) == 1


@pytest.mark.slow
def test_a_body_up_to_the_close_still_ends_at_the_deadline(upstream, raw):
    release = threading.Event()

    def stall(conn):  # part of a body with no length, then nothing until the test lets go
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + COMPLETION[:20])
        release.wait(30)

    try:
        with pytest.raises(UpstreamTimeout):
            raw_chat(upstream, raw(stall), timeout=0.3)
        assert not release.is_set()  # it returned while the server still held the connection
    finally:
        release.set()
