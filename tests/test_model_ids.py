"""The model ids a caller sees: what ``GET /v1/models`` says each id takes (tools go to
``:pick`` and ``:merged``, never to the ``all`` mode, which refuses them), ``models.retrieve`` of
every mode, a 404 that names every mode, and the ``model`` of every reply echoing the id the
caller asked for, in each wire format, streamed and not. The clients are the `openai` and
`anthropic` packages against a real gateway on the simulated upstream."""

import anthropic
import openai
import pytest

from conftest import PATIENCE, openai_client
from panelist.metrics.roster.roster import Roster

ASK = [{"role": "user", "content": "Review: x = 1/0"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    },
}
IDS = ["bench/trio", "bench/trio:all", "bench/trio:merged", "bench/trio:pick"]


@pytest.fixture()
def client(gateway):
    with openai_client(gateway) as c:
        yield c


@pytest.fixture()
def claude(gateway):
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="local", max_retries=0, timeout=PATIENCE
    ) as c:
        yield c


def with_tools(home):
    roster = Roster(home)
    for alias in ("fast", "mid", "slow"):
        roster.add_model(alias, "sim", family=alias, context=100_000, tools=True)


# -- what the listing says ----------------------------------------------------------------------
def test_the_listing_names_the_ids_that_take_tools_and_the_all_mode_claims_none(client, home):
    with_tools(home)
    listed = {m.id: m.model_extra for m in client.models.list()}
    assert list(listed) == ["bench/trio", "bench/trio:merged", "bench/trio:pick"]
    plain, merged, picked = listed.values()
    # the collection's own mode is `all`: it refuses tools, so it never says it takes them
    assert plain["reply"] == "all" and "tools" not in plain["together"]["capabilities"]
    assert merged["together"]["capabilities"] == ["tools"]
    assert picked["together"]["capabilities"] == ["tools"]
    for entry in listed.values():  # every entry says where tools (and JSON) go
        assert entry["takes_tools"] == ["bench/trio:merged", "bench/trio:pick"]


def test_what_the_listing_says_takes_tools_does_and_what_it_says_refuses_them_does(client, home):
    with_tools(home)
    entries = {m.id: m.model_extra for m in client.models.list()}
    for model_id, entry in entries.items():
        if model_id in entry["takes_tools"]:
            reply = client.chat.completions.create(model=model_id, messages=ASK, tools=[TOOL])
            assert reply.choices[0].message is not None
        else:
            with pytest.raises(openai.BadRequestError) as refused:
                client.chat.completions.create(model=model_id, messages=ASK, tools=[TOOL])
            for other in entry["takes_tools"]:  # the refusal names where to go
                assert other in refused.value.message


def test_a_collection_that_picks_by_default_lists_its_plain_id_as_taking_tools(client, home):
    with_tools(home)
    from panelist.metrics.roster.collection import Collections

    Collections(home).save(Roster(home).view(), "agents", ["fast", "mid"], reply="pick")
    listed = {m.id: m.model_extra for m in client.models.list()}
    assert {"bench/agents", "bench/agents:all", "bench/agents:merged"} <= set(listed)
    assert "bench/agents:pick" not in listed  # the plain id already is it
    assert listed["bench/agents"]["takes_tools"] == ["bench/agents", "bench/agents:merged"]
    assert listed["bench/agents:all"]["together"]["capabilities"] == []


@pytest.mark.parametrize("model_id", IDS)
def test_retrieve_answers_every_mode_of_a_collection(client, home, model_id):
    with_tools(home)
    got = client.models.retrieve(model_id)
    mode = model_id.partition(":")[2] or "all"
    assert got.id == model_id and got.model_extra["reply"] == mode
    assert got.model_extra["members"] == ["fast", "mid", "slow"]
    takes = got.model_extra["takes_tools"]
    assert takes == ["bench/trio:merged", "bench/trio:pick"]
    assert ("tools" in got.model_extra["together"]["capabilities"]) == (mode != "all")


@pytest.mark.parametrize("model_id", ["bench/nope", "bench/trio:best", "gpt-4o"])
def test_an_unknown_id_is_a_404_naming_every_mode_and_the_ids_there_are(client, model_id):
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve(model_id)
    message = missing.value.message
    assert missing.value.body["code"] == "model_not_found"
    assert f"no model '{model_id}' here" in message
    for mode in (":all", ":merged", ":pick"):
        assert mode in message
    assert "bench/trio, bench/trio:merged, bench/trio:pick" in message


# -- the model a reply names ---------------------------------------------------------------------
@pytest.mark.parametrize("model_id", IDS)
def test_a_chat_reply_names_the_model_asked_for_streamed_and_not(client, model_id):
    reply = client.chat.completions.create(model=model_id, messages=ASK)
    assert reply.model == model_id
    chunks = list(client.chat.completions.create(model=model_id, messages=ASK, stream=True))
    assert chunks and {c.model for c in chunks} == {model_id}


def test_a_reply_mode_asked_in_bench_keeps_the_model_as_sent(client):
    reply = client.chat.completions.create(
        model="bench/trio", messages=ASK, extra_body={"bench": {"reply": "pick"}}
    )
    assert reply.model == "bench/trio" and reply.model_extra["bench"]["reply"] == "pick"


@pytest.mark.parametrize("model_id", IDS)
def test_a_response_names_the_model_asked_for_streamed_and_not(client, model_id):
    response = client.responses.create(model=model_id, input=ASK)
    assert response.model == model_id
    with client.responses.stream(model=model_id, input=ASK) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.model == model_id
    shown = {e.response.model for e in events if hasattr(e, "response")}
    assert shown == {model_id}


@pytest.mark.parametrize("model_id", IDS)
def test_a_message_names_the_model_asked_for_streamed_and_not(claude, model_id):
    message = claude.messages.create(model=model_id, max_tokens=300, messages=ASK)
    assert message.model == model_id
    with claude.messages.stream(model=model_id, max_tokens=300, messages=ASK) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.model == model_id
    starts = [e.message.model for e in events if e.type == "message_start"]
    assert starts == [model_id]
