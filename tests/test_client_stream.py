"""A streamed upstream call: ``Upstream.chat(..., on_delta=...)`` asks with ``stream: true``, hands
on each piece of the answer's text as it arrives and returns the whole ``Answer`` (tool calls,
usage, finish reason) as an unstreamed call would; the simulator streams in OpenAI's chunk
format (``openai``'s own stream reader reads it). Errors are the unstreamed call's: a refusal
before the stream, an error object or a cut connection in it, a deadline or a cancel while it
runs. Tests wait on events (the simulator holds the rest of an answer until released), never
on time."""

import json
import threading

import openai
import pytest

from conftest import PATIENCE, wait_until
from panelist.metrics.errors import (
    Cancelled,
    EmptyAnswer,
    RateLimited,
    UpstreamServerError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.sim import SimUpstream
from panelist.metrics.upstream.transport import CancelFlag
from clientkit import RawServer, chunked
from test_client import Background
from transport_fake import FakeTransport, completion

KEY = "sk-test-5f3a9c1e7b"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def sim():
    with SimUpstream({"m": {}}) as server:
        yield server


@pytest.fixture
def upstream():
    client = Upstream(proxies={})
    yield client
    client.close()


def ask(text="Compare these two designs briefly, please", **extra):
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


class Heard:
    """The pieces a streamed call handed on, with an event for the first."""

    def __init__(self):
        self.pieces: list[str] = []
        self.first = threading.Event()

    def __call__(self, piece: str) -> None:
        self.pieces.append(piece)
        self.first.set()


def test_each_piece_is_handed_on_before_the_answer_is_complete(upstream, sim):
    sim.script("m", hold_stream=True, drip=0.001)
    heard = Heard()
    call = Background(upstream.chat, sim.url, KEY, ask(), timeout=PATIENCE, on_delta=heard)
    assert heard.first.wait(PATIENCE), "no piece was handed on"
    assert sim.wait_held("m", 1, PATIENCE) and not call.done.is_set()  # the rest is held
    assert len(heard.pieces) == 1
    sim.release("m")
    assert call.outcome() is None
    answer = call.result
    assert len(heard.pieces) > 1 and answer.text == "".join(heard.pieces)
    whole = upstream.chat(sim.url, KEY, ask(), timeout=PATIENCE)  # the same answer, unstreamed
    assert answer.text == whole.text and answer.tokens == whole.tokens
    assert answer.finish_reason == "stop" and answer.model == "m"
    streamed, plain = (r["body"] for r in sim.requests)
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}
    assert plain["stream"] is False
    assert sim.requests[0]["headers"]["Accept"] == "text/event-stream"
    assert sim.connections == 1  # the streamed call's connection was reused


def test_tool_calls_arrive_in_pieces_and_come_back_whole(upstream, sim):
    sim.script(
        "m",
        tool_calls=[
            {"name": "lookup_order", "arguments": {"number": "42"}},
            {"name": "lookup_order", "arguments": {"number": "43"}},
        ],
    )
    heard = Heard()
    answer = upstream.chat(sim.url, None, ask(tools=TOOLS), timeout=PATIENCE, on_delta=heard)
    whole = upstream.chat(sim.url, None, ask(tools=TOOLS), timeout=PATIENCE)
    assert heard.pieces == [] and answer.text == ""
    assert answer.finish_reason == "tool_calls"
    assert [json.loads(c["function"]["arguments"]) for c in answer.tool_calls] == [
        {"number": "42"},
        {"number": "43"},
    ]
    assert [c["function"] for c in answer.tool_calls] == [c["function"] for c in whole.tool_calls]
    assert [c["id"][:8] + c["id"][-2:] for c in answer.tool_calls] == ["call_sim_0", "call_sim_1"]
    assert all(c["type"] == "function" for c in answer.tool_calls)


def test_the_simulators_stream_is_openais(sim):
    sim.script("m", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    with openai.OpenAI(base_url=sim.url, api_key="x", max_retries=0, timeout=PATIENCE) as client:
        chunks = list(
            client.chat.completions.create(
                **ask(), stream=True, stream_options={"include_usage": True}
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == client.chat.completions.create(**ask()).choices[0].message.content
        assert chunks[-1].usage.completion_tokens > 0 and not chunks[-1].choices
        with client.chat.completions.stream(**ask(tools=TOOLS)) as stream:
            final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "lookup_order" and json.loads(call.function.arguments) == {
        "number": "42"
    }
    assert final.choices[0].finish_reason == "tool_calls"


def test_an_upstream_that_answers_a_stream_whole_is_read_whole():
    transport = FakeTransport(lambda req: (200, completion("hi there")))
    upstream = Upstream(transport=transport)
    heard = Heard()
    try:
        answer = upstream.chat("http://fake/v1", None, ask(), timeout=PATIENCE, on_delta=heard)
    finally:
        upstream.close()
    assert answer.text == "hi there" and heard.pieces == []
    assert transport.requests[0].body["stream"] is True


def test_a_refusal_before_the_stream_is_the_usual_error(upstream, sim):
    sim.script("m", fail="rate_limit", retry_after=7)
    with pytest.raises(RateLimited) as caught:
        upstream.chat(sim.url, None, ask(), timeout=PATIENCE, on_delta=Heard())
    assert caught.value.retry_after == 7 and caught.value.upstream_status == 429


def sse(*events) -> bytes:
    return b"".join(
        b"data: %s\n\n" % (e if isinstance(e, bytes) else json.dumps(e).encode()) for e in events
    )


def chunk(delta: dict, finish=None) -> dict:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def streamed_by(body: bytes):
    """An upstream client whose every call is answered by ``body`` as an event stream."""
    return Upstream(
        transport=FakeTransport(lambda req: (200, body, {"Content-Type": "text/event-stream"}))
    )


def test_an_error_in_the_stream_is_a_server_error():
    upstream = streamed_by(
        sse(
            chunk({"content": "Hel"}),
            {"error": {"message": "The model is overloaded", "type": "server_error"}},
        )
    )
    heard = Heard()
    try:
        with pytest.raises(UpstreamServerError) as caught:
            upstream.chat("http://fake/v1", None, ask(), timeout=PATIENCE, on_delta=heard)
    finally:
        upstream.close()
    assert "overloaded" in caught.value.message and caught.value.upstream_status == 200
    assert heard.pieces == ["Hel"]


def test_a_key_echoed_across_pieces_is_scrubbed_before_any_is_handed_on():
    upstream = streamed_by(
        sse(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "you sent sk-test-5f"}),
            chunk({"content": "3a9c1e7b as your key"}),
            chunk({}, "stop"),
            b"[DONE]",
        )
    )
    heard = Heard()
    try:
        answer = upstream.chat("http://fake/v1", KEY, ask(), timeout=PATIENCE, on_delta=heard)
    finally:
        upstream.close()
    assert all("sk-test" not in p and "3a9c1e7b" not in p for p in heard.pieces), heard.pieces
    assert "".join(heard.pieces) == answer.text == "you sent [api key] as your key"


def test_an_empty_stream_is_an_empty_answer():
    upstream = streamed_by(
        sse(chunk({"role": "assistant", "content": ""}), chunk({}, "length"), b"[DONE]")
    )
    try:
        with pytest.raises(EmptyAnswer) as caught:
            upstream.chat("http://fake/v1", None, ask(), timeout=PATIENCE, on_delta=Heard())
    finally:
        upstream.close()
    assert "raise max_tokens" in caught.value.message


def test_a_stream_cut_mid_answer_is_unreachable_after_its_first_pieces(upstream, sim):
    sim.script("m", fail="reset")
    heard = Heard()
    with pytest.raises(UpstreamUnreachable) as caught:
        upstream.chat(sim.url, None, ask(), timeout=PATIENCE, on_delta=heard)
    assert "mid-answer" in caught.value.message and heard.pieces


def test_a_cancel_ends_a_held_stream(upstream, sim):
    sim.script("m", hold_stream=True)
    heard, cancel = Heard(), CancelFlag()
    call = Background(
        upstream.chat, sim.url, None, ask(), timeout=PATIENCE, cancel=cancel, on_delta=heard
    )
    assert heard.first.wait(PATIENCE)
    cancel.set()
    assert isinstance(call.outcome(), Cancelled)
    assert sim.wait_disconnects(1, timeout=PATIENCE)


def test_the_deadline_ends_a_held_stream(upstream, sim):
    sim.script("m", hold_stream=True)
    heard = Heard()
    call = Background(upstream.chat, sim.url, None, ask(), timeout=0.5, on_delta=heard)
    assert isinstance(call.outcome(), UpstreamTimeout)
    assert wait_until(lambda: sim.disconnects >= 1)


@pytest.fixture
def raw():
    servers = []

    def start(*replies):
        servers.append(RawServer(*replies))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "raw "}),
    chunk({"content": "answer"}),
    chunk({}, "stop"),
    {
        "id": "c",
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    },
    b"[DONE]",
)


@pytest.mark.slow
def test_a_chunked_stream_in_odd_pieces_is_read_and_its_connection_reused(upstream, raw):
    reply = chunked(STREAM, pieces=(5, 1, 60, 3)).replace(b"application/json", b"text/event-stream")
    server = raw((reply, False, 7), reply)
    for _ in range(2):
        heard = Heard()
        answer = upstream.chat(server.url, KEY, ask(), timeout=PATIENCE, on_delta=heard)
        assert heard.pieces == ["raw ", "answer"] and answer.text == "raw answer"
        assert answer.tokens == {"prompt": 3, "completion": 2, "total": 5}
    assert server.connections == 1  # read to its trailer: the connection carried both


@pytest.mark.slow
def test_a_stream_framed_by_the_close_is_read_and_not_reused(upstream, raw):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    server = raw((head + STREAM, True, 9), (head + STREAM, True, 0))
    for _ in range(2):
        heard = Heard()
        assert (
            upstream.chat(server.url, KEY, ask(), timeout=PATIENCE, on_delta=heard).text
            == "raw answer"
        )
        assert heard.pieces == ["raw ", "answer"]
    assert server.connections == 2
