"""Google's own client (``google-genai``, from the registry) against a real gateway: the
collections listed and read as models, plain and streamed generation, token counts, tools
through a whole agent loop with a pick reply (by hand, and the client's own automatic function
calling), JSON by ``response_schema``, and errors in Google's shape."""

import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from conftest import Gateway
from panelist.gateway import make_gateway
from panelist.metrics.server.keys import Keys

pytestmark = pytest.mark.slow

ASK = "Review: x = 1/0"
LOOKUP = types.FunctionDeclaration(
    name="lookup_order",
    description="Find an order by its number",
    parameters=types.Schema(
        type="OBJECT", properties={"number": types.Schema(type="STRING")}, required=["number"]
    ),
)


@pytest.fixture()
def client(gateway):
    c = genai.Client(
        api_key="local",
        http_options=types.HttpOptions(base_url=gateway.url, api_version="v1beta", timeout=30_000),
    )
    yield c
    c.close()


def test_the_collections_are_its_models(client):
    names = [m.name for m in client.models.list()]
    assert names == ["models/bench/trio", "models/bench/trio:merged", "models/bench/trio:pick"]
    model = client.models.get(model="bench/trio:pick")
    assert model.name == "models/bench/trio:pick" and model.input_token_limit == 100_000
    assert "generateContent" in model.supported_actions
    with pytest.raises(errors.ClientError) as caught:
        client.models.get(model="bench/nope")
    assert caught.value.code == 404 and caught.value.status == "NOT_FOUND"


def test_plain_generation_is_a_panel(client, gateway):
    reply = client.models.generate_content(model="bench/trio:pick", contents=ASK)
    assert reply.text.startswith("[simulated fast]")
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    assert reply.usage_metadata.prompt_token_count > 0
    assert reply.usage_metadata.candidates_token_count > 0
    status, body, headers = gateway.post(
        "/v1beta/models/bench/trio:pick:generateContent", {"contents": [{"parts": [{"text": ASK}]}]}
    )
    assert status == 200 and body["bench"]["panel"] == headers["X-Panelist-Panel"]


def test_generation_streams_event_by_event(client, sim):
    sim.script("fast", drip=0.001)
    chunks = list(
        client.models.generate_content_stream(
            model="bench/trio:pick",
            contents=ASK,
            config=types.GenerateContentConfig(system_instruction="Be brief."),
        )
    )
    pieces = [c.text for c in chunks if c.text]
    assert len(pieces) > 2 and "".join(pieces).startswith("[simulated fast]")
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count > 0
    asked = [r["body"] for r in sim.requests if r["model"] == "fast"]
    assert asked[0]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_tokens_are_counted_as_the_window_check_counts_them(client):
    counted = client.models.count_tokens(model="bench/trio:pick", contents="word " * 400)
    assert counted.total_tokens == int(len("word " * 400) / 4 * 1.1)


def test_a_tool_loop_by_hand_with_a_pick_reply(client, sim):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[LOOKUP])])
    contents = [types.Content(role="user", parts=[types.Part(text="Where is order 7?")])]
    reply = client.models.generate_content(
        model="bench/trio:pick", contents=contents, config=config
    )
    (call,) = reply.function_calls
    assert call.name == "lookup_order" and call.args == {"number": "7"}
    contents.append(reply.candidates[0].content)
    contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(
                    name="lookup_order", response={"status": "shipped"}
                )
            ],
        )
    )
    final = client.models.generate_content(
        model="bench/trio:pick", contents=contents, config=config
    )
    assert not final.function_calls
    assert final.text == '[simulated fast] The tools said: {"status": "shipped"}.'
    asked = [r["body"] for r in sim.requests if r["model"] == "fast"][-1]
    assert asked["messages"][2]["tool_call_id"] == asked["messages"][1]["tool_calls"][0]["id"]


def test_automatic_function_calling_runs_the_loop(client, sim):
    sim.script("fast", tool_calls=[{"name": "lookup_order", "arguments": {"number": "7"}}])
    ran = []

    def lookup_order(number: str) -> dict:
        """Find an order by its number."""
        ran.append(number)
        return {"status": "shipped"}

    reply = client.models.generate_content(
        model="bench/trio:pick",
        contents="Where is order 7?",
        config=types.GenerateContentConfig(tools=[lookup_order]),
    )
    assert ran == ["7"]
    assert reply.text.startswith("[simulated fast] The tools said:") and "shipped" in reply.text


class Verdict(BaseModel):
    ok: bool
    reason: str


def test_json_output_by_response_schema(client, sim):
    sim.script("fast", json={"ok": True, "reason": "divides by zero"})
    reply = client.models.generate_content(
        model="bench/trio:pick",
        contents=ASK,
        config=types.GenerateContentConfig(
            response_mime_type="application/json", response_schema=Verdict
        ),
    )
    assert reply.parsed == Verdict(ok=True, reason="divides by zero")
    asked = [r["body"] for r in sim.requests if r["model"] == "fast"][0]
    schema = asked["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "object" and set(schema["required"]) == {"ok", "reason"}


def test_refusals_are_in_googles_shape(client, gateway):
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="bench/nope", contents=ASK)
    assert caught.value.code == 404 and "bench/trio" in caught.value.message
    status, body, _ = gateway.post(
        "/v1beta/models/bench/trio:pick:generateContent", {"contents": []}
    )
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["code"] == 400 and "'contents'" in body["error"]["message"]
    status, body, _ = gateway.post(
        "/v1beta/models/bench/trio:pick:generateContent",
        {"contents": [{"parts": [{"text": ASK}]}], "tools": [{"googleSearch": {}}]},
    )
    assert status == 400 and "googleSearch" in body["error"]["message"]


def test_a_gateway_that_wants_keys_takes_googles_key_header(home):
    key, _ = Keys(home).create("wide")
    with Gateway(make_gateway(home, env={"PANELIST_REQUIRE_KEYS": "1"})) as gw:
        for secret, status in (("pk_" + "A" * 43, 401), (key, 200)):
            c = genai.Client(
                api_key=secret,
                http_options=types.HttpOptions(
                    base_url=gw.url, api_version="v1beta", timeout=30_000
                ),
            )
            try:
                if status == 401:
                    with pytest.raises(errors.ClientError) as caught:
                        c.models.generate_content(model="bench/trio:pick", contents=ASK)
                    assert caught.value.code == 401
                    assert caught.value.status == "UNAUTHENTICATED"
                    assert "x-goog-api-key" in caught.value.message
                else:
                    reply = c.models.generate_content(model="bench/trio:pick", contents=ASK)
                    assert reply.text.startswith("[simulated fast]")
            finally:
                c.close()
