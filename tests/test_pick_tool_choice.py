"""A forced ``tool_choice`` (``"required"`` or a named function) in pick mode: the reply is a seat
that called the tool, as OpenAI guarantees, never a seat that answered in prose; the seats
passed over are named in ``bench.note``, and a panel where no seat called the tool is a 502.
Shown with the clients whose structured output rides on a forced tool call: the openai package,
LangChain's ``with_structured_output(method="function_calling")`` and pydantic-ai's output tool."""

import asyncio
import json

import httpx
import pytest
from pydantic import BaseModel

from conftest import PATIENCE, openai_client, raw_stream

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order by its number",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "string"}},
            "required": ["number"],
        },
    },
}
CANCEL = {
    "type": "function",
    "function": {
        "name": "cancel_order",
        "description": "Cancel an order by its number",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "string"}},
            "required": ["number"],
        },
    },
}
ASK = [{"role": "user", "content": "Where is order 42?"}]
EVERY_SEAT = ("fast", "mid", "slow", "x-one", "x-two", "x-three")


class Review(BaseModel):
    verdict: str
    line: int


def test_required_fails_over_from_a_prose_answer_to_the_seat_that_called_the_tool(gateway, sim):
    # fast, the member pick would choose, answers in prose; mid calls the tool
    sim.script("mid", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    with openai_client(gateway) as client:
        done = client.chat.completions.create(
            model="bench/trio:pick", messages=ASK, tools=[LOOKUP], tool_choice="required"
        )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "lookup_order"
    assert json.loads(call.function.arguments) == {"number": "42"}
    bench = done.model_extra["bench"]
    assert bench["picked"]["alias"] == "mid"
    assert (
        "member1 fast: answered without calling a tool, though tool_choice is "
        '"required"' in bench["note"]
    )
    assert bench["note"].endswith("picked member2 mid")
    # every seat was sent the caller's tool_choice as it was
    assert {r["body"].get("tool_choice") for r in sim.requests} == {"required"}


def test_a_named_function_fails_over_from_a_seat_that_called_another(gateway, sim):
    sim.script("fast", tool_calls=[{"name": "cancel_order", "arguments": {"number": "42"}}])
    sim.script(
        "mid",
        tool_calls=[
            {"name": "lookup_order", "arguments": {"number": "42"}},
            {"name": "cancel_order", "arguments": {"number": "42"}},
        ],
    )
    sim.script("slow", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    named = {"type": "function", "function": {"name": "lookup_order"}}
    with openai_client(gateway) as client:
        done = client.chat.completions.create(
            model="bench/trio:pick", messages=ASK, tools=[LOOKUP, CANCEL], tool_choice=named
        )
    (call,) = done.choices[0].message.tool_calls
    assert call.function.name == "lookup_order" and json.loads(call.function.arguments) == {
        "number": "7"
    }
    note = done.model_extra["bench"]["note"]
    assert "member1 fast: called cancel_order, not lookup_order as tool_choice names" in note
    # a seat that called the named function and another too is not what OpenAI would return
    assert "member2 mid: called cancel_order, not lookup_order as tool_choice names" in note
    assert note.endswith("picked member3 slow")


def test_a_streamed_pick_with_a_forced_tool_sends_the_tool_call(gateway, sim):
    sim.script("mid", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    head, rest = raw_stream(
        gateway,
        {"model": "bench/trio:pick", "messages": ASK, "tools": [LOOKUP], "tool_choice": "required"},
    )
    assert head.startswith("HTTP/1.1 200"), head
    events = [
        json.loads(line[6:]) for line in rest.decode().split("\n") if line.startswith("data: {")
    ]
    deltas = [e["choices"][0]["delta"] for e in events]
    (calls,) = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert calls[0]["function"]["name"] == "lookup_order"
    assert not any(d.get("content") for d in deltas), "the prose answer was streamed"
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[-1]["bench"]["picked"]["alias"] == "mid"


def test_none_passes_over_a_seat_that_called_a_tool_anyway(gateway, sim):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:pick", "messages": ASK, "tools": [LOOKUP], "tool_choice": "none"},
    )
    assert status == 200, body
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in body["choices"][0]["message"]
    assert body["bench"]["picked"]["alias"] == "mid"
    assert 'member1 fast: called a tool, though tool_choice is "none"' in body["bench"]["note"]


def test_every_seat_calling_a_tool_despite_none_is_a_502_that_says_so(gateway, sim):
    for alias in EVERY_SEAT:
        sim.script(alias, tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    status, body, headers = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:pick", "messages": ASK, "tools": [LOOKUP], "tool_choice": "none"},
    )
    assert status == 502, body
    error = body["error"]
    assert error["code"] == "tool_called" and "response_format" not in error["message"]
    assert 'called a tool, though tool_choice is "none"' in error["message"]
    assert headers["X-Panelist-Panel"]


@pytest.mark.parametrize("mode", ["pick", "merged"])
def test_no_seat_calling_the_forced_tool_is_a_502_saying_so(gateway, sim, mode):
    status, body, headers = gateway.post(
        "/v1/chat/completions",
        {
            "model": f"bench/trio:{mode}",
            "messages": ASK,
            "tools": [LOOKUP],
            "tool_choice": "required",
        },
    )
    assert status == 502, body
    error = body["error"]
    assert error["code"] == "no_tool_call"
    assert 'tool_choice "required"' in error["message"]
    assert "member1 fast: answered without calling a tool" in error["message"]
    assert len(error["seats"]) == 5 and headers["X-Panelist-Panel"]


@pytest.mark.parametrize(
    "extra, param, said",
    [
        ({"tool_choice": "required"}, "tool_choice", "'tools'"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "lookup_order"}}},
            "tool_choice",
            "'tools'",
        ),
        (
            {"tools": [LOOKUP], "tool_choice": {"type": "function", "function": {"name": "ship"}}},
            "tool_choice.function.name",
            "lookup_order",
        ),
    ],
)
def test_a_tool_choice_no_seat_could_follow_is_a_400(gateway, sim, extra, param, said):
    status, body, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK, **extra}
    )
    assert status == 400, body
    assert body["error"]["param"] == param and said in body["error"]["message"]
    assert not sim.requests, "a refused request reached a seat"


def test_langchain_structured_output_by_function_calling_gets_the_parsed_object(gateway, sim):
    from langchain_openai import ChatOpenAI

    sim.script("mid", tool_calls=[{"name": "Review", "arguments": {"verdict": "bug", "line": 3}}])
    with httpx.Client(timeout=PATIENCE) as http:
        llm = ChatOpenAI(
            model="bench/trio:pick",
            base_url=gateway.url + "/v1",
            api_key="local",
            max_retries=0,
            http_client=http,
        )
        structured = llm.with_structured_output(Review, method="function_calling")
        said = structured.invoke("Review: x = 1/0")
    assert said == Review(verdict="bug", line=3)
    (named,) = {json.dumps(r["body"].get("tool_choice"), sort_keys=True) for r in sim.requests}
    assert json.loads(named)["function"]["name"] == "Review"  # LangChain forced the tool


def test_pydantic_ai_output_tool_gets_the_parsed_object(gateway, sim):
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    sim.script(
        "mid", tool_calls=[{"name": "final_result", "arguments": {"verdict": "bug", "line": 3}}]
    )

    async def run():
        async with openai.AsyncOpenAI(
            base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
        ) as client:
            model = OpenAIChatModel(
                "bench/trio:pick", provider=OpenAIProvider(openai_client=client)
            )
            agent = Agent(model, output_type=Review, retries=0)
            return await agent.run("Review: x = 1/0")

    result = asyncio.run(run())
    assert result.output == Review(verdict="bug", line=3)
    assert {r["body"].get("tool_choice") for r in sim.requests} == {"required"}
