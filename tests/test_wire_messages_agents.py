"""What Anthropic's agent clients send to ``/v1/messages``: keys in either header, and the stream
helper's final message."""

import anthropic
import pytest

from conftest import Gateway, logged, move_to, set_limits, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.server.keys import Keys

ASK = [{"role": "user", "content": "Where is order 42?"}]
LOOKUP = {"name": "lookup_order", "description": "Find an order by its number",
          "input_schema": {"type": "object", "properties": {"number": {"type": "string"}},
                           "required": ["number"]}}


@pytest.fixture()
def client(gateway):
    with anthropic.Anthropic(base_url=gateway.url, api_key="local", max_retries=0) as c:
        yield c


def call_tools(sim, *aliases) -> None:
    """Script the members to call lookup_order whenever it is offered (and no result came yet)."""
    for alias in aliases:
        sim.script(alias, tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])


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
    with client.messages.stream(model="bench/trio:pick", max_tokens=300, messages=ASK,
                                tools=[LOOKUP]) as stream:
        final = stream.get_final_message()
        panel = stream.response.headers["X-Panelist-Panel"]
    assert final.stop_reason == "tool_use"
    (call,) = final.content
    assert call.type == "tool_use" and call.input == {"number": "42"}
    assert final.model_extra["bench"]["panel"] == panel
    assert final.model_extra["bench"]["picked"]["call"].startswith(panel)


def test_the_stream_helper_keeps_bench_when_the_stream_opened_early(home, gated):
    set_limits(home, max_explorers=0)
    move_to(home, gated, "slow")   # slow waits at its gate: the stream opens with keep-alives
    with Gateway(make_gateway(home, keepalive=0.2, env={})) as gw, \
            anthropic.Anthropic(base_url=gw.url, api_key="local", max_retries=0) as client:
        with client.messages.stream(model="bench/trio", max_tokens=50, messages=ASK) as stream:
            panel = stream.response.headers["X-Panelist-Panel"]   # the head came: slow is held
            gated.open("slow")
            final = stream.get_final_message()
    assert "[gated slow]" in final.content[0].text
    assert final.model_extra["bench"]["panel"] == panel
    assert {s["alias"]: s["status"] for s in final.model_extra["bench"]["seats"]} == {
        "fast": "ok", "mid": "ok", "slow": "ok"}
