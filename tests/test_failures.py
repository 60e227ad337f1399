"""Failures are statuses: a panel none of whose seats answered is a 502 (every seat rate limited:
a 503 with Retry-After), never a 200 carrying error text, in every reply mode, with the seats in
the error body and the panel logged all the same. A stream, which opens at once, ends with the
same error body as an error event."""

import json

import openai
import pytest

from conftest import PATIENCE, TEST_MODELS, raw_stream, read_jsonl
from sse import RawStream
from panelist.metrics.cli.main import main

ASK = [{"role": "user", "content": "Review: x = 1/0"}]


def fail_everyone(sim, **how):
    for alias in TEST_MODELS:
        sim.script(alias, **how)


@pytest.mark.parametrize("mode", ["all", "merged", "pick"])
def test_every_seat_failed_is_a_502_with_the_seats(gateway, home, sim, mode):
    fail_everyone(sim, fail="server_error")
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model=f"bench/trio:{mode}", messages=ASK)
    exc = err.value
    assert exc.status_code == 502 and exc.body["code"] == "all_seats_failed"
    assert "try again" in exc.message
    seats = exc.body["seats"]
    assert len(seats) == 5 and {s["status"] for s in seats} == {"error"}
    assert all(s["error"].startswith("server_error") for s in seats)
    panel = exc.response.headers["x-panelist-panel"]
    (record,) = read_jsonl(home.gateway_runs / "calls.jsonl")  # logged all the same
    assert record["panel"] == panel and len(record["seats"]) == 5
    assert record["abandoned"] is False and "merger" not in record


def test_the_clients_own_retries_do_not_start_another_panel(gateway, home, sim):
    fail_everyone(sim, fail="server_error")
    # the openai package retries a 5xx twice by default; x-should-retry tells it not to
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="local", timeout=PATIENCE) as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="bench/trio", messages=ASK)
    assert err.value.status_code == 502
    assert err.value.response.headers["x-should-retry"] == "false"
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 1


@pytest.mark.parametrize("mode", ["all", "merged", "pick"])
def test_a_failed_stream_ends_with_the_error_a_reply_would_have_had(gateway, home, sim, mode):
    # a stream opens at once (tests/test_stream_open.py): a panel that fails after that ends
    # with an error event holding the body a reply would have had, and the openai package raises
    fail_everyone(sim, fail="empty")
    with RawStream(
        gateway.server,
        "/v1/chat/completions",
        {"model": f"bench/trio:{mode}", "messages": ASK, "stream": True},
    ) as stream:
        assert stream.status == 200
        panel = stream.headers["x-panelist-panel"]
        events = [e for e in stream.rest() if e[0] != "comment"]
    assert events[0][1]["choices"][0]["delta"] == {"role": "assistant"}
    sections = [e[1]["choices"][0]["delta"]["content"] for e in events[1:-2]]
    if mode == "all":  # each failed seat's section came as it ended
        assert len(sections) == 5 and all("> empty:" in s for s in sections), sections
    else:
        assert not sections
    error = events[-2][1]["error"]
    assert error["code"] == "all_seats_failed" and {s["status"] for s in error["seats"]} == {
        "empty"
    }
    assert events[-1] == (None, "[DONE]")
    (record,) = read_jsonl(home.gateway_runs / "calls.jsonl")  # logged all the same
    assert record["panel"] == panel and record["abandoned"] is False

    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        with pytest.raises(openai.APIError) as caught:
            list(
                client.chat.completions.create(
                    model=f"bench/trio:{mode}", messages=ASK, stream=True
                )
            )
    assert caught.value.body["code"] == "all_seats_failed"
    assert "no seat of bench/trio answered" in caught.value.message


def test_a_stream_sends_the_sections_of_failed_seats_as_they_end(gateway, sim):
    sim.script("fast", fail="server_error")
    sim.script("mid", fail="empty")
    head, body = raw_stream(gateway, {"model": "bench/trio", "messages": ASK})
    assert head.startswith("HTTP/1.1 200")
    text = body.decode()
    assert "## Seat 1: member · fast" in text and "## Seat 2: member · mid" in text


def test_every_seat_rate_limited_is_a_503_with_retry_after(gateway, sim):
    fail_everyone(sim, fail="rate_limit", retry_after=90)
    status, body, headers = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio:pick", "messages": ASK}
    )
    assert status == 503 and body["error"]["code"] == "all_seats_rate_limited", body
    assert 1 <= int(headers["Retry-After"]) <= 90
    assert "try again in" in body["error"]["message"]
    assert {s["status"] for s in body["error"]["seats"]} == {"error"}
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        with pytest.raises(openai.APIStatusError) as err:  # now none can be seated at all
            client.chat.completions.create(model="bench/trio", messages=ASK)
    assert err.value.status_code == 503 and 1 <= int(err.value.response.headers["retry-after"])


def test_a_mix_of_rate_limits_and_errors_is_a_502(gateway, sim):
    fail_everyone(sim, fail="rate_limit", retry_after=90)
    sim.script("mid", fail="server_error")
    status, body, headers = gateway.post(
        "/v1/chat/completions", {"model": "bench/trio", "messages": ASK}
    )
    assert status == 502 and body["error"]["code"] == "all_seats_failed"
    assert "Retry-After" not in headers


def test_ask_against_a_gateway_exits_3_when_no_seat_answered(gateway, sim, capsys):
    fail_everyone(sim, fail="server_error")
    code = main(["ask", "trio", "hello", "--url", gateway.url + "/v1"])
    out, err = capsys.readouterr()
    assert code == 3, err
    assert out.count("> error: server_error") == 5 and "no seat of bench/trio answered" in err
    code = main(["ask", "trio", "hello", "--url", gateway.url, "--json"])
    out, _ = capsys.readouterr()
    assert code == 3 and json.loads(out)["error"]["code"] == "all_seats_failed"
