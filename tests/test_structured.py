"""Structured output end to end: the openai package's ``parse()`` with a pydantic model through
``:pick`` and ``:merged``, failover from an answer that is not the JSON asked for, and the
refusal of tools or JSON in ``all`` mode (which answers with markdown)."""

import json

import openai
import pytest
from pydantic import BaseModel

from conftest import openai_client, read_jsonl, set_limits, wait_until
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster

ASK = [{"role": "user", "content": "Review: x = 1/0"}]


class Place(BaseModel):
    file: str
    line: int


class Review(BaseModel):
    verdict: str
    place: Place  # a nested model: a $ref in the schema the package sends
    findings: list[str]


SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["verdict", "line"],
    "properties": {"verdict": {"type": "string"}, "line": {"type": "integer"}},
}
SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "review", "strict": True, "schema": SCHEMA},
}


def merger_requests(sim) -> list[dict]:
    return [r["body"] for r in sim.requests if "## The seats" in json.dumps(r["body"])]


@pytest.mark.parametrize("model", ["bench/trio:pick", "bench/trio:merged"])
def test_parse_with_a_pydantic_model(gateway, sim, model):
    with openai_client(gateway) as client:
        done = client.beta.chat.completions.parse(
            model=model, messages=ASK, response_format=Review, max_tokens=20
        )
    parsed = done.choices[0].message.parsed
    assert isinstance(parsed, Review) and isinstance(parsed.place, Place)
    bench = done.model_extra["bench"]

    # every seat was asked for the same JSON (a pick may reply before the last seat is asked)
    def seat_formats():
        return [
            r["body"].get("response_format", {}).get("type")
            for r in sim.requests
            if "## The seats" not in json.dumps(r["body"])
        ]

    assert wait_until(lambda: len(seat_formats()) == 5)
    assert seat_formats() == ["json_schema"] * 5
    if model.endswith(":pick"):
        assert bench["picked"]["alias"] == "fast" and parsed.verdict == "simulated fast"
    else:
        (merger_body,) = merger_requests(sim)
        assert merger_body["response_format"]["type"] == "json_schema"
        assert "JSON" in merger_body["messages"][0]["content"]
        # the merger's budget is its own, never the caller's 20 tokens
        assert merger_body["max_tokens"] >= 1024
        assert bench["merger"]["status"] == "ok" and "picked" not in bench
        assert parsed.verdict == f"simulated {bench['merger']['alias']}"


def test_an_invalid_json_pick_fails_over_to_a_valid_answer(gateway, home, sim):
    sim.script("fast", json="{not json")
    sim.script("mid", json={"verdict": "fine"})  # valid JSON, but the schema needs 'line'
    status, body, headers = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:pick", "messages": ASK, "response_format": SCHEMA_FORMAT},
    )
    assert status == 200, body
    bench = body["bench"]
    assert bench["picked"]["alias"] == "slow"
    assert json.loads(body["choices"][0]["message"]["content"]) == {
        "verdict": "simulated slow",
        "line": 1,
    }
    assert "member1 fast: not the JSON asked for" in bench["note"]
    assert "member2 mid: not the JSON asked for: $: missing required key line" in bench["note"]
    # the seats that were passed over still answered: they are logged ok and owed verdicts
    panel = headers["X-Panelist-Panel"]
    path = home.gateway_runs / "calls.jsonl"
    assert wait_until(lambda: path.exists() and any(r["panel"] == panel for r in read_jsonl(path)))
    (record,) = [r for r in read_jsonl(path) if r["panel"] == panel]
    assert {s["alias"]: s["status"] for s in record["seats"]}["fast"] == "ok"
    assert record["picked"]["alias"] == "slow" and "not the JSON" in record["note"]


def test_json_object_mode_wants_an_object(gateway, sim):
    sim.script("fast", json=[1, 2])
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:pick", "messages": ASK, "response_format": {"type": "json_object"}},
    )
    assert status == 200 and body["bench"]["picked"]["alias"] == "mid"
    assert "not the object JSON mode asks for" in body["bench"]["note"]


def test_no_valid_json_anywhere_is_a_502_saying_so(gateway, home, sim):
    for alias in ("fast", "mid", "slow", "x-one", "x-two", "x-three"):
        sim.script(alias, json="sure, here it is")
    for mode in ("pick", "merged"):
        status, body, headers = gateway.post(
            "/v1/chat/completions",
            {
                "model": f"bench/trio:{mode}",
                "messages": ASK,
                "response_format": {"type": "json_object"},
            },
        )
        assert status == 502 and body["error"]["code"] == "no_valid_json", body
        assert "JSON" in body["error"]["message"] and len(body["error"]["seats"]) == 5
        assert headers["X-Panelist-Panel"]


def test_an_invalid_merge_falls_back_to_a_valid_seat_answer(gateway, home, sim):
    Collections(home).save(
        Roster(home).view(),
        "trio",
        ["fast", "mid", "slow"],
        merger="x-two",
        description="Three simulated reviewers",
    )
    set_limits(home, max_explorers=0)
    sim.script("x-two", json="merged: everyone agrees")
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:merged", "messages": ASK, "response_format": SCHEMA_FORMAT},
    )
    assert status == 200, body
    bench = body["bench"]
    assert bench["merger"]["alias"] == "x-two" and bench["picked"]["alias"] == "fast"
    assert "the merger x-two failed (not the JSON asked for" in bench["note"]
    assert json.loads(body["choices"][0]["message"]["content"])["verdict"] == "simulated fast"


def test_merged_json_keeps_which_seats_disagreed_with_it(gateway, home, sim):
    Collections(home).save(
        Roster(home).view(),
        "trio",
        ["fast", "mid", "slow"],
        merger="x-two",
        description="Three simulated reviewers",
    )
    set_limits(home, max_explorers=0)
    sim.script("fast", json={"verdict": "bug", "line": 1})
    sim.script("mid", json={"verdict": "bug", "line": 2, "extra": True})
    sim.script("slow", json="it is a bug")
    sim.script("x-two", json={"verdict": "bug", "line": 1})  # the merger takes the majority
    status, body, headers = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:merged", "messages": ASK, "response_format": {"type": "json_object"}},
    )
    assert status == 200, body
    panel = headers["X-Panelist-Panel"]
    assert json.loads(body["choices"][0]["message"]["content"]) == {"verdict": "bug", "line": 1}
    expected = [
        {"call": f"{panel}.member2", "alias": "mid", "fields": ["extra", "line"]},
        {"call": f"{panel}.member3", "alias": "slow", "fields": None},
    ]
    assert body["bench"]["disagreement"] == expected
    (record,) = [r for r in read_jsonl(home.gateway_runs / "calls.jsonl") if r["panel"] == panel]
    assert record["disagreement"] == expected

    for alias in ("fast", "mid", "slow"):
        sim.script(alias, json={"verdict": "bug", "line": 1})
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:merged", "messages": ASK, "response_format": {"type": "json_object"}},
    )
    assert status == 200 and body["bench"]["disagreement"] == []  # checked, and none
    status, body, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio:merged", "messages": ASK}
    )
    assert status == 200 and "disagreement" not in body["bench"]  # prose says it itself


def test_merged_with_tools_lets_the_merger_call_a_tool(gateway, sim):
    tools = [
        {
            "type": "function",
            "function": {"name": "run_tests", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    for alias in ("fast", "mid", "slow", "x-one", "x-two", "x-three"):
        sim.script(alias, tool_calls=[{"name": "run_tests", "arguments": {}}])
    status, body, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio:merged", "messages": ASK, "tools": tools}
    )
    assert status == 200, body
    (merger_body,) = merger_requests(sim)
    assert merger_body["tools"] == tools
    message = body["choices"][0]["message"]
    assert body["choices"][0]["finish_reason"] == "tool_calls" and message["content"] is None
    assert message["tool_calls"] == body["bench"]["merger"]["tool_calls"]


def test_the_merger_budget_fits_its_window(gateway, home, sim):
    roster = Roster(home)
    roster.add_model("x-two", "sim", family="x-two", context=1100)
    Collections(home).save(roster.view(), "trio", ["fast", "mid", "slow"], merger="x-two")
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:merged", "messages": ASK, "max_completion_tokens": 5000},
    )
    assert status == 200 and body["bench"]["merger"]["alias"] == "x-two"
    (merger_body,) = merger_requests(sim)
    assert "max_tokens" not in merger_body  # the caller's key is the one used
    assert 0 < merger_body["max_completion_tokens"] < 1024  # window minus the input


@pytest.mark.parametrize(
    "extra, wanted",
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "JSON response_format"),
        ({"response_format": SCHEMA_FORMAT}, "JSON response_format"),
    ],
)
def test_all_mode_refuses_tools_and_json_naming_pick_and_merged(gateway, sim, extra, wanted):
    status, body, _ = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio", "messages": ASK, **extra}
    )
    assert status == 400, body
    message = body["error"]["message"]
    assert wanted in message and "bench/trio:pick" in message and "bench/trio:merged" in message
    assert not sim.requests, "a refused request reached a seat"
    with openai_client(gateway) as client:
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="bench/trio:all", messages=ASK, **extra)
    assert "bench/trio:pick" in err.value.message


def test_text_format_and_no_tools_are_fine_in_all_mode(gateway):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio", "messages": ASK, "response_format": {"type": "text"}, "tools": []},
    )
    assert status == 200 and "## Seat 1" in body["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    "fmt, param",
    [
        ("json", "response_format"),
        ({"type": "yaml"}, "response_format.type"),
        ({"type": "json_schema"}, "response_format.json_schema"),
        (
            {"type": "json_schema", "json_schema": {"schema": "x"}},
            "response_format.json_schema.schema",
        ),
    ],
)
def test_a_malformed_response_format_is_a_400_naming_its_field(gateway, sim, fmt, param):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:pick", "messages": ASK, "response_format": fmt},
    )
    assert status == 400 and body["error"]["param"] == param, body
    assert not sim.requests, "a refused request reached a seat"
