"""A request sits only with models that can do what it needs: tools, a ``json_schema``
response format (structured output), images. A model known to lack one (its endpoint's listing
or an imported catalog says so, and nothing typed says otherwise) is named in ``bench.skipped``
as a member and not chosen as an explorer; a model nobody stated anything about sits (images
aside: a model must be known to see). A request nobody can take is refused, naming what is
missing."""

import openai
import pytest

from conftest import openai_client, set_limits
from panelist.metrics.cli.main import main
from panelist.metrics.roster.roster import Roster

TOOL = {
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
SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}
ASK = [{"role": "user", "content": "Where is order 42?"}]


def listed(home, sim, **lacking):
    """Script what each model lacks on the simulator and read its listing into the catalog."""
    for alias, caps in lacking.items():
        sim.script(alias, **{cap: False for cap in caps})
    assert main(["catalog", "refresh", "--data", str(home.root)]) == 0


def ask(gateway, model="bench/trio:pick", **extra):
    return gateway.post("/v1/chat/completions", {"model": model, "messages": ASK, **extra})


def seated(body) -> list[str]:
    return [s["alias"] for s in body["bench"]["seats"]]


def skipped(body) -> dict:
    return {s["alias"]: s for s in body["bench"]["skipped"]}


def test_models_known_to_lack_tools_are_not_asked_for_a_tool_request(gateway, home, sim, capsys):
    listed(home, sim, mid=["tools"], **{"x-one": ["tools"]})
    status, body, _ = ask(gateway, tools=[TOOL])
    assert status == 200, body
    # x-two and x-three: nothing is stated about them, so they may call tools
    assert seated(body)[:2] == ["fast", "slow"]
    assert set(seated(body)[2:]) == {"x-two", "x-three"}
    why = skipped(body)
    assert why["mid"]["seat"] == "member" and "does not call tools" in why["mid"]["why"]
    assert why["x-one"]["seat"] == "explorer" and "does not call tools" in why["x-one"]["why"]
    assert sim.count("mid") == sim.count("x-one") == 0
    # without tools they sit as ever
    status, body, _ = ask(gateway)
    assert status == 200 and "mid" in seated(body)


def test_a_typed_tools_flag_wins_over_the_listing(gateway, home, sim, capsys):
    listed(home, sim, mid=["tools"])
    Roster(home).add_model("mid", "sim", family="mid", context=100_000, tools=True)
    status, body, _ = ask(gateway, tools=[TOOL])
    assert status == 200 and "mid" in seated(body)


def test_a_json_schema_request_leaves_out_models_without_structured_output(
    gateway, home, sim, capsys
):
    set_limits(home, max_explorers=0)
    listed(home, sim, slow=["structured_output"])
    status, body, _ = ask(gateway, response_format=SCHEMA)
    assert status == 200, body
    assert seated(body) == ["fast", "mid"] and sim.count("slow") == 0
    assert "structured output" in skipped(body)["slow"]["why"]
    # plain JSON mode is not structured output: every model may try it
    status, body, _ = ask(gateway, response_format={"type": "json_object"})
    assert status == 200 and seated(body) == ["fast", "mid", "slow"]


def test_a_tool_request_no_seat_can_take_is_refused_naming_what_is_missing(
    gateway, home, sim, capsys
):
    set_limits(home, max_explorers=0)
    listed(home, sim, fast=["tools"], mid=["tools"], slow=["tools"])
    with openai_client(gateway) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="bench/trio:pick", messages=ASK, tools=[TOOL])
    error = caught.value
    assert error.param == "tools"
    assert "no seat of bench/trio can call tools" in error.message
    assert "fast, mid, slow" in error.message
    assert sum(sim.count(a) for a in ("fast", "mid", "slow")) == 0
