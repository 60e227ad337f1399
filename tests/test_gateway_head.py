"""The gateway's reading of a request's line and header fields (its own, not http.server's
email-based one), over raw sockets: the refusals http.server makes, the stricter ones of RFC 9112,
keep-alive and ``Expect: 100-continue``."""

import json
import socket

import pytest

BODY = json.dumps({"model": "bench/trio", "messages": [{"role": "user", "content": "hi"}]}).encode()


def exchange(gw, raw: bytes, *, then: bytes = b"", half_close: bool = True, expect: int = 0):
    """Send ``raw`` (and ``then`` once a first reply line arrived); the replies, as (status,
    headers with lower-cased names, body) tuples, read until the server closes or, when
    ``expect`` is given, until that many have arrived."""
    with socket.create_connection(("127.0.0.1", gw.server.port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        if then:
            while b"\r\n" not in data:
                data += s.recv(65536)
            s.sendall(then)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        while not (expect and len(replies(data)) >= expect) and (chunk := s.recv(65536)):
            data += chunk
    return replies(data)


def replies(data: bytes) -> list:
    """The whole replies at the start of ``data``."""
    out = []
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            return out
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:])}
        length = int(headers.get("content-length", 0))
        if len(rest) < length:
            return out
        out.append((int(lines[0].split()[1]), headers, rest[:length]))
        data = rest[length:]


def post(port, extra=b"", body=BODY, version=b"HTTP/1.1"):
    return (
        b"POST /v1/chat/completions %s\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json"
        b"\r\nContent-Length: %d\r\n%s\r\n%s" % (version, port, len(body), extra, body)
    )


def get(port, extra=b"", version=b"HTTP/1.1", path=b"/health"):
    return b"GET %s %s\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (path, version, port, extra)


def message(reply) -> str:
    return json.loads(reply[2])["error"]["message"]


def test_header_names_ignore_case_and_values_their_padding(gateway):
    port = gateway.server.port
    raw = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhOsT:127.0.0.1:%d  \r\n"
        b"CONTENT-TYPE: \t application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (port, len(BODY), BODY)
    )
    [(status, headers, body)] = exchange(gateway, raw)
    assert status == 200 and json.loads(body)["bench"]["panel"]


def test_keep_alive_and_connection_close(gateway):
    port = gateway.server.port
    got = exchange(gateway, get(port) + post(port) + get(port), half_close=False, expect=3)
    assert [r[0] for r in got] == [200, 200, 200]
    assert all(r[1].get("connection") != "close" for r in got)
    # Connection: close (any case, among other tokens) ends it after the reply
    got = exchange(gateway, get(port, b"Connection: TE, Close\r\n") + get(port), half_close=False)
    assert [r[0] for r in got] == [200]


def test_http_1_0_closes_unless_it_asks_to_keep_alive(gateway):
    port = gateway.server.port
    got = exchange(gateway, get(port, version=b"HTTP/1.0") + get(port), half_close=False)
    assert [r[0] for r in got] == [200]
    got = exchange(
        gateway,
        get(port, b"Connection: keep-alive\r\n", b"HTTP/1.0") + get(port),
        half_close=False,
        expect=2,
    )
    assert [r[0] for r in got] == [200, 200]


def test_expect_100_continue(gateway):
    port = gateway.server.port
    head, _, body = post(port, b"Expect: 100-Continue\r\n").partition(b"\r\n\r\n")
    got = exchange(gateway, head + b"\r\n\r\n", then=body)
    assert [r[0] for r in got] == [100, 200]
    assert json.loads(got[1][2])["bench"]["panel"]


@pytest.mark.parametrize(
    "head, status",
    [
        # a foreign Host (403), a body over the cap (413), an unknown route (404), a wrong method (405)
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json"
            b"\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
            403,
        ),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json"
            b"\r\nContent-Length: 999999999\r\nExpect: 100-continue\r\n\r\n",
            413,
        ),
        (
            b"POST /v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json"
            b"\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
            404,
        ),
        (
            b"POST /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json"
            b"\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
            405,
        ),
    ],
)
def test_a_refused_request_never_hears_100_continue(gateway, head, status):
    head = head % gateway.server.port if b"%d" in head else head
    got = exchange(gateway, head, half_close=False)  # no body sent: the refusal comes first
    assert [r[0] for r in got] == [status]
    assert got[0][1]["connection"] == "close"  # the body was never read


def test_100_continue_only_for_a_body(gateway):
    port = gateway.server.port
    got = exchange(gateway, get(port, b"Expect: 100-continue\r\n"))
    assert [r[0] for r in got] == [200]


@pytest.mark.parametrize(
    "value", ["8_0", "+80", "\u0668\u0660", "80.0", "0x50", "8 0", "", "1" * 19]
)
def test_content_length_is_ascii_digits_only(gateway, value):
    # each would be read as 80 (or a size) by int(); the body really is 80 bytes of a good request
    body = BODY + b" " * (80 - len(BODY))
    raw = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nContent-Length: %s\r\n\r\n%s"
        % (gateway.server.port, value.encode("utf-8"), body)
    )
    got = exchange(gateway, raw)
    assert [r[0] for r in got] == [400]
    assert got[0][1]["connection"] == "close" and "digits 0-9" in message(got[0])
    assert gateway.server.panels.ledger.recent_panels() == []


def test_leading_zeros_are_digits_too(gateway):
    body = BODY + b" " * (80 - len(BODY))
    raw = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nContent-Length: 0080\r\n\r\n%s"
        % (gateway.server.port, body)
    )
    [(status, _, reply)] = exchange(gateway, raw)
    assert status == 200 and json.loads(reply)["bench"]["panel"]


def test_content_length_beside_transfer_encoding_is_refused(gateway):
    # today's reading would take Content-Length and answer; a proxy in front might take the other
    raw = post(gateway.server.port, b"Transfer-Encoding: identity\r\n")
    got = exchange(gateway, raw)
    assert [r[0] for r in got] == [400]
    assert got[0][1]["connection"] == "close" and "both sent" in message(got[0])
    assert gateway.server.panels.ledger.recent_panels() == []


def test_a_folded_header_is_joined(gateway):
    port = gateway.server.port
    raw = b"GET /health HTTP/1.1\r\nHost:\r\n 127.0.0.1:%d\r\nX-Note: a\r\n\tb\r\n\r\n" % port
    assert exchange(gateway, raw)[0][0] == 200


@pytest.mark.parametrize(
    "raw, status, words",
    [
        (b"GET /health\r\n\r\n", 505, "HTTP/0.9"),
        (b"GET /health HTTP/0.9\r\n\r\n", 505, "HTTP/0.9"),
        (b"POST /health\r\n\r\n", 400, "HTTP/0.9 request type"),
        (b"GET /health HTTP/2.0\r\n\r\n", 505, "Invalid HTTP version"),
        (b"GET /health HTTP/1.x\r\n\r\n", 400, "Bad request version"),
        (b"GET /health HTTP/\xb9.1\r\n\r\n", 400, "Bad request version"),
        (b"GET / health HTTP/1.1\r\n\r\n", 400, "Bad request syntax"),
        (b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-A: 1\r\n" * 100 + b"\r\n", 431, "Too many"),
        (b"GET /health HTTP/1.1\r\nX-Big: " + b"x" * 70_000 + b"\r\n\r\n", 431, "Line too long"),
        (b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "414"),
        (b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n", 400, "name: value"),
        (b"GET /health HTTP/1.1\r\nHost : x\r\n\r\n", 400, "name: value"),
        (b"GET /health HTTP/1.1\r\n: x\r\n\r\n", 400, "name: value"),
        (b"GET /health HTTP/1.1\r\n folded: first\r\n\r\n", 400, "whitespace"),
        (b"GET /health HTTP/1.1\r\nX-A: a\rb\r\n\r\n", 400, "CR or NUL"),
        (b"GET /health HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", 400, "CR or NUL"),
        (b"GET /health HTTP/1.1\r\nX-A: a\r\n b\rc\r\n\r\n", 400, "CR or NUL"),
        (b"GET /health HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400, "repeated"),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
            400,
            "repeated",
        ),
        (
            b"POST /bench/verdict HTTP/1.1\r\nTransfer-Encoding: chunked\r\ntransfer-encoding: x\r\n\r\n",
            400,
            "repeated",
        ),
        # 64 KB for the whole head, though each line is under the per-line cap
        pytest.param(
            b"GET /health HTTP/1.1\r\n"
            + b"X-A: "
            + b"a" * 40_000
            + b"\r\nX-B: "
            + b"b" * 40_000
            + b"\r\n\r\n",
            431,
            "over 64 KB",
            id="two-40KB-lines",
        ),
        pytest.param(
            b"GET /health HTTP/1.1\r\n"
            + b"X-A: 1\r\n" * 90
            + b"X-Long: "
            + b"m" * 65_000
            + b"\r\n\r\n",
            431,
            "over 64 KB",
            id="short-lines-then-a-long-one",
        ),
        # RFC 9112 §6.1: both framings at once is a smuggling attempt, whichever would win
        (
            b"GET /health HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
            "both sent",
        ),
    ],
)
def test_refusals(gateway, raw, status, words):
    got = exchange(gateway, raw)
    assert [r[0] for r in got] == [status]
    assert got[0][1]["connection"] == "close"
    assert words in message(got[0]) and "Traceback" not in got[0][2].decode()


def test_up_to_100_header_lines_are_read_and_the_first_of_a_repeat_wins(gateway):
    port = gateway.server.port
    raw = get(port, b"X-A: 1\r\n" * 98 + b"X-Repeated: 1\r\n")
    assert exchange(gateway, raw)[0][0] == 200
    # the first Origin is the one screened: a foreign one after it changes nothing
    raw = get(
        port,
        b"Origin: http://127.0.0.1:%d\r\nOrigin: https://evil.example\r\n" % port,
        path=b"/v1/models",
    )
    assert exchange(gateway, raw)[0][0] == 200
    raw = get(
        port,
        b"Origin: https://evil.example\r\nOrigin: http://127.0.0.1:%d\r\n" % port,
        path=b"/v1/models",
    )
    assert exchange(gateway, raw)[0][0] == 403


def test_headers_that_end_with_the_connection_still_get_an_answer(gateway):
    port = gateway.server.port
    [(status, _, _)] = exchange(gateway, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
    assert status == 200


def test_the_server_header_is_the_name_alone(gateway):
    with socket.create_connection(("127.0.0.1", gateway.server.port), timeout=30) as s:
        s.sendall(
            b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
            % gateway.server.port
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1")
    assert "\r\nServer: panelist\r\n" in head + "\r\n"
