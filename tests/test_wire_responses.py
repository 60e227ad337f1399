"""OpenAI's Responses format on the gateway: the `openai` package's Responses API against a real
gateway on the simulated upstream, the same panel as chat (seating, logs, call ids), its
streams, input items and tools in chat form, its errors, and a caller leaving."""

import json

import openai
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
from panelist.metrics.wire import responses
from panelist.metrics.roster.collection import Collections
from panelist.metrics.errors import BadRequest
from panelist.metrics.server.keys import Keys
from panelist.metrics.roster.roster import Roster
from sse import RawStream

ASK = "Review: x = 1/0"
TOOL = {
    "type": "function",
    "name": "lookup_order",
    "description": "Find an order by its number",
    "parameters": {
        "type": "object",
        "properties": {"number": {"type": "string"}},
        "required": ["number"],
    },
}


@pytest.fixture()
def client(gateway):
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="local", max_retries=0) as c:
        yield c


# -- the openai package ---------------------------------------------------------------------------
def test_a_response_is_a_panel_with_bench_header_and_log(client, home, sim):
    raw = client.responses.with_raw_response.create(
        model="bench/trio",
        input=ASK,
        instructions="You review code.",
        max_output_tokens=300,
        temperature=0.2,
        metadata={"ticket": "T-1"},
        store=False,
    )
    response = raw.parse()
    panel = raw.headers["X-Panelist-Panel"]
    assert response.id == f"resp_{panel}" and response.object == "response"
    assert response.status == "completed" and response.model == "bench/trio"
    assert response.metadata == {"ticket": "T-1"} and response.instructions == "You review code."
    (item,) = response.output
    assert item.type == "message" and item.role == "assistant"
    bench = response.model_extra["bench"]
    assert bench["panel"] == panel and len(bench["seats"]) == 5
    for seat in bench["seats"]:  # every seat's answer, labelled with its call id
        assert seat["status"] == "ok" and f"call `{seat['call']}`" in response.output_text
    usage = response.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    body = seat_bodies(sim, ASK)[0]
    assert body["messages"] == [
        {"role": "system", "content": "You review code."},
        {"role": "user", "content": ASK},
    ]
    assert body["max_tokens"] == 300 and body["temperature"] == 0.2
    assert "metadata" not in body and "store" not in body  # nothing of the format's own
    (record,) = logged(home)
    assert record["panel"] == panel and record["abandoned"] is False
    assert {s["call"] for s in record["seats"]} == {s["call"] for s in bench["seats"]}


def test_a_response_stream_with_the_helper_and_with_stream_true(client, home):
    with client.responses.stream(model="bench/trio", input=ASK) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == final.output_text and "## Seat 1: member · fast" in text
    assert events[0].response.status == "in_progress" and final.status == "completed"
    panel = final.model_extra["bench"]["panel"]
    assert final.id == f"resp_{panel}" and final.usage.output_tokens > 0

    with client.responses.with_streaming_response.create(
        model="bench/trio", input=ASK, stream=True
    ) as raw:
        assert raw.headers["Content-Type"] == "text/event-stream; charset=utf-8"
        second = raw.headers["X-Panelist-Panel"]
        kinds = [
            json.loads(line[6:])["type"] for line in raw.iter_lines() if line.startswith("data: ")
        ]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [r["panel"] for r in logged(home)] == [panel, second]


def test_keep_alive_comments_while_a_seat_works(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")  # fast and mid answer at once; slow waits at its gate
    with (
        Gateway(make_gateway(home, keepalive=0.2, env={})) as gw,
        RawStream(
            gw.server, "/v1/responses", {"model": "bench/trio", "input": ASK, "stream": True}
        ) as stream,
    ):
        assert stream.status == 200  # opened by the first keep-alive: slow is still held
        panel = stream.headers["x-panelist-panel"]
        name, created = stream.next()
        assert name == "response.created" and created["sequence_number"] == 0
        assert created["response"]["id"] == f"resp_{panel}"
        assert created["response"]["status"] == "in_progress"
        assert stream.next()[0] == "response.in_progress"
        comments = 0
        while comments < 3:  # slow is held: only comments can come
            assert stream.next() == ("comment", ": seats still working")
            comments += 1
        gated.open("slow")
        rest = [e for e in stream.rest() if e[0] != "comment"]
    assert [n for n, _ in rest][-1] == "response.completed"
    assert [d["sequence_number"] for _, d in rest] == list(range(2, 2 + len(rest)))
    text = next(d["delta"] for n, d in rest if n == "response.output_text.delta")
    assert "[gated slow]" in text
    assert rest[-1][1]["response"]["bench"]["panel"] == panel


def test_input_items_tools_and_format_reach_every_seat_in_chat_form(client, home, sim):
    schema = {
        "type": "object",
        "properties": {"status": {"type": "string"}},
        "required": ["status"],
        "additionalProperties": False,
    }
    items = [
        {"role": "user", "content": "Where is order 42?"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "lookup_order",
            "arguments": '{"number": "42"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "shipped on Monday"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    # merged mode: one answer for the caller, while each seat gets the tools and the format
    response = client.responses.create(
        model="bench/trio:merged",
        input=items,
        tools=[TOOL],
        tool_choice="auto",
        parallel_tool_calls=False,
        text={"format": {"type": "json_schema", "name": "order", "schema": schema, "strict": True}},
    )
    assert response.status == "completed"
    assert response.tools[0].name == "lookup_order" and response.text.format.type == "json_schema"
    body = seat_bodies(sim, "Where is order 42?")[0]
    assert body["messages"] == [
        {"role": "user", "content": "Where is order 42?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"number": "42"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped on Monday"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order by its number",
                "parameters": TOOL["parameters"],
            },
        }
    ]
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "order", "schema": schema, "strict": True},
    }
    for seat in response.model_extra["bench"]["seats"]:
        assert json.loads(seat["answer"]) == {"status": "simulated " + seat["alias"]}
    assert logged(home)[-1]["panel"] == response.model_extra["bench"]["panel"]


def test_a_reply_with_tool_calls_becomes_function_call_items():
    # the chat.completion a seat's tool call produces when its answer is the reply (pick mode)
    reply = {
        "id": "chatcmpl-p1",
        "object": "chat.completion",
        "created": 5,
        "model": "bench/trio",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": '{"number": "42"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        "bench": {"panel": "p1"},
    }
    body = {"model": "bench/trio:pick", "input": "x", "tools": [TOOL]}
    response = responses.from_chat(reply, body, "p1")
    assert response["status"] == "completed" and response["created_at"] == 5
    assert [i["type"] for i in response["output"]] == ["message", "function_call"]
    assert response["output"][1] == {
        "type": "function_call",
        "id": "fc_p1_0",
        "call_id": "call_a",
        "name": "lookup_order",
        "arguments": '{"number": "42"}',
        "status": "completed",
    }
    events = responses.Events(body, "p1", "bench/trio", 5)
    kinds = [n for n, _ in events.opening() + events.closing(reply)]
    assert kinds[-5:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    # a cut-short answer is an incomplete response
    reply["choices"][0] = {
        "index": 0,
        "finish_reason": "length",
        "message": {"role": "assistant", "content": "half"},
    }
    response = responses.from_chat(reply, body, "p1")
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert events.closing(reply)[-1][0] == "response.incomplete"


def test_a_failure_after_the_stream_opened_ends_it_with_error_and_failed():
    events = responses.Events({"model": "bench/trio", "input": "x"}, "p1", "bench/trio", 5)
    opening = events.opening()
    failure = events.failure(
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
    assert [n for n, _ in opening + failure] == [
        "response.created",
        "response.in_progress",
        "error",
        "response.failed",
    ]
    assert failure[0][1] == {
        "type": "error",
        "sequence_number": 2,
        "code": "all_seats_failed",
        "message": "every seat failed; try again",
        "param": None,
        "seats": [{"alias": "fast", "status": "error"}],
    }
    failed = failure[1][1]["response"]
    assert failed["id"] == "resp_p1" and failed["status"] == "failed"
    assert failed["error"] == {
        "code": "all_seats_failed",
        "message": "every seat failed; try again",
    }


# -- requests, translated -------------------------------------------------------------------------
def test_input_parts_and_choices_become_chat():
    chat, stream = responses.to_chat(
        {
            "model": "bench/trio",
            "stream": True,
            "max_output_tokens": 9,
            "top_p": 0.5,
            "tool_choice": {"type": "function", "name": "lookup_order"},
            "tools": [TOOL],
            "text": {"format": {"type": "json_object"}},
            "input": [
                {"role": "developer", "content": [{"type": "input_text", "text": "be kind"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "what is this?"},
                        {
                            "type": "input_image",
                            "image_url": "https://x.example/a.png",
                            "detail": "low",
                        },
                    ],
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_text", "text": "one"}],
                },
            ],
        }
    )
    assert stream is True
    assert chat["max_tokens"] == 9 and chat["top_p"] == 0.5
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "lookup_order"}}
    assert chat["response_format"] == {"type": "json_object"}
    assert chat["messages"] == [
        {"role": "developer", "content": "be kind"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.example/a.png", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [  # one turn: both calls
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
    ]
    text_only, _ = responses.to_chat(
        {"model": "m", "input": "hi", "text": {"format": {"type": "text"}}}
    )
    assert "response_format" not in text_only


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": "x", "background": True}, "background"),
        ({"input": []}, "input"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0].type",
        ),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "x", "tool_choice": "sometimes"}, "tool_choice"),
        ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
        ({"input": "x", "stream": "yes"}, "stream"),
    ],
)
def test_a_malformed_request_is_refused_naming_the_field(body, param):
    with pytest.raises(BadRequest) as caught:
        responses.to_chat(dict(body, model="bench/trio"))
    assert caught.value.param == param


# -- errors in OpenAI's shape ---------------------------------------------------------------------
def test_errors_are_openai_errors(client, gateway, home):
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="bench/none", input=ASK)
    assert "unknown collection 'bench/none'" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="bench/trio", input=ASK, previous_response_id="resp_x")
    assert caught.value.body["param"] == "previous_response_id"
    assert "send the whole conversation in 'input'" in caught.value.body["message"]
    with pytest.raises(openai.BadRequestError) as caught:  # refused before any stream opens
        client.responses.create(
            model="bench/trio", input=ASK, stream=True, tools=[{"type": "web_search"}]
        )
    assert caught.value.body["param"] == "tools[0].type"
    status, body, _ = gateway.post("/v1/responses", raw=b"[1]")
    assert status == 400 and "JSON object" in body["error"]["message"]
    assert logged(home) == []  # nothing refused was ever seated


def test_keys_are_required_on_responses_like_chat(home):
    Collections(home).save(Roster(home).view(), "solo", ["x-one"])
    secret, _ = Keys(home).create("agent")
    narrow, _ = Keys(home).create("narrow", collections=["solo"])
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        with openai.OpenAI(
            base_url=gw.url + "/v1", api_key="pk_" + "A" * 43, max_retries=0
        ) as stranger:
            with pytest.raises(openai.AuthenticationError) as caught:
                stranger.responses.create(model="bench/trio", input=ASK)
        assert "unknown gateway key" in caught.value.body["message"]
        status, _, _ = gw.post(
            "/v1/responses",
            {"model": "bench/trio", "input": ASK},
            headers={"Authorization": f"Bearer {secret}", "Host": "attacker.example"},
        )
        assert status == 403
        with openai.OpenAI(base_url=gw.url + "/v1", api_key=narrow, max_retries=0) as scoped:
            with pytest.raises(openai.PermissionDeniedError) as caught:
                scoped.responses.create(model="bench/trio:merged", input=ASK)
        assert "may not call bench/trio" in caught.value.body["message"]
        with openai.OpenAI(base_url=gw.url + "/v1", api_key=secret, max_retries=0) as agent:
            response = agent.responses.create(model="bench/trio", input=ASK)
    (record,) = logged(home)
    assert record["panel"] == response.model_extra["bench"]["panel"] and record["key"] == "agent"


def test_the_dashboard_serves_responses_too(dash, home):
    status, body, headers = dash.post("/v1/responses", {"model": "bench/trio", "input": ASK})
    assert status == 200 and body["object"] == "response"
    assert headers["X-Panelist-Panel"] == body["bench"]["panel"] == logged(home)[0]["panel"]


# -- a caller that leaves -------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_caller_that_leaves_cancels_the_panel(home, sim, stream):
    set_limits(home, max_explorers=0)
    sim.script("slow", fail="hang")
    with Gateway(make_gateway(home, keepalive=0.2, env={})) as gw:
        with RawStream(
            gw.server, "/v1/responses", {"model": "bench/trio", "input": ASK, "stream": stream}
        ) as s:
            assert wait_until(
                lambda: sim.count("slow") == 1 and seats_logged(home) == {"fast": "ok", "mid": "ok"}
            )
            if stream:  # leave mid-stream: once it opened and a keep-alive came
                assert s.status == 200 and s.next()[0] == "response.created"
                assert s.next()[0] == "response.in_progress"
                assert s.next()[0] == "comment"
        assert sim.wait_disconnects(1, timeout=PATIENCE)  # slow's upstream call was cut
        assert wait_until(lambda: logged(home)), "the panel was never logged"
    (record,) = logged(home)
    assert record["abandoned"] is True
    assert {s["alias"]: s["status"] for s in record["seats"]} == {
        "fast": "ok",
        "mid": "ok",
        "slow": "cancelled",
    }
