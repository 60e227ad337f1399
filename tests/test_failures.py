"""Failures are statuses: a panel none of whose seats answered is a 502 (every seat rate limited:
a 503 with Retry-After), never a 200 carrying error text; streamed or not, in every reply mode,
with the seats in the error body and the panel logged all the same."""

import json

import openai
import pytest

from conftest import PATIENCE, TEST_MODELS, raw_stream, read_jsonl
from panelist.metrics.cli.main import main

ASK = [{"role": "user", "content": "Review: x = 1/0"}]


def fail_everyone(sim, **how):
    for alias in TEST_MODELS:
        sim.script(alias, **how)



@pytest.mark.parametrize("mode", ["all", "merged", "pick"])
def test_every_seat_failed_is_a_502_with_the_seats(gateway, home, sim, mode):
    fail_everyone(sim, fail="server_error")
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="local", max_retries=0,
                       timeout=PATIENCE) as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model=f"bench/trio:{mode}", messages=ASK)
    exc = err.value
    assert exc.status_code == 502 and exc.body["code"] == "all_seats_failed"
    assert "try again" in exc.message
    seats = exc.body["seats"]
    assert len(seats) == 5 and {s["status"] for s in seats} == {"error"}
    assert all(s["error"].startswith("server_error") for s in seats)
    panel = exc.response.headers["x-panelist-panel"]
    (record,) = read_jsonl(home.gateway_runs / "calls.jsonl")   # logged all the same
    assert record["panel"] == panel and len(record["seats"]) == 5
    assert record["abandoned"] is False and "merger" not in record


def test_the_clients_own_retries_do_not_start_another_panel(gateway, home, sim):
    fail_everyone(sim, fail="server_error")
    # the openai package retries a 5xx twice by default; x-should-retry tells it not to
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="local",
                       timeout=PATIENCE) as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="bench/trio", messages=ASK)
    assert err.value.status_code == 502
    assert err.value.response.headers["x-should-retry"] == "false"
    assert len(read_jsonl(home.gateway_runs / "calls.jsonl")) == 1


@pytest.mark.parametrize("mode", ["all", "merged", "pick"])
def test_a_failed_stream_is_a_real_error_status(gateway, sim, mode):
    fail_everyone(sim, fail="empty")
    head, body = raw_stream(gateway, {"model": f"bench/trio:{mode}", "messages": ASK})
    assert head.startswith("HTTP/1.1 502"), head
    assert "content-type: application/json" in head.lower() and "x-panelist-panel: p" in \
        head.lower()
    error = json.loads(body)["error"]
    assert error["code"] == "all_seats_failed" and {s["status"] for s in error["seats"]} == {
        "empty"}


def test_a_stream_begins_with_the_first_answer_after_failed_seats(gateway, sim):
    sim.script("fast", fail="server_error")
    sim.script("mid", fail="empty")
    head, body = raw_stream(gateway, {"model": "bench/trio", "messages": ASK})
    assert head.startswith("HTTP/1.1 200")
    text = body.decode()
    # the seats that failed first are still sent, once the stream had reason to begin
    assert "## Seat 1: member · fast" in text and "## Seat 2: member · mid" in text


def test_every_seat_rate_limited_is_a_503_with_retry_after(gateway, sim):
    fail_everyone(sim, fail="rate_limit", retry_after=90)
    status, body, headers = gateway.post("/v1/chat/completions",
                                         {"model": "bench/trio:pick", "messages": ASK})
    assert status == 503 and body["error"]["code"] == "all_seats_rate_limited", body
    assert 1 <= int(headers["Retry-After"]) <= 90
    assert "try again in" in body["error"]["message"]
    assert {s["status"] for s in body["error"]["seats"]} == {"error"}
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key="local", max_retries=0,
                       timeout=PATIENCE) as client:
        with pytest.raises(openai.APIStatusError) as err:   # now none can be seated at all
            client.chat.completions.create(model="bench/trio", messages=ASK)
    assert err.value.status_code == 503 and 1 <= int(err.value.response.headers["retry-after"])


def test_a_mix_of_rate_limits_and_errors_is_a_502(gateway, sim):
    fail_everyone(sim, fail="rate_limit", retry_after=90)
    sim.script("mid", fail="server_error")
    status, body, headers = gateway.post("/v1/chat/completions",
                                         {"model": "bench/trio", "messages": ASK})
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
