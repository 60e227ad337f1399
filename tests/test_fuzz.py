"""Arbitrary JSON and arbitrary bytes at every route: every request gets a well-formed reply, no
request is a 500, the server stays up and the logs stay valid JSONL.

Strings include lone surrogates: JSON's ``\\ud800`` escapes let any caller send them, and
``st.text()`` alone never draws them (it leaves out category Cs).
"""

import http.client
import json
import socket

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import PATIENCE, Gateway
from panelist.gateway import make_gateway

PATHS = [
    "/v1/models",
    "/v1/chat/completions",
    "/bench/verdict",
    "/bench/panels/x",
    "/bench/panels/p20260101-0",
    "/bench/pending",
    "/bench/pending?limit=x",
    "/health",
    "/",
    "/v1",
    "/nope/../v1/models",
    "/v1/models?x=%00",
]
METHODS = ["GET", "POST", "OPTIONS"]
CTYPES = ["application/json", "application/json; charset=utf-8", "text/plain", None]

# any code point, lone surrogates drawn often (one in two characters comes from category Cs)
CHARACTERS = st.characters(exclude_categories=()) | st.characters(categories=["Cs"])


def text(**size):
    return st.text(CHARACTERS, **size)


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text(max_size=30)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", "assistant", "tool", "robot"]) | values,
            "content": text(max_size=60) | values,
        }
    ),
    max_size=3,
)
valid_chat = st.fixed_dictionaries(  # well-typed, arbitrary text: reaches the seats
    {
        "model": st.sampled_from(["bench/trio", "bench/trio:all"]),
        "messages": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "system", "assistant"]),
                    "content": text(min_size=1, max_size=80),
                }
            ),
            min_size=1,
            max_size=3,
        ),
    },
    optional={
        "stream": st.booleans(),
        "temperature": st.floats(0, 2),
        "max_tokens": st.integers(1, 4096),
        "user": text(max_size=20),
    },
)
chat = valid_chat | st.fixed_dictionaries(
    {
        "model": st.sampled_from(
            ["bench/trio", "bench/trio:all", "bench/trio:merged", "bench/nope", "gpt-4o", "bench/"]
        )
        | values,
        "messages": messages | values,
    },
    optional={
        "stream": st.booleans() | values,
        "temperature": values,
        "n": values,
        "max_tokens": values,
        "bench": values,
        "stop": values,
    },
)


def lone_surrogate(raw: bytes) -> bool:
    """Whether a JSON body holds a lone surrogate (an escape no UTF-8 text can carry)."""
    try:
        json.dumps(json.loads(raw), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return True
    except ValueError:  # not JSON: it holds no string at all
        return False
    return False


def verdicts(call):
    valid = st.fixed_dictionaries(
        {"call": st.just(call), "useful": st.booleans()},
        optional={
            "note": text(max_size=80),
            "real": st.lists(text(max_size=20)),
            "false": st.lists(text(max_size=20)),
        },
    )
    return valid | st.fixed_dictionaries(
        {"call": st.just(call) | text(max_size=30) | values, "useful": st.booleans() | values},
        optional={"note": text(max_size=30) | values, "real": values, "false": values},
    )


def check_reply(status: int, headers, data: bytes) -> None:
    """Well-formed: JSON in OpenAI's shape, an event stream of JSON events, or an empty 204."""
    assert 200 <= status < 600 and status != 500, (status, data[:300])
    if status == 204:
        assert data == b""
        return
    if headers.get("Content-Type") == "text/event-stream; charset=utf-8":
        assert status == 200
        events = [line[6:] for line in data.decode().split("\n") if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]", data[-300:]
        odd = [e for e in events[:-1] if not isinstance(json.loads(e), dict)]
        assert not odd, f"events that are not JSON objects: {odd}"
        return
    assert headers.get("Content-Type") == "application/json"
    body = json.loads(data)
    assert isinstance(body, dict)
    if status >= 400:
        err = body["error"]
        assert isinstance(err["message"], str) and err["message"] and isinstance(err["type"], str)
        assert set(err) == {"message", "type", "param", "code"}


def send(gw, method: str, path: str, body: bytes | None, ctype: str | None):
    conn = http.client.HTTPConnection("127.0.0.1", gw.server.port, timeout=PATIENCE)
    try:
        headers = {"Content-Type": ctype} if ctype else {}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def test_any_json_or_bytes_at_any_route(gateway, home, capfd):
    status, reply, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": [{"role": "user", "content": "seed"}]},
    )
    assert status == 200
    call = reply["bench"]["seats"][0]["call"]
    encoded = (values | chat | verdicts(call)).map(lambda v: json.dumps(v).encode())
    json_type = st.sampled_from(CTYPES[:2])
    anything = st.tuples(
        st.sampled_from(METHODS),
        st.sampled_from(PATHS),
        st.none() | st.binary(max_size=200) | encoded,
        st.sampled_from(CTYPES),
    )
    requests = st.one_of(  # most of the effort where the parsing is: chat and verdict bodies
        st.tuples(
            st.just("POST"),
            st.just("/v1/chat/completions"),
            chat.map(lambda v: json.dumps(v).encode()),
            json_type,
        ),
        st.tuples(
            st.just("POST"),
            st.just("/bench/verdict"),
            verdicts(call).map(lambda v: json.dumps(v).encode()),
            json_type,
        ),
        st.tuples(
            st.just("POST"),
            st.sampled_from(PATHS[1:3]),
            st.binary(max_size=200) | encoded,
            json_type,
        ),
        anything,
    )

    sent = []

    # drawn cases besides, a lone surrogate in each body that reaches a writer, whatever this
    # version of hypothesis happens to draw first
    chat_body = {"model": "bench/trio", "messages": [{"role": "user", "content": "x \ud800 y"}]}
    note_body = {"call": call, "useful": True, "note": "\udfff", "real": ["\udc80"]}

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(request=requests)
    @example(
        request=("POST", "/v1/chat/completions", json.dumps(chat_body).encode(), "application/json")
    )
    @example(
        request=(
            "POST",
            "/v1/chat/completions",
            json.dumps(dict(chat_body, stream=True)).encode(),
            "application/json",
        )
    )
    @example(request=("POST", "/bench/verdict", json.dumps(note_body).encode(), "application/json"))
    def one(request):
        check_reply(*send(gateway, *request))  # http.client raises if no reply came at all
        sent.append(request)

    one()
    surrogates = [r for r in sent if r[2] and lone_surrogate(r[2])]
    assert len(surrogates) >= 3, "the requests with a lone surrogate were not all sent"
    assert gateway.get("/health")[0] == 200
    for name in ("calls.jsonl", "evidence.jsonl"):
        for line in (home.gateway_runs / name).read_bytes().splitlines():
            assert isinstance(json.loads(line), dict)
    assert "Traceback" not in capfd.readouterr().err


def owes_a_reply(raw: bytes) -> bool:
    """Whether a server must answer these bytes: anything but blank space before the first line
    ends (a request line of nothing is no request; http.server closes without a word)."""
    return raw.split(b"\n", 1)[0].strip() != b""


def test_any_bytes_as_the_whole_request(home, capfd):
    with Gateway(make_gateway(home, env={}, client_timeout=0.3)) as gw:
        answered = []

        @settings(max_examples=100, deadline=None, derandomize=True, database=None)
        @given(
            raw=st.binary(max_size=300)
            | st.builds(
                lambda line, rest: line + b"\r\n" + rest,
                st.sampled_from(
                    [
                        b"GET /v1/models HTTP/1.1",
                        b"POST /bench/verdict HTTP/1.1",
                        b"FOO / HTTP/1.1",
                        b"GET / HTTP/9.9",
                        b"GET " + b"x" * 70000,
                    ]
                ),
                st.binary(max_size=200),
            )
        )
        def one(raw):
            with socket.create_connection(("127.0.0.1", gw.server.port), timeout=PATIENCE) as s:
                s.sendall(raw)
                s.shutdown(socket.SHUT_WR)
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
            replies = 0
            while data:  # whole replies, each well-formed, and nothing after the last
                head, sep, rest = data.partition(b"\r\n\r\n")
                assert sep and head.startswith(b"HTTP/1."), data[:200]
                lines = head.decode("latin-1").split("\r\n")
                status = int(lines[0].split()[1])
                headers = dict(line.split(": ", 1) for line in lines[1:])
                length = int(headers.get("Content-Length", 0))
                check_reply(status, headers, rest[:length])
                data = rest[length:]
                replies += 1
            if owes_a_reply(raw):
                assert replies >= 1, f"no reply to {raw[:200]!r}"
                answered.append(raw)

        one()
        assert len(answered) >= 50, f"only {len(answered)} of 100 requests owed a reply"
        assert gw.get("/health")[0] == 200
    assert "Traceback" not in capfd.readouterr().err
