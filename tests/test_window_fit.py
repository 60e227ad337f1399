"""A prompt sits with the seats whose window holds it: a member or an explorer that cannot fit it
is named in ``bench.skipped`` and not asked, and only a prompt no seat can hold is refused, in
the words the clients trim on (OpenAI's ``context_length_exceeded``, Anthropic's "prompt is
too long"), on every wire format."""

import anthropic
import openai
import pytest

from conftest import logged, openai_client, set_limits
from panelist.metrics.roster.roster import Roster

LONG = "word " * 240  # 1,200 characters: an estimate of 330 tokens
ESTIMATE = 330


def windows(home, **context):
    roster = Roster(home)
    for alias, window in context.items():
        roster.add_model(alias, "sim", family=alias, context=window)


def ask(gateway, model="bench/trio", content=LONG, **extra):
    return gateway.post(
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": content}], **extra},
    )


def skipped(body) -> dict:
    return {s["alias"]: s for s in body["bench"]["skipped"]}


@pytest.mark.parametrize("mode", ["pick", "all", "merged"])
def test_the_members_whose_window_holds_the_prompt_sit_and_the_others_are_named(
    gateway, home, sim, mode
):
    set_limits(home, max_explorers=0)
    windows(home, fast=100)
    status, body, _ = ask(gateway, f"bench/trio:{mode}")
    assert status == 200, body
    assert [s["alias"] for s in body["bench"]["seats"]] == ["mid", "slow"]
    fast = skipped(body)["fast"]
    assert fast["seat"] == "member"
    assert f"context window 100 tokens is below the prompt's estimate of {ESTIMATE}" in fast["why"]
    assert sim.count("fast") == 0
    if mode == "pick":
        assert body["bench"]["picked"]["alias"] == "mid"


def test_explorers_and_nominees_that_cannot_hold_it_are_not_asked(gateway, home, sim):
    set_limits(home, max_explorers=2)
    windows(home, **{"x-one": 100, "x-two": 200})
    status, body, _ = ask(gateway, **{"with": ["x-one"]})
    assert status == 200, body
    assert [s["alias"] for s in body["bench"]["seats"]] == ["fast", "mid", "slow", "x-three"]
    why = skipped(body)
    assert why["x-one"]["seat"] == "nominee" and "context window 100" in why["x-one"]["why"]
    assert why["x-two"]["seat"] == "explorer" and "context window 200" in why["x-two"]["why"]
    assert sim.count("x-one") == sim.count("x-two") == 0


@pytest.fixture()
def none_fits(home):
    set_limits(home, max_explorers=0)
    windows(home, fast=100, mid=150, slow=120)
    return home


def test_a_prompt_no_seat_can_hold_is_what_the_openai_package_calls_context_length_exceeded(
    gateway, none_fits, sim
):
    seated = logged(none_fits)
    with openai_client(gateway) as client:
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as caught:
                client.chat.completions.create(
                    model="bench/trio:pick",
                    stream=stream,
                    messages=[{"role": "user", "content": LONG}],
                )
            error = caught.value
            assert error.status_code == 400 and error.code == "context_length_exceeded"
            assert error.param == "messages"
            assert error.body["message"].startswith(
                f"This model's maximum context length is 150 tokens. However, your messages "
                f"resulted in {ESTIMATE} tokens"
            )
            assert (
                "too long for every seat of bench/trio: fast (100 tokens), mid (150 tokens), "
                "slow (120 tokens)" in error.message
            )
        # the Responses API answers it the same way
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="bench/trio:pick", input=LONG)
        assert caught.value.code == "context_length_exceeded"
    assert sum(sim.count(a) for a in ("fast", "mid", "slow")) == 0  # nobody was asked
    assert logged(none_fits) == seated


def test_langchain_knows_it_for_a_context_overflow(gateway, none_fits):
    chat_models = pytest.importorskip("langchain_openai")
    from langchain_core.exceptions import ContextOverflowError

    llm = chat_models.ChatOpenAI(
        base_url=gateway.url + "/v1", api_key="local", model="bench/trio:pick", max_retries=0
    )
    with pytest.raises(ContextOverflowError):
        llm.invoke(LONG)
    llm.root_client.close()


def test_the_messages_api_says_prompt_is_too_long_as_anthropic_does(gateway, none_fits):
    with anthropic.Anthropic(base_url=gateway.url, api_key="local", max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model="bench/trio:pick",
                max_tokens=100,
                messages=[{"role": "user", "content": LONG}],
            )
    error = caught.value
    assert error.status_code == 400
    assert error.body["error"]["type"] == "invalid_request_error"
    assert error.body["error"]["message"].startswith(
        f"prompt is too long: {ESTIMATE} tokens > 150 maximum"
    )


def test_a_prompt_every_seat_says_is_too_long_is_refused_the_same_way_then_before_asking(
    gateway, home, sim
):
    """No window known: every seat is asked, every one says the prompt is too long; that is the
    caller's to fix (trim), not a 502. The windows they stated keep the next one from being
    asked at all."""
    set_limits(home, max_explorers=0)
    roster = Roster(home)
    for alias, window in (("fast", 100), ("mid", 200), ("slow", 150)):
        roster.add_model(alias, "sim", family=alias)  # nothing typed
        sim.script(alias, window=window)
    with openai_client(gateway) as client:
        for _ in range(2):
            with pytest.raises(openai.BadRequestError) as caught:
                client.chat.completions.create(
                    model="bench/trio", messages=[{"role": "user", "content": LONG}]
                )
            assert caught.value.code == "context_length_exceeded"
            assert caught.value.body["message"].startswith(
                "This model's maximum context length is 200 tokens."
            )
    assert [sim.count(a) for a in ("fast", "mid", "slow")] == [1, 1, 1]
    (panel,) = logged(home)  # the panel that was asked is written down
    assert {s["error_kind"] for s in panel["seats"]} == {"context_length"}
