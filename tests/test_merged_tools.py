"""Merged replies in a tool loop: the merger is offered the tools only when a seat called one this
turn, and reads the conversation's tool calls and results as the tool messages they are, so an
agent loop through ``:merged`` (the openai package's, LangGraph's) ends with a text answer."""

import json

import httpx

from conftest import PATIENCE, openai_client, set_limits
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster

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
LOOKUP = [{"name": "lookup_order", "arguments": {"number": "42"}}]
EVERY_SEAT = ("fast", "mid", "slow", "x-one", "x-two", "x-three")
MAX_TURNS = 4


def merger_requests(sim) -> list[dict]:
    return [r["body"] for r in sim.requests if "## The seats" in json.dumps(r["body"])]


def run_tool(call) -> str:
    assert call.function.name == "lookup_order"
    return f"order {json.loads(call.function.arguments)['number']} shipped Monday"


def test_a_merged_agent_loop_ends_with_a_text_answer(gateway, sim):
    for alias in EVERY_SEAT:  # every model calls the tool whenever it is offered one
        sim.script(alias, tool_calls=LOOKUP)
    messages = list(ASK)
    with openai_client(gateway) as client:
        for turn in range(1, MAX_TURNS + 1):
            done = client.chat.completions.create(
                model="bench/trio:merged", messages=messages, tools=TOOLS
            )
            message = done.choices[0].message
            if not message.tool_calls:
                break
            messages.append(message.model_dump(exclude_none=True))
            messages += [
                {"role": "tool", "tool_call_id": c.id, "content": run_tool(c)}
                for c in message.tool_calls
            ]
    assert not message.tool_calls, f"still calling tools after {MAX_TURNS} turns"
    assert turn == 2 and done.choices[0].finish_reason == "stop"
    assert isinstance(message.content, str) and message.content
    assert done.model_extra["bench"]["merger"]["status"] == "ok"

    first, second = merger_requests(sim)
    # turn one: the seats called the tool, so the merger may call it too
    assert first["tools"] == TOOLS
    # turn two: the seats answered the result in text; the merger is offered no tools and
    # reads the call and its result as an assistant tool call and a tool message
    assert "tools" not in second and "tool_choice" not in second
    (asked,) = [m for m in second["messages"] if m.get("tool_calls")]
    call_id = asked["tool_calls"][0]["id"]
    assert asked["role"] == "assistant" and call_id == messages[1]["tool_calls"][0]["id"]
    assert {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "order 42 shipped Monday",
    } in second["messages"]
    assert second["messages"][-1]["role"] == "user"
    assert "## The seats' answers" in second["messages"][-1]["content"]
    assert "The tools said: order 42 shipped Monday" in second["messages"][-1]["content"]


def test_the_merger_is_offered_no_tools_when_no_seat_called_one(gateway, home, sim):
    Collections(home).save(Roster(home).view(), "trio", ["fast", "mid", "slow"], merger="x-two")
    set_limits(home, max_explorers=0)
    sim.script("x-two", tool_calls=LOOKUP)  # the merger would call the tool if offered it
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {
            "model": "bench/trio:merged",
            "messages": ASK,
            "tools": TOOLS,
            "tool_choice": "auto",
            "parallel_tool_calls": False,
        },
    )
    assert status == 200, body
    assert {s["status"] for s in body["bench"]["seats"]} == {"ok"}
    assert body["bench"]["merger"]["alias"] == "x-two"
    (merger,) = merger_requests(sim)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(merger)
    assert "tool" not in merger["messages"][0]["content"].lower()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in body["choices"][0]["message"]


def test_the_callers_system_text_reaches_the_merger_inside_its_instructions(gateway, sim):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {
            "model": "bench/trio:merged",
            "messages": [{"role": "system", "content": "Answer as a pirate."}] + ASK,
        },
    )
    assert status == 200, body
    (merger,) = merger_requests(sim)
    roles = [m["role"] for m in merger["messages"]]
    assert roles == ["system", "user", "user"]  # one system message: the merger's own
    assert "Answer as a pirate." in merger["messages"][0]["content"]
    assert merger["messages"][1] == ASK[0]


def test_a_langgraph_agent_through_merged_reaches_its_final_answer(gateway, sim):
    from langchain.agents import create_agent  # LangChain's agent: a LangGraph graph
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    for alias in EVERY_SEAT:
        sim.script(alias, tool_calls=LOOKUP)

    @tool
    def lookup_order(number: str) -> str:
        """Find an order by its number."""
        return f"order {number} shipped Monday"

    with httpx.Client(timeout=PATIENCE) as http:
        llm = ChatOpenAI(
            model="bench/trio:merged",
            base_url=gateway.url + "/v1",
            api_key="local",
            max_retries=0,
            http_client=http,
        )
        agent = create_agent(llm, [lookup_order])
        state = agent.invoke(
            {"messages": [("user", "Where is order 42?")]}, {"recursion_limit": 2 * MAX_TURNS + 1}
        )
    said = state["messages"]
    assert isinstance(said[-1], AIMessage) and not said[-1].tool_calls
    assert said[-1].content
    assert [m.content for m in said if isinstance(m, ToolMessage)] == ["order 42 shipped Monday"]


def test_the_merger_reads_tool_messages_only_where_they_answer_a_call():
    from panelist.metrics.panel import merge

    def call(cid, name="lookup_order"):
        return {
            "id": cid,
            "type": "function",
            "function": {"name": name, "arguments": '{"number": "42"}'},
        }

    said, turns = merge.conversation(
        [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at"},
                    {"type": "image_url", "image_url": {"url": "https://x.example/a.png?sig=1"}},
                ],
            },
            {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
            {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            {"role": "tool", "tool_call_id": "c9", "content": "stray"},
            {"role": "user", "content": "and now?"},
        ]
    )
    assert said == ["Be brief."]
    assert turns == [
        {"role": "user", "content": "Look at [image: https://x.example/a.png?...]"},
        {
            "role": "assistant",
            "tool_calls": [call("c1")],
            "content": '(tool call not run: lookup_order {"number": "42"})',
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
        {"role": "user", "content": "(a tool result for c9: stray)"},
        {"role": "user", "content": "and now?"},
    ]
