"""Ollama's own Python client (``ollama``, from the registry) against a real gateway: the
collections listed and shown as models, plain and streamed chat and generate, tools through a
whole agent loop with a pick reply, JSON by ``format``, and errors in Ollama's shape. On
``serve``'s single port the same routes answer beside the dashboard's ``/api/`` routes."""

import json

import ollama
import pytest
from pydantic import BaseModel

from conftest import Gateway, logged, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from panelist.metrics.server.keys import Keys

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "Review: x = 1/0"}]
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


@pytest.fixture()
def client(gateway):
    with ollama.Client(host=gateway.url) as c:
        yield c


def test_the_collections_are_its_models(client):
    names = [m.model for m in client.list().models]
    assert names == ["bench/trio", "bench/trio:merged", "bench/trio:pick"]
    shown = client.show("bench/trio:pick")
    assert "completion" in shown.capabilities
    assert shown.modelinfo["panel.context_length"] == 100_000
    assert client.show("bench/trio:latest").modelinfo["general.basename"] == "bench/trio"
    with pytest.raises(ollama.ResponseError) as caught:
        client.show("bench/nope")
    assert caught.value.status_code == 404 and "bench/trio" in caught.value.error


def test_plain_chat_is_a_panel(client, gateway, home):
    reply = client.chat(model="bench/trio:pick", messages=ASK, stream=False)
    assert reply.done and reply.done_reason == "stop"
    assert reply.message.role == "assistant"
    assert reply.message.content.startswith("[simulated fast]")
    assert reply.prompt_eval_count > 0 and reply.eval_count > 0
    # the client keeps Ollama's fields only; the wire also carries bench, as every format does
    status, body, headers = gateway.post(
        "/api/chat", {"model": "bench/trio:pick", "messages": ASK, "stream": False}
    )
    assert status == 200 and body["bench"]["panel"] == headers["X-Panelist-Panel"]
    assert wait_until(lambda: any(r["panel"] == body["bench"]["panel"] for r in logged(home)))


def test_chat_streams_line_by_line(client, sim):
    sim.script("fast", drip=0.001)
    parts = list(client.chat(model="bench/trio:pick", messages=ASK, stream=True))
    text = "".join(p.message.content or "" for p in parts)
    assert len([p for p in parts if p.message.content]) > 2  # piece by piece
    assert text.startswith("[simulated fast]")
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert parts[-1].eval_count > 0


def test_generate_plain_and_streamed(client):
    reply = client.generate(
        model="bench/trio:pick", prompt="Review: x = 1/0", system="Be brief.", stream=False
    )
    assert reply.done and reply.response.startswith("[simulated fast]")
    parts = list(client.generate(model="bench/trio:pick", prompt="Review: x = 1/0", stream=True))
    assert "".join(p.response for p in parts).startswith("[simulated fast]")
    assert parts[-1].done


def test_a_tool_loop_with_a_pick_reply(client, sim):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    messages = [{"role": "user", "content": "Where is order 7?"}]
    reply = client.chat(model="bench/trio:pick", messages=messages, tools=TOOLS)
    (call,) = reply.message.tool_calls
    assert call.function.name == "lookup_order" and call.function.arguments == {"number": "7"}
    messages.append(reply.message)  # as an agent loop does: the call, then its result
    messages.append(
        {"role": "tool", "tool_name": "lookup_order", "content": json.dumps({"status": "shipped"})}
    )
    final = client.chat(model="bench/trio:pick", messages=messages, tools=TOOLS)
    assert not final.message.tool_calls
    assert final.message.content == '[simulated fast] The tools said: {"status": "shipped"}.'
    asked = [r["body"] for r in sim.requests if r["model"] == "fast"][-1]
    calls = asked["messages"][1]["tool_calls"]
    assert asked["messages"][2]["tool_call_id"] == calls[0]["id"]  # the result finds its call


def test_a_tool_loop_streamed(client, sim):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    parts = list(
        client.chat(
            model="bench/trio:pick",
            messages=[{"role": "user", "content": "Where is order 7?"}],
            tools=TOOLS,
            stream=True,
        )
    )
    calls = [c for p in parts for c in p.message.tool_calls or ()]
    assert [c.function.name for c in calls] == ["lookup_order"] and parts[-1].done


class Verdict(BaseModel):
    ok: bool
    reason: str


def test_json_output_by_format(client, sim):
    sim.script("fast", json={"ok": True, "reason": "divides by zero"})
    reply = client.chat(model="bench/trio:pick", messages=ASK, format=Verdict.model_json_schema())
    assert Verdict.model_validate_json(reply.message.content) == Verdict(
        ok=True, reason="divides by zero"
    )
    plain = client.generate(model="bench/trio:pick", prompt="Review: x = 1/0", format="json")
    assert isinstance(json.loads(plain.response), dict)
    asked = [r["body"] for r in sim.requests if r["model"] == "fast"]
    assert asked[0]["response_format"]["type"] == "json_schema"
    assert asked[1]["response_format"] == {"type": "json_object"}


def test_refusals_are_in_ollamas_shape(client, gateway):
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="bench/nope", messages=ASK)
    assert caught.value.status_code == 404 and "bench/trio" in caught.value.error
    with pytest.raises(ollama.ResponseError) as caught:
        client.chat(
            model="bench/trio:pick",
            messages=[{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}],
        )
    assert caught.value.status_code == 400 and "tool" in caught.value.error
    status, body, _ = gateway.post("/api/chat", {"model": "bench/trio", "messages": "hi"})
    assert status == 400 and set(body) == {"error"} and "'messages'" in body["error"]
    status, body, _ = gateway.get("/api/version")
    assert status == 200 and body["version"]


def test_beside_the_dashboard_on_one_port(dash, home):
    with ollama.Client(host=dash.url) as client:
        assert "bench/trio:pick" in [m.model for m in client.list().models]
        reply = client.chat(model="bench/trio:pick", messages=ASK)
    assert reply.message.content.startswith("[simulated fast]")
    status, body, _ = dash.get("/api/collections")  # the dashboard's own /api/ still answers
    assert status == 200 and body["data"][0]["id"] == "bench/trio"


def test_a_gateway_that_wants_keys_takes_them_as_ollamas_clients_send_them(home):
    Collections(home).save(Roster(home).view(), "solo", ["x-one"], description="One model")
    wide, _ = Keys(home).create("wide")
    narrow, _ = Keys(home).create("narrow", collections=["solo"])
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        with ollama.Client(host=gw.url) as anonymous:
            with pytest.raises(ollama.ResponseError) as caught:
                anonymous.chat(model="bench/trio:pick", messages=ASK)
        assert caught.value.status_code == 401 and "missing gateway key" in caught.value.error
        with ollama.Client(host=gw.url, headers={"Authorization": f"Bearer {narrow}"}) as c:
            assert [m.model for m in c.list().models] == [
                "bench/solo",
                "bench/solo:merged",
                "bench/solo:pick",
            ]
            with pytest.raises(ollama.ResponseError) as caught:
                c.chat(model="bench/trio:pick", messages=ASK)
            assert caught.value.status_code == 403
        with ollama.Client(host=gw.url, headers={"Authorization": f"Bearer {wide}"}) as c:
            assert c.chat(model="bench/trio:pick", messages=ASK).message.content
