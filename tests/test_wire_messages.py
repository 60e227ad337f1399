"""Anthropic's Messages format on the gateway: the `anthropic` package against a real gateway on
the simulated upstream, the same panel as chat (seating, logs, call ids), its streams, its tool
round trip, its errors in Anthropic's shape, and a caller leaving."""

import json
import socket

import anthropic
import pytest

from conftest import (
    Gateway,
    PATIENCE,
    logged,
    move_to,
    seat_bodies,
    seats_logged,
    set_limits,
    wait_until,
)
from panelist.gateway import make_gateway
from panelist.metrics.wire import messages
from panelist.metrics.errors import BadRequest
from panelist.metrics.server.keys import Keys
from sse import RawStream

ASK = [{"role": "user", "content": "Review: x = 1/0"}]
TOOLS = [
    {
        "name": "lookup_order",
        "description": "Find an order by its number",
        "input_schema": {
            "type": "object",
            "properties": {"number": {"type": "string"}},
            "required": ["number"],
        },
    }
]


@pytest.fixture()
def client(gateway):
    with anthropic.Anthropic(base_url=gateway.url, api_key="local", max_retries=0) as c:
        yield c


# -- the anthropic package ------------------------------------------------------------------------
def test_a_message_is_a_panel_with_bench_header_and_log(client, home, sim):
    raw = client.messages.with_raw_response.create(
        model="bench/trio",
        max_tokens=300,
        system="You review code.",
        messages=ASK,
        stop_sequences=["END"],
        extra_body={"temperature": 0.2},
    )
    message = raw.parse()
    panel = raw.headers["X-Panelist-Panel"]
    assert message.type == "message" and message.role == "assistant"
    assert message.id == f"msg_{panel}" and message.model == "bench/trio"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    (block,) = message.content
    assert block.type == "text"
    bench = message.model_extra["bench"]
    assert bench["panel"] == panel and len(bench["seats"]) == 5
    for seat in bench["seats"]:  # every seat's answer, labelled with its call id
        assert seat["status"] == "ok" and f"call `{seat['call']}`" in block.text
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    # the seats were asked in chat's form: the system prompt first, the parameters carried
    body = seat_bodies(sim, "Review: x = 1/0")[0]
    assert body["messages"][0] == {"role": "system", "content": "You review code."}
    assert body["max_tokens"] == 300 and body["temperature"] == 0.2 and body["stop"] == ["END"]
    (record,) = logged(home)
    assert record["panel"] == panel and record["abandoned"] is False
    assert "system: You review code." in record["prompt"]
    assert {s["call"] for s in record["seats"]} == {s["call"] for s in bench["seats"]}


def test_a_message_stream_with_the_helper_and_with_stream_true(client, home):
    with client.messages.stream(model="bench/trio", max_tokens=300, messages=ASK) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
        panel = stream.response.headers["X-Panelist-Panel"]
        assert stream.response.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert text == final.content[0].text and "## Seat 1: member · fast" in text
    assert final.id == f"msg_{panel}" and final.stop_reason == "end_turn"
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0

    events = list(
        client.messages.create(model="bench/trio", max_tokens=300, messages=ASK, stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    delta = events[4]
    assert delta.delta.stop_reason == "end_turn"
    bench = delta.model_extra["bench"]  # the seats and their call ids, on message_delta
    assert bench["panel"] == events[0].message.id.removeprefix("msg_")
    assert [r["panel"] for r in logged(home)] == [panel, bench["panel"]]


def test_comments_keep_the_stream_alive_while_a_seat_works(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")  # fast and mid answer at once; slow waits at its gate
    with (
        Gateway(make_gateway(home, keepalive=0.2, env={})) as gw,
        RawStream(
            gw.server,
            "/v1/messages",
            {"model": "bench/trio", "max_tokens": 50, "messages": ASK, "stream": True},
        ) as stream,
    ):
        assert stream.status == 200  # opened by the first keep-alive: slow is still held
        assert stream.headers["content-type"] == "text/event-stream; charset=utf-8"
        panel = stream.headers["x-panelist-panel"]
        for _ in range(3):  # slow is held: only comments, no Messages event out of its order
            assert stream.next() == ("comment", ": seats still working")
        gated.open("slow")
        rest = [event for event in stream.rest() if event[0] != "comment"]
    assert [name for name, _ in rest] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    # message_start waited for the reply, so it carries what the SDK keeps of the message
    start = rest[0][1]["message"]
    assert start["id"] == f"msg_{panel}" and start["model"] == "bench/trio"
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0 and start["usage"]["output_tokens"] == 0
    assert start["bench"]["panel"] == panel
    text = next(d["delta"]["text"] for n, d in rest if n == "content_block_delta")
    assert "[gated slow]" in text
    final = next(d for n, d in rest if n == "message_delta")
    assert final["bench"] == start["bench"] and final["usage"]["output_tokens"] > 0


def test_a_tool_round_trip_reaches_every_seat_in_chat_form(client, home, sim):
    # merged mode: one answer for the caller, while each seat may call the tool
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    first = client.messages.create(
        model="bench/trio:merged",
        max_tokens=200,
        tools=TOOLS,
        tool_choice={"type": "auto"},
        messages=[{"role": "user", "content": "Where is order 42?"}],
    )
    seats = {s["alias"]: s for s in first.model_extra["bench"]["seats"]}
    assert seats["fast"]["status"] == "tool_calls"
    call = seats["fast"]["tool_calls"][0]
    asked = seat_bodies(sim, "Where is order 42?")[0]
    assert asked["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order by its number",
                "parameters": TOOLS[0]["input_schema"],
            },
        }
    ]
    assert asked["tool_choice"] == "auto"

    # the caller ran the tool the seat asked for and sends the result back, as an agent does
    history = [
        {"role": "user", "content": "Where is order 42?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": "lookup_order",
                    "input": json.loads(call["function"]["arguments"]),
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": [{"type": "text", "text": "shipped on Monday"}],
                }
            ],
        },
    ]
    # the model answers the tool result now; the merger (fast, the first member) sums up
    sim.script("fast")
    second = client.messages.create(
        model="bench/trio:merged", max_tokens=200, tools=TOOLS, messages=history
    )
    assert second.stop_reason == "end_turn"
    bench = second.model_extra["bench"]
    fast = next(s for s in bench["seats"] if s["alias"] == "fast")
    assert fast["status"] == "ok" and "The tools said: shipped on Monday" in fast["answer"]
    body = next(
        r["body"]
        for r in sim.requests
        if r["model"] == "fast" and any(m.get("role") == "tool" for m in r["body"]["messages"])
    )
    # fast sat in the first panel: it is shown its own answer there (a bare tool call), not
    # the text the caller wrote around it
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"number": "42"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": "shipped on Monday"},
    ]
    assert logged(home)[-1]["panel"] == bench["panel"]


def test_structured_output_asks_every_seat_for_the_schema(client, sim):
    schema = {
        "type": "object",
        "properties": {"verdict": {"type": "string"}, "severity": {"type": "integer"}},
        "required": ["verdict", "severity"],
        "additionalProperties": False,
    }
    message = client.messages.create(
        model="bench/trio:merged",
        max_tokens=100,
        messages=ASK,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    for body in seat_bodies(sim, "Review: x = 1/0"):
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema},
        }
    for seat in message.model_extra["bench"]["seats"]:
        assert set(json.loads(seat["answer"])) == {"verdict", "severity"}


def test_a_reply_with_tool_calls_becomes_tool_use_blocks():
    # the chat.completion a seat's tool call produces when its answer is the reply (pick mode)
    reply = {
        "id": "chatcmpl-p1",
        "object": "chat.completion",
        "created": 1,
        "model": "bench/trio",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": '{"number": "42"}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": "not json"},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        "bench": {"panel": "p1"},
    }
    message = messages.from_chat(reply, "p1")
    assert message["stop_reason"] == "tool_use" and message["usage"] == {
        "input_tokens": 7,
        "output_tokens": 3,
    }
    assert message["content"] == [
        {"type": "tool_use", "id": "call_a", "name": "lookup_order", "input": {"number": "42"}},
        {
            "type": "tool_use",
            "id": "call_b",
            "name": "lookup_order",
            "input": {"_unparsed_arguments": "not json"},
        },
    ]
    start, *events = messages.Events("p1", "bench/trio").closing(reply)
    assert start == (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_p1",
                "type": "message",
                "role": "assistant",
                "model": "bench/trio",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 7, "output_tokens": 0},
                "bench": {"panel": "p1"},
            },
        },
    )
    assert events[0] == (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "call_a",
                "name": "lookup_order",
                "input": {},
            },
        },
    )
    assert events[1][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"number": "42"}'}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    # text and a cut-short answer
    reply["choices"][0] = {
        "index": 0,
        "finish_reason": "length",
        "message": {"role": "assistant", "content": "half"},
    }
    message = messages.from_chat(reply, "p1")
    assert message["content"] == [{"type": "text", "text": "half"}]
    assert message["stop_reason"] == "max_tokens"


def test_a_failure_after_the_stream_opened_is_an_error_event():
    events = messages.Events("p1", "bench/trio")
    (failure,) = events.failure(
        502,
        {
            "error": {
                "message": "every seat failed; try again",
                "type": "upstream_error",
                "param": None,
                "code": "all_seats_failed",
                "seats": [{"alias": "fast", "status": "error"}],
            }
        },
    )
    assert failure == (
        "error",
        {
            "type": "error",
            "error": {
                "type": "api_error",
                "message": "every seat failed; try again",
                "seats": [{"alias": "fast", "status": "error"}],
            },
        },
    )
    assert (
        events.failure(
            503, {"error": {"message": "no seat", "type": "x", "param": None, "code": None}}
        )[0][1]["error"]["type"]
        == "overloaded_error"
    )


# -- requests, translated -------------------------------------------------------------------------
def test_blocks_become_chat_messages():
    chat, stream = messages.to_chat(
        {
            "model": "bench/trio",
            "max_tokens": 10,
            "stream": True,
            "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "tools": TOOLS,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "iVBORw0KGgo=",
                            },
                        },
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://x.example/a.png"},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "s"},
                        {"type": "tool_use", "id": "t1", "name": "lookup_order", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "is_error": True,
                            "content": [
                                {"type": "text", "text": "no such order"},
                                {
                                    "type": "image",
                                    "source": {"type": "url", "url": "https://x.example/b.png"},
                                },
                            ],
                        },
                        {"type": "text", "text": "and now?"},
                    ],
                },
            ],
        }
    )
    assert stream is True
    assert chat["tool_choice"] == "required" and chat["parallel_tool_calls"] is False
    assert chat["messages"] == [
        {"role": "system", "content": "one\n\ntwo"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "[tool error] no such order"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x.example/b.png"}},
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    assert messages.to_chat(
        {
            "model": "m",
            "max_tokens": 1,
            "messages": ASK,
            "tool_choice": {"type": "tool", "name": "f"},
        }
    )[0]["tool_choice"] == {"type": "function", "function": {"name": "f"}}


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": ASK}, "max_tokens"),
        ({"max_tokens": 0, "messages": ASK}, "max_tokens"),
        ({"max_tokens": 5, "messages": []}, "messages"),
        ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        (
            {
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}],
            },
            "messages[0].content[0].type",
        ),
        (
            {
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "http://x.example/a.png"},
                            }
                        ],
                    }
                ],
            },
            "messages[0].content[0].source.url",
        ),
        (
            {
                "max_tokens": 5,
                "messages": ASK,
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "tools[0].type",
        ),
        (
            {"max_tokens": 5, "messages": ASK, "tool_choice": {"type": "sometimes"}},
            "tool_choice.type",
        ),
        ({"max_tokens": 5, "messages": ASK, "stop_sequences": "END"}, "stop_sequences"),
    ],
)
def test_a_malformed_request_is_refused_naming_the_field(body, param):
    with pytest.raises(BadRequest) as caught:
        messages.to_chat(dict(body, model="bench/trio"))
    assert caught.value.param == param


# -- errors in Anthropic's shape ------------------------------------------------------------------
def test_errors_are_in_anthropics_shape(client, gateway, home):
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="bench/none", max_tokens=10, messages=ASK)
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "not_found_error"
    assert "unknown collection 'bench/none'" in caught.value.body["error"]["message"]
    # what the anthropic package will not send: the missing max_tokens, and a broken body
    status, body, _ = gateway.post("/v1/messages", {"model": "bench/trio", "messages": ASK})
    assert status == 400 and body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "'max_tokens' is required: the most tokens each seat may write (e.g. 1024)",
        },
    }
    status, body, _ = gateway.post("/v1/messages", raw=b'{"model": ')
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert "not valid JSON" in body["error"]["message"]
    status, body, headers = gateway.get("/v1/messages")
    assert status == 405 and headers["Allow"] == "POST" and body["type"] == "error"
    status, body, _ = gateway.post(
        "/v1/messages",
        {
            "model": "bench/trio",
            "max_tokens": 5,
            "messages": ASK,
            "stream": True,
            "temperature": "hot",
        },
    )
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    # chat and the other formats keep OpenAI's shape
    status, body, _ = gateway.post("/v1/chat/completions", raw=b'{"model": ')
    assert status == 400 and body["error"]["type"] == "invalid_request_error" and "type" not in body
    assert logged(home) == []  # nothing refused was ever seated


def test_a_head_refused_while_reading_is_anthropic_shaped_too(gateway):
    host, port = gateway.server.server_address[:2]
    with socket.create_connection((host, port), timeout=PATIENCE) as s:
        s.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nBad Name: x\r\n"
            b"Content-Length: 0\r\n\r\n" % port
        )
        with s.makefile("rb") as reply:
            assert reply.readline().split()[1] == b"400"
            length = 0
            while (line := reply.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                length = int(value) if name.lower() == "content-length" else length
            body = json.loads(reply.read(length))
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "'name: value'" in body["error"]["message"]


def test_a_fault_is_a_500_api_error_with_a_request_id(gateway, home, capfd):
    home.file("collections.json").write_text('{"collections": {"x": {"members": 5}}}')
    status, body, _ = gateway.post(
        "/v1/messages", {"model": "bench/x", "max_tokens": 5, "messages": ASK}
    )
    assert status == 500 and body["error"]["type"] == "api_error"
    rid = body["error"]["message"].rpartition(" ")[2]
    assert rid.startswith("req_") and rid in capfd.readouterr().err


def test_keys_arrive_as_x_api_key_and_refusals_are_anthropic_shaped(home):
    secret, _ = Keys(home).create("agent", rpm=1)
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        with anthropic.Anthropic(
            base_url=gw.url, api_key="pk_" + "A" * 43, max_retries=0
        ) as stranger:
            with pytest.raises(anthropic.AuthenticationError) as caught:
                stranger.messages.create(model="bench/trio", max_tokens=10, messages=ASK)
        assert caught.value.body["error"]["type"] == "authentication_error"
        assert "unknown gateway key" in caught.value.body["error"]["message"]
        status, body, headers = gw.post(
            "/v1/messages", {"model": "bench/trio", "max_tokens": 5, "messages": ASK}
        )
        assert status == 401 and body["error"]["type"] == "authentication_error"
        assert "x-api-key" in body["error"]["message"] and "Bearer" in headers["WWW-Authenticate"]
        status, body, _ = gw.post(
            "/v1/messages",
            {"model": "bench/trio", "max_tokens": 5, "messages": ASK},
            headers={"x-api-key": secret, "Origin": "https://x.example"},
        )
        assert status == 403 and body["error"]["type"] == "permission_error"
        with anthropic.Anthropic(base_url=gw.url, api_key=secret, max_retries=0) as agent:
            message = agent.messages.create(model="bench/trio", max_tokens=10, messages=ASK)
            with pytest.raises(anthropic.RateLimitError) as caught:  # rpm 1: the second waits
                agent.messages.create(model="bench/trio", max_tokens=10, messages=ASK)
        assert caught.value.body["error"]["type"] == "rate_limit_error"
        assert int(caught.value.response.headers["Retry-After"]) >= 1
    (record,) = logged(home)
    assert record["panel"] == message.model_extra["bench"]["panel"] and record["key"] == "agent"


def test_the_dashboard_serves_messages_too(dash, home):
    status, body, headers = dash.post(
        "/v1/messages", {"model": "bench/trio", "max_tokens": 5, "messages": ASK}
    )
    assert status == 200 and body["type"] == "message"
    assert headers["X-Panelist-Panel"] == body["bench"]["panel"] == logged(home)[0]["panel"]
    status, body, _ = dash.post(
        "/v1/messages", {"model": "bench/none", "max_tokens": 5, "messages": ASK}
    )
    assert status == 404 and body["error"]["type"] == "not_found_error"


# -- a caller that leaves -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_caller_that_leaves_cancels_the_panel(home, sim, stream):
    set_limits(home, max_explorers=0)
    sim.script("slow", fail="hang")
    with Gateway(make_gateway(home, keepalive=0.2, env={})) as gw:
        with RawStream(
            gw.server,
            "/v1/messages",
            {"model": "bench/trio", "max_tokens": 50, "messages": ASK, "stream": stream},
        ) as s:
            assert wait_until(
                lambda: sim.count("slow") == 1 and seats_logged(home) == {"fast": "ok", "mid": "ok"}
            )
            if stream:  # leave mid-stream: once it opened and a keep-alive came
                assert s.status == 200 and s.next()[0] == "comment"
        assert sim.wait_disconnects(1, timeout=PATIENCE)  # slow's upstream call was cut
        assert wait_until(lambda: logged(home)), "the panel was never logged"
    (record,) = logged(home)
    assert record["abandoned"] is True
    assert {s["alias"]: s["status"] for s in record["seats"]} == {
        "fast": "ok",
        "mid": "ok",
        "slow": "cancelled",
    }
