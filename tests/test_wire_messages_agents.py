"""What Anthropic's agent clients send to ``/v1/messages`` beyond a plain message: the `anthropic`
package's tool runner (threads offered, refused, the whole history sent again), MCP servers, tool
results without their call, token counts, keys in either header, and the stream helper's final
message. Every refusal is checked on the wire, and no seat is asked for a refused request."""

import json

import anthropic
import pytest
from anthropic.types import ThreadUnsupportedRequestError

from conftest import Gateway, logged, move_to, seat_bodies, set_limits, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.server.keys import Keys

QUESTION = "Where is order 42?"
ASK = [{"role": "user", "content": QUESTION}]
LOOKUP = {
    "name": "lookup_order",
    "description": "Find an order by its number",
    "input_schema": {
        "type": "object",
        "properties": {"number": {"type": "string"}},
        "required": ["number"],
    },
}
NO_THREADS = "thread_unsupported_request"


@pytest.fixture()
def client(gateway):
    with anthropic.Anthropic(base_url=gateway.url, api_key="local", max_retries=0) as c:
        yield c


def call_tools(sim, *aliases) -> None:
    """Script the members to call lookup_order whenever it is offered (and no result came yet)."""
    for alias in aliases:
        sim.script(alias, tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])


def refused(status, body, fragment: str) -> str:
    """The message of a 400 in Anthropic's error shape that says ``fragment``."""
    assert status == 400, body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert fragment in body["error"]["message"], body["error"]["message"]
    return body["error"]["message"]


# -- the tool runner --------------------------------------------------------------------------------
def test_the_tool_runner_loops_to_its_final_answer(gateway, home, sim):
    set_limits(home, max_explorers=0)
    call_tools(sim, "fast", "mid", "slow")
    ran, sent = [], []

    @anthropic.beta_tool
    def lookup_order(number: str) -> str:
        """Find an order by its number"""
        ran.append(number)
        return f"order {number} shipped on Monday"

    def seen(response):
        response.read()
        sent.append((json.loads(response.request.content), response.status_code, response.json()))

    http = anthropic.DefaultHttpxClient(event_hooks={"response": [seen]})
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="local", max_retries=0, http_client=http
    ) as client:
        runner = client.beta.messages.tool_runner(
            model="bench/trio:pick", max_tokens=200, tools=[lookup_order], messages=ASK
        )
        replies = list(runner)

    # the runner offered a thread; the gateway holds none, and the runner took the hint: it
    # sent that turn again without one, and every later turn with the whole conversation
    (offered, status, body), *rest = sent
    assert offered["thread"] == {"type": "create"} and status == 400
    assert body["error"]["details"] == {"error_code": NO_THREADS}
    assert [s for _, s, _ in rest] == [200, 200]
    assert all("thread" not in b for b, _, _ in rest)
    last = rest[1][0]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[0]["content"] == QUESTION and last[2]["content"][0]["type"] == "tool_result"

    first, final = replies
    assert first.stop_reason == "tool_use" and ran == ["42"]
    assert final.stop_reason == "end_turn"
    assert "The tools said: order 42 shipped on Monday" in final.content[0].text
    # two panels, and every seat of each was asked with the question: none got a lone result
    assert wait_until(lambda: len(logged(home)) == 2)
    assert final.model_extra["bench"]["panel"] == logged(home)[-1]["panel"]
    assert len(seat_bodies(sim, QUESTION)) == len(sim.requests) == 6


def test_a_thread_is_refused_before_any_seat_is_asked(client, gateway, home, sim):
    call_tools(sim, "fast")
    base = {"model": "bench/trio:pick", "max_tokens": 50, "tools": [LOOKUP]}
    # the runner's second turn as it reached the gateway before: only the tool result
    lone = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "shipped"}],
    }
    for thread, messages, stream in (
        ({"type": "create"}, ASK, False),
        ({"type": "continue", "previous_message_id": "msg_p1"}, [lone], False),
        ({"type": "continue", "previous_message_id": "msg_p1"}, [lone], True),
        ("yes", ASK, False),
    ):
        status, body, headers = gateway.post(
            "/v1/messages", dict(base, thread=thread, messages=messages, stream=stream)
        )
        message = refused(status, body, "holds no message threads")
        assert "send the whole conversation in 'messages' without 'thread'" in message
        assert body["error"]["details"] == {"error_code": NO_THREADS}
        assert headers["Content-Type"] == "application/json"
    # the package reads it as the refusal it knows, on the plain and the beta surface
    with pytest.raises(ThreadUnsupportedRequestError) as caught:
        client.beta.messages.create(thread={"type": "create"}, messages=ASK, **base)
    assert caught.value.error_code == NO_THREADS
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(messages=ASK, extra_body={"thread": {"type": "create"}}, **base)
    assert caught.value.error_code == NO_THREADS
    # a thread helper stops at the refusal unless told to go on without a thread; then each
    # turn sends the whole conversation
    plain = client.beta.messages.thread(model="bench/trio:pick", max_tokens=50)
    with pytest.raises(ThreadUnsupportedRequestError):
        plain.send({"role": "user", "content": "Review: x = 1/0"})
    thread = client.beta.messages.thread(
        model="bench/trio:pick", max_tokens=50, unsupported_request_behavior="continue_unthreaded"
    )
    assert thread.send({"role": "user", "content": "Review: x = 1/0"}).stop_reason == "end_turn"
    thread.send({"role": "user", "content": "And y = 2/0?"})
    assert wait_until(lambda: len(logged(home)) == 2)  # every seat of both turns is done
    (second,) = [
        r["body"]["messages"]
        for r in sim.requests
        if r["body"]["messages"][-1]["content"] == "And y = 2/0?" and r["model"] == "fast"
    ]
    assert second[0] == {"role": "user", "content": "Review: x = 1/0"}
    assert not seat_bodies(sim, QUESTION)  # nothing refused was ever seated


def test_mcp_servers_are_refused_not_dropped(client, gateway, home, sim):
    servers = [{"type": "url", "url": "https://mcp.example/sse", "name": "orders"}]
    status, body, _ = gateway.post(
        "/v1/messages",
        {"model": "bench/trio", "max_tokens": 50, "messages": ASK, "mcp_servers": servers},
    )
    message = refused(status, body, "does not connect to MCP servers")
    assert message.startswith("mcp_servers: ") and "call the tools on your side" in message
    status, body, _ = gateway.post(
        "/v1/messages",
        {"model": "bench/trio", "max_tokens": 50, "messages": ASK, "mcp_servers": "orders"},
    )
    refused(status, body, "does not connect to MCP servers")
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.messages.create(
            model="bench/trio",
            max_tokens=50,
            messages=ASK,
            mcp_servers=servers,
            betas=["mcp-client-2025-04-04"],
        )
    assert "does not connect to MCP servers" in caught.value.body["error"]["message"]
    assert logged(home) == [] and sim.requests == []


def test_a_tool_result_for_a_call_not_in_the_history_is_refused(client, gateway, home, sim):
    result = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "shipped"}
    called = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {}}],
    }
    cases = [
        (
            [{"role": "user", "content": [result]}],
            "messages[0].content[0].tool_use_id: no earlier assistant message has a tool_use with "
            "id 'toolu_gone'; send the whole conversation",
        ),
        # the calls there are listed, where they are: an id changed on the way shows
        (
            [
                *ASK,
                called,
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
                        result,
                    ],
                },
            ],
            "messages[2].content[1].tool_use_id: no earlier assistant message has a tool_use with "
            "id 'toolu_gone' (the latest tool_use ids: 'toolu_1' at messages[1].content[0].id)",
        ),
        # a result ahead of its call does not answer it
        (
            [*ASK, {"role": "user", "content": [dict(result, tool_use_id="toolu_1")]}, called],
            "messages[1].content[0].tool_use_id: no earlier assistant message has a tool_use with "
            "id 'toolu_1';",
        ),
    ]
    for history, said in cases:
        status, body, _ = gateway.post(
            "/v1/messages",
            {"model": "bench/trio:pick", "max_tokens": 50, "tools": [LOOKUP], "messages": history},
        )
        refused(status, body, said)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model="bench/trio:pick",
            max_tokens=50,
            tools=[LOOKUP],
            messages=[*ASK, {"role": "user", "content": [result]}],
        )
    assert "messages[1].content[0].tool_use_id" in caught.value.body["error"]["message"]
    assert "'toolu_gone'" in caught.value.body["error"]["message"]
    assert logged(home) == [] and sim.requests == []


# -- token counts -----------------------------------------------------------------------------------
def test_count_tokens_answers_the_gateways_own_estimate(client, gateway, home, sim):
    asked = dict(
        model="bench/trio",
        system="You review code.",
        messages=[{"role": "user", "content": "Review: x = 1/0 " * 40}],
    )
    raw = client.messages.with_raw_response.count_tokens(**asked)
    counted = raw.parse()
    assert raw.headers["X-Panelist-Token-Count"] == "estimate"
    assert counted.input_tokens > 100
    assert logged(home) == [] and sim.requests == []  # a count asks no seat
    # the same number the gateway checks each seat's window against
    client.messages.create(max_tokens=20, **asked)
    assert wait_until(lambda: logged(home))
    assert logged(home)[0]["estimate"] == counted.input_tokens
    # the beta surface; an image counts as the window check counts it
    beta = client.beta.messages.count_tokens(
        model="bench/trio:pick",
        tools=[LOOKUP],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "url", "url": "https://x.example/a.png"}},
                ],
            }
        ],
    )
    assert 2500 < beta.input_tokens < 2600


def test_count_tokens_counts_tool_definitions_and_tool_calls(client, gateway):
    plain = client.messages.count_tokens(model="bench/trio:pick", messages=ASK).input_tokens
    tools = [
        {
            "name": f"tool_{i}",
            "description": "d" * 1000,
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
        for i in range(22)
    ]
    with_tools = client.messages.count_tokens(
        model="bench/trio:pick", messages=ASK, tools=tools
    ).input_tokens
    assert with_tools - plain > 5000  # 22k characters of schema are read by the model
    # a tool call's arguments and its result are read too
    turn = [
        *ASK,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "tool_1", "input": {"x": "y" * 4000}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "z" * 4000}],
        },
    ]
    after = client.messages.count_tokens(
        model="bench/trio:pick", messages=turn, tools=tools[:1]
    ).input_tokens
    assert after > 2000


def test_count_tokens_refusals_are_anthropic_shaped(client, gateway, home, sim):
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.count_tokens(model="bench/none", messages=ASK)
    assert caught.value.body["error"]["type"] == "not_found_error"
    assert "unknown collection 'bench/none'" in caught.value.body["error"]["message"]
    status, body, _ = gateway.post("/v1/messages/count_tokens", {"model": "bench/trio"})
    refused(status, body, "'messages' must be a non-empty list")
    status, body, _ = gateway.post(
        "/v1/messages/count_tokens",
        {"model": "bench/trio", "messages": ASK, "thread": {"type": "create"}},
    )
    assert refused(status, body, "holds no message threads") and body["error"]["details"] == {
        "error_code": NO_THREADS
    }
    status, body, headers = gateway.get("/v1/messages/count_tokens")
    assert status == 405 and headers["Allow"] == "POST" and body["type"] == "error"
    status, body, _ = gateway.post("/v1/messages/batches", {})
    assert status == 404 and body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert logged(home) == [] and sim.requests == []


# -- keys ----------------------------------------------------------------------------------------
def test_key_refusals_name_the_header_the_key_came_in(home, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    secret, _ = Keys(home).create("agent")
    unknown = "pk_" + "A" * 43
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        said = {}
        # the package sends api_key as a bearer token; older ones, and other clients, send it
        # as x-api-key
        for name, how in (("x-api-key", "default_headers"), ("Authorization", "api_key")):
            for which, key in (("malformed", "sk-not-ours"), ("unknown", unknown)):
                given = {how: {"x-api-key": key} if how == "default_headers" else key}
                with anthropic.Anthropic(base_url=gw.url, max_retries=0, **given) as c:
                    with pytest.raises(anthropic.AuthenticationError) as caught:
                        c.messages.create(model="bench/trio", max_tokens=10, messages=ASK)
                error = caught.value.body["error"]
                assert error["type"] == "authentication_error"
                assert error["message"].startswith(which) and f"'{name}" in error["message"]
                said[name, which] = error["message"]
        assert "Authorization" not in said["x-api-key", "malformed"]
        assert "x-api-key: pk_" in said["x-api-key", "malformed"]
        assert "x-api-key" not in said["Authorization", "malformed"]
        assert "Authorization: Bearer pk_" in said["Authorization", "malformed"]
        assert "Authorization" not in said["x-api-key", "unknown"]
        # the same on OpenAI's routes, where the key came as a bearer token
        status, body, _ = gw.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert status == 401 and body["error"]["code"] == "malformed_key"
        assert "'Authorization: Bearer pk_'" in body["error"]["message"]
        status, body, _ = gw.get("/v1/models", headers={"x-api-key": " "})
        assert status == 401 and body["error"]["code"] == "missing_key"
        status, body, _ = gw.get("/v1/models", headers={"x-api-key": secret})
        assert status == 200
    assert not any(k in m for m in said.values() for k in ("sk-not-ours", unknown, secret))


# -- the stream helper ---------------------------------------------------------------------------
def test_the_stream_helpers_final_message_keeps_bench(client, home, sim):
    with client.messages.stream(model="bench/trio", max_tokens=300, messages=ASK) as stream:
        events = list(stream)
        final = stream.get_final_message()
        panel = stream.response.headers["X-Panelist-Panel"]
    bench = final.model_extra["bench"]
    assert bench["panel"] == panel and len(bench["seats"]) == 5
    assert wait_until(lambda: logged(home)) and logged(home)[0]["panel"] == panel
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    start = next(e for e in events if e.type == "message_start")
    assert start.message.model_extra["bench"] == bench
    # pick mode and a tool call: the helper's final message holds the call and the bench
    set_limits(home, max_explorers=0)
    call_tools(sim, "fast", "mid", "slow")
    with client.messages.stream(
        model="bench/trio:pick", max_tokens=300, messages=ASK, tools=[LOOKUP]
    ) as stream:
        final = stream.get_final_message()
        panel = stream.response.headers["X-Panelist-Panel"]
    assert final.stop_reason == "tool_use"
    (call,) = final.content
    assert call.type == "tool_use" and call.input == {"number": "42"}
    assert final.model_extra["bench"]["panel"] == panel
    assert final.model_extra["bench"]["picked"]["call"].startswith(panel)


def test_the_stream_helper_keeps_bench_when_the_stream_opened_early(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")  # slow waits at its gate: the stream opens with keep-alives
    with (
        Gateway(make_gateway(home, keepalive=0.2, env={})) as gw,
        anthropic.Anthropic(base_url=gw.url, api_key="local", max_retries=0) as client,
    ):
        with client.messages.stream(model="bench/trio", max_tokens=50, messages=ASK) as stream:
            panel = stream.response.headers["X-Panelist-Panel"]  # the head came: slow is held
            gated.open("slow")
            final = stream.get_final_message()
    assert "[gated slow]" in final.content[0].text
    assert final.model_extra["bench"]["panel"] == panel
    assert {s["alias"]: s["status"] for s in final.model_extra["bench"]["seats"]} == {
        "fast": "ok",
        "mid": "ok",
        "slow": "ok",
    }
