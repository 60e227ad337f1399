"""Every stream opens at once and stays alive: the 200 head and the format's first events go out
before any seat answers, then a keep-alive every ``keepalive`` seconds while the seats work, in
every wire format (chat, Responses, Messages) and every reply mode (all, pick, merged). A client
whose read timeout is shorter than the seats take reads the whole answer; a refusal still comes
before any stream, with its status. (A panel that fails after the stream opened ends with the
format's error event: tests/test_failures.py.)

The seats wait at the gated upstream's gates, opened only once the client has read keep-alives
for longer than its own read timeout: the timeout is what the stream must outlast."""

import json
import socket
import threading
import time

import openai
import pytest

from conftest import Gateway, PATIENCE, logged, move_to, set_limits, wait_until
from panelist.gateway import make_gateway
from sse import RawStream

READ = 1.5  # the client's read timeout: every seat is held longer than this
KEEPALIVE = 0.2  # the gateway's keep-alive interval in these tests
ASK = [{"role": "user", "content": "Review: x = 1/0"}]
MEMBERS = ("fast", "mid", "slow")

FORMATS = {
    "chat": ("/v1/chat/completions", lambda model: {"model": model, "messages": ASK}),
    "responses": ("/v1/responses", lambda model: {"model": model, "input": "Review: x = 1/0"}),
    "messages": (
        "/v1/messages",
        lambda model: {"model": model, "max_tokens": 300, "messages": ASK},
    ),
}
# what a format sends first (Messages: nothing but keep-alives until the reply is known, so
# that its message_start carries bench), and what keeps it alive
OPENING = {
    "chat": ["data"],
    "responses": ["response.created", "response.in_progress"],
    "messages": [],
}


def keep_alive(fmt: str, event) -> bool:
    return event == ("comment", ": seats still working")


def answer_text(fmt: str, events) -> str:
    """The answer's text, put together from the stream's deltas."""
    out = []
    for name, data in events:
        if not isinstance(data, dict):
            continue
        if fmt == "chat" and data.get("choices"):
            out.append(data["choices"][0]["delta"].get("content") or "")
        elif name == "response.output_text.delta":
            out.append(data["delta"])
        elif name == "content_block_delta" and data["delta"]["type"] == "text_delta":
            out.append(data["delta"]["text"])
    return "".join(out)


@pytest.fixture()
def held(home, gated):
    """A gateway with keep-alives every KEEPALIVE s, every member served by the gated upstream
    (nothing answers until the test opens the gates), no explorers; the merger is a member."""
    set_limits(home, max_explorers=0)
    move_to(home, gated, *MEMBERS)
    with Gateway(make_gateway(home, keepalive=KEEPALIVE, env={})) as gw:
        yield gw


@pytest.mark.parametrize("mode", ["all", "pick", "merged"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_stream_opens_at_once_and_outlives_a_short_read_timeout(held, home, gated, fmt, mode):
    path, body = FORMATS[fmt]
    with RawStream(held.server, path, dict(body(f"bench/trio:{mode}"), stream=True)) as stream:
        stream.sock.settimeout(READ)  # any silence longer than this fails the read
        assert stream.status == 200, "the head waited for a seat"
        assert stream.headers["content-type"] == "text/event-stream; charset=utf-8"
        panel = stream.headers["x-panelist-panel"]
        opening = [stream.next() for _ in OPENING[fmt]]
        assert [name or "data" for name, _ in opening] == OPENING[fmt]
        if fmt == "chat":
            assert opening[0][1]["choices"][0]["delta"] == {"role": "assistant"}
        assert gated.wait_arrived(*MEMBERS)
        held_since, kept = time.monotonic(), 0
        # the seats stay held until the client has waited longer than its read timeout
        while kept < 2 or time.monotonic() - held_since <= READ:
            event = stream.next()
            assert keep_alive(fmt, event), f"not a keep-alive while seats are held: {event}"
            kept += 1
        assert not logged(home), "the panel ended while every seat was held"
        gated.open(*MEMBERS)
        rest = stream.rest()
    text = answer_text(fmt, rest)
    assert "[gated " in text, rest
    bench = {
        "chat": lambda: rest[-2][1]["bench"],
        "responses": lambda: rest[-1][1]["response"]["bench"],
        "messages": lambda: next(d for n, d in rest if n == "message_delta")["bench"],
    }[fmt]()
    assert bench["panel"] == panel and bench["reply"] == mode
    assert wait_until(lambda: logged(home)), "the panel was never logged"  # pick: by its last seat
    (record,) = logged(home)
    assert record["panel"] == panel and record["abandoned"] is False


@pytest.mark.parametrize("mode", ["all", "pick"])
def test_the_openai_sdk_with_a_timeout_shorter_than_the_seats_gets_the_answer(held, gated, mode):
    opened = threading.Event()

    def open_later():
        # held past the client's timeout, measured from when the seats were asked
        assert gated.wait_arrived(*MEMBERS)
        since = time.monotonic()
        wait_until(lambda: time.monotonic() - since > 2 * READ, timeout=PATIENCE)
        gated.open(*MEMBERS)
        opened.set()

    opener = threading.Thread(target=open_later, name="open-later")
    with openai.OpenAI(
        base_url=held.url + "/v1", api_key="local", max_retries=0, timeout=READ
    ) as client:
        opener.start()
        try:
            stream = client.chat.completions.create(
                model=f"bench/trio:{mode}", messages=ASK, stream=True
            )
            with stream:
                chunks = list(stream)
        finally:
            opener.join(PATIENCE)
    assert opened.is_set()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "[gated " in text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["bench"]["reply"] == mode


def test_a_refusal_keeps_its_status_on_every_streamed_format(gateway):
    for fmt, (path, body) in FORMATS.items():
        raw = json.dumps(dict(body("bench/none"), stream=True)).encode()
        with socket.create_connection(("127.0.0.1", gateway.server.port), timeout=PATIENCE) as s:
            s.sendall(
                b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                % (path.encode(), gateway.server.port, len(raw), raw)
            )
            head = s.recv(65536).split(b"\r\n", 1)[0]
        assert head.startswith(b"HTTP/1.1 404"), (fmt, head)
