"""Tool calls through the upstream client and into a panel's seats, reply and logs."""

import json

import pytest

from conftest import read_jsonl
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.errors import EmptyAnswer, UpstreamBadReply

TOOLS = [
    {
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
]
ASK = [{"role": "user", "content": "Where is order 42?"}]


@pytest.fixture()
def upstream():
    client = Upstream()
    yield client
    client.close()


def test_the_client_returns_tool_calls_and_finish_reason(sim, upstream):
    sim.script(
        "fast",
        tool_calls=[
            {"name": "lookup_order", "arguments": {"number": "42"}},
            {"name": "not_offered", "arguments": {}},
        ],
    )
    answer = upstream.chat(
        sim.url, None, {"model": "fast", "messages": ASK, "tools": TOOLS}, timeout=10
    )
    assert answer.text == ""
    assert answer.finish_reason == "tool_calls"
    assert len(answer.tool_calls) == 1, "only the offered tool is called"
    call = answer.tool_calls[0]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "lookup_order"
    assert json.loads(call["function"]["arguments"]) == {"number": "42"}


def test_after_the_tool_result_the_model_answers_with_text(sim, upstream):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    first = upstream.chat(
        sim.url, None, {"model": "fast", "messages": ASK, "tools": TOOLS}, timeout=10
    )
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": first.tool_calls},
        {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "content": "shipped on Monday"},
    ]
    second = upstream.chat(
        sim.url, None, {"model": "fast", "messages": history, "tools": TOOLS}, timeout=10
    )
    assert second.tool_calls == [] and second.finish_reason == "stop"
    assert "shipped on Monday" in second.text


def test_an_answer_with_neither_text_nor_tool_calls_is_still_empty(sim, upstream):
    sim.script("fast", fail="empty")
    with pytest.raises(EmptyAnswer):
        upstream.chat(sim.url, None, {"model": "fast", "messages": ASK, "tools": TOOLS}, timeout=10)


def test_a_tool_call_without_a_name_is_a_bad_reply(upstream):
    from panelist.metrics.upstream.client import _tool_calls

    with pytest.raises(UpstreamBadReply, match="without a function name"):
        _tool_calls([{"id": "x", "function": {"arguments": "{}"}}], "sim")
    # arguments sent as an object are carried as the JSON string OpenAI's clients expect
    calls = _tool_calls([{"function": {"name": "f", "arguments": {"a": 1}}}] * 2, "sim")
    assert [c["function"] for c in calls] == [{"name": "f", "arguments": '{"a": 1}'}] * 2
    # a call the upstream sent without an id gets one of its own, never shared with another
    assert calls[0]["id"].startswith("call_") and calls[0]["id"] != calls[1]["id"]


def test_a_seat_that_calls_a_tool_is_status_tool_calls_shown_and_logged(sim, gateway, home):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    sim.script(
        "mid",
        tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}],
        answer="Let me look that up.",
    )
    status, body, _ = gateway.post("/v1/chat/completions", {"model": "bench/trio", "messages": ASK})
    assert status == 200  # no tools offered: every seat answers with text
    assert {s["status"] for s in body["bench"]["seats"]} == {"ok"}

    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": ASK, "tools": TOOLS, "bench": {"reply": "merged"}},
    )
    assert status == 200, body
    seats = {s["alias"]: s for s in body["bench"]["seats"]}
    assert seats["fast"]["status"] == "tool_calls"
    assert seats["fast"]["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert (
        seats["mid"]["status"] == "tool_calls" and seats["mid"]["answer"] == "Let me look that up."
    )
    assert seats["slow"]["status"] == "ok" and "tool_calls" not in seats["slow"]

    logged = read_jsonl(home.gateway_runs / "calls.jsonl")[-1]
    by_alias = {s["alias"]: s for s in logged["seats"]}
    assert by_alias["fast"]["tool_calls"][0]["function"]["arguments"] == '{"number": "42"}'
    evidence = [
        r
        for r in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if r.get("alias") == "fast" and r.get("status") == "tool_calls"
    ]
    assert evidence and evidence[-1]["tool_calls"][0]["function"]["name"] == "lookup_order"
    # a tool-calling answer is an answer: it is owed a verdict like any other
    owed = {r["call"] for r in gateway.get("/bench/pending")[1]["data"]}
    assert seats["fast"]["call"] in owed


def test_the_markdown_section_of_a_tool_calling_seat_names_the_call():
    from panelist.metrics.panel.sections import SeatResult, section

    seat = SeatResult(
        call="p1.member1",
        seat="member",
        alias="fast",
        served="fast",
        status="tool_calls",
        answer="Checking.",
        tool_calls=[
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "lookup_order", "arguments": '{"number": "42"}'},
            }
        ],
    )
    text = section(seat, 1)
    assert "Checking." in text and 'tool call `lookup_order` `{"number": "42"}`' in text
