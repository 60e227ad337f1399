"""Streamed pick and merged replies token by token: when the answer that will be the reply is known
before it is written (pick: the first choice, when nothing in its answer needs checking; merged:
the merger), its upstream call is streamed and each piece reaches the caller as it arrives, in
every wire format. A first choice that fails before its first piece fails over (that answer sent
whole); one cut after it ends the stream with an error; every other case sends the answer whole
and says why in ``bench.buffered``. The panel is logged as any other: every seat's record whole,
the same call ids.

The simulator holds the rest of a streamed answer after its first piece (``hold_stream``) until
the test releases it, so "before the answer is complete" is an order of events, not a time."""

import json
import socket

import anthropic
import pytest

from conftest import PATIENCE, logged, openai_client, read_jsonl, wait_until
from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.roster import Roster
from sse import RawStream

ASK = [{"role": "user", "content": "Review: x = 1/0"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "parameters": {"type": "object", "properties": {"number": {"type": "string"}}},
        },
    }
]
SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}


def chat_stream(gateway, model="bench/trio:pick", **extra) -> RawStream:
    return RawStream(
        gateway.server,
        "/v1/chat/completions",
        {"model": model, "messages": ASK, "stream": True, **extra},
    )


def content(event) -> str:
    name, data = event
    if not isinstance(data, dict) or not data.get("choices"):
        return ""
    return data["choices"][0]["delta"].get("content") or ""


def first_text(stream: RawStream) -> str:
    """Read up to the first event that carries text; its text."""
    while True:
        event = stream.next()
        if content(event):
            return content(event)


def panel_logged(home, panel: str) -> dict:
    assert wait_until(lambda: any(r["panel"] == panel for r in logged(home)))
    return next(r for r in logged(home) if r["panel"] == panel)


def evidence(home, panel: str) -> dict:
    return {
        r["alias"]: r
        for r in read_jsonl(home.gateway_runs / "evidence.jsonl")
        if r.get("kind") == "seat" and r.get("panel") == panel
    }


def test_pick_streams_the_first_choice_as_it_answers(gateway, home, sim):
    sim.script("fast", hold_stream=True, drip=0.001)
    with chat_stream(gateway) as stream:
        panel = stream.headers["x-panelist-panel"]
        first = first_text(stream)
        # the first piece is here while fast holds the rest of its answer
        assert sim.wait_held("fast", 1, PATIENCE) and first == "[simulated "
        assert panel not in {r["panel"] for r in logged(home)}
        sim.release("fast")
        rest = stream.rest()
    pieces = [first] + [content(e) for e in rest if content(e)]
    assert len(pieces) > 2, "the answer came as one block"
    final = rest[-2][1]
    assert rest[-1] == (None, "[DONE]") and final["choices"][0]["finish_reason"] == "stop"
    bench = final["bench"]
    assert bench["picked"]["alias"] == "fast" and "buffered" not in bench
    record = panel_logged(home, panel)
    fast = next(s for s in record["seats"] if s["alias"] == "fast")
    assert fast["answer"] == "".join(pieces) and fast["status"] == "ok"  # logged whole
    assert record["picked"] == bench["picked"]
    assert [s["call"] for s in record["seats"]] == [s["call"] for s in bench["seats"]]
    seat = evidence(home, panel)["fast"]  # the one seat record shape, tokens from the stream
    assert seat["status"] == "ok" and seat["tokens"]["completion"] > 0
    assert seat["finish_reason"] == "stop" and seat["attempts"] == 1
    (asked,) = [r["body"] for r in sim.requests if r["model"] == "fast"]
    assert asked["stream"] is True
    assert all(r["body"]["stream"] is False for r in sim.requests if r["model"] != "fast")


def test_the_best_member_by_rate_is_streamed_though_others_finish_first(gateway, home, sim):
    status, body, _ = gateway.post("/v1/chat/completions", {"model": "bench/trio", "messages": ASK})
    call = next(s["call"] for s in body["bench"]["seats"] if s["alias"] == "slow")
    assert gateway.post("/bench/verdict", {"call": call, "useful": True})[0] == 200
    sim.script("slow", hold_stream=True)
    with chat_stream(gateway) as stream:
        first = first_text(stream)
        assert sim.wait_held("slow", 1, PATIENCE) and first == "[simulated "
        sim.release("slow")
        rest = stream.rest()
    assert rest[-2][1]["bench"]["picked"]["alias"] == "slow"


def test_the_openai_sdk_reads_the_first_choices_tokens_as_they_come(gateway, sim):
    sim.script("fast", hold_stream=True)
    with openai_client(gateway) as client:
        with client.chat.completions.stream(model="bench/trio:pick", messages=ASK) as stream:
            deltas, chunks = [], []
            for event in stream:
                if event.type == "chunk":
                    chunks.append(event.chunk)
                if event.type == "content.delta":
                    deltas.append(event.delta)
                    if len(deltas) == 1:
                        assert sim.wait_held("fast", 1, PATIENCE)  # the rest is still held
                        sim.release("fast")
            final = stream.get_final_completion()
    assert len(deltas) > 2 and "".join(deltas) == final.choices[0].message.content
    assert final.choices[0].message.content.startswith("[simulated fast]")
    assert chunks[-1].model_extra["bench"]["picked"]["alias"] == "fast"


FORMATS = {
    "responses": ("/v1/responses", {"input": "Review: x = 1/0"}, "response.output_text.delta"),
    "messages": ("/v1/messages", {"max_tokens": 300, "messages": ASK}, "content_block_delta"),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_pick_streams_token_by_token_in_the_other_formats(gateway, sim, fmt):
    path, body, delta = FORMATS[fmt]
    sim.script("fast", hold_stream=True)
    with RawStream(
        gateway.server, path, dict(body, model="bench/trio:pick", stream=True)
    ) as stream:
        seen = []
        while not seen or seen[-1][0] != delta:
            seen.append(stream.next())
        assert sim.wait_held("fast", 1, PATIENCE)
        sim.release("fast")
        rest = stream.rest()
    events = [e for e in seen + rest if e[0] not in ("comment", "ping")]
    text = [
        d["delta"] if fmt == "responses" else d["delta"]["text"] for n, d in events if n == delta
    ]
    assert len(text) > 2 and "".join(text).startswith("[simulated fast]")
    if fmt == "responses":
        names = [n for n, _ in events]
        assert names[:4] == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
        ]
        assert names[-4:] == [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
        done = events[-4][1]
        assert done["text"] == "".join(text)
        final = events[-1][1]["response"]
        assert final["output"][0]["content"][0]["text"] == "".join(text)
        assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
        assert final["bench"]["picked"]["alias"] == "fast"
    else:
        names = [n for n, _ in events]
        assert names[:2] == ["message_start", "content_block_start"]
        assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
        assert names.count("content_block_start") == 1
        assert events[-2][1]["bench"]["picked"]["alias"] == "fast"


def test_a_first_choice_that_fails_before_its_first_token_fails_over_whole(gateway, home, sim):
    sim.script("fast", fail="server_error")
    with chat_stream(gateway) as stream:
        events = stream.rest()
    texts = [content(e) for e in events if content(e)]
    bench = events[-2][1]["bench"]
    assert bench["picked"]["alias"] == "mid" and "failover" in bench["note"]
    assert len(texts) == 1 and texts[0].startswith("[simulated mid]")  # sent whole
    assert "member1 fast failed before its first token" in bench["buffered"]


def test_a_first_choice_cut_after_its_first_token_ends_the_stream_with_an_error(gateway, home, sim):
    sim.script("fast", fail="reset")
    with chat_stream(gateway) as stream:
        panel = stream.headers["x-panelist-panel"]
        events = stream.rest()
    texts = [content(e) for e in events if content(e)]
    assert texts and "".join(texts).startswith("[simulated ")  # what came before the cut
    error = events[-2][1]["error"]
    assert error["code"] == "answer_broke_off" and "member1 fast" in error["message"]
    assert events[-1] == (None, "[DONE]")
    record = panel_logged(home, panel)
    fast = next(s for s in record["seats"] if s["alias"] == "fast")
    assert fast["status"] == "error" and "mid-answer" in fast["error"]
    assert "broke off" in record["note"]


@pytest.mark.parametrize(
    "extra, why",
    [
        ({"response_format": SCHEMA}, "JSON"),
        ({"tools": TOOLS, "tool_choice": "required"}, "tool_choice"),
        (
            {
                "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "lookup_order"}},
            },
            "tool_choice",
        ),
    ],
)
def test_a_pick_whose_answer_must_be_checked_first_is_sent_whole_and_says_why(
    gateway, sim, extra, why
):
    if "tools" in extra:  # a seat that calls the tool asked for: the pick has an answer
        sim.script("mid", tool_calls=[{"name": "lookup_order", "arguments": {"number": "42"}}])
    with chat_stream(gateway, **extra) as stream:
        events = stream.rest()
    bench = events[-2][1]["bench"]
    assert why in bench["buffered"], bench["buffered"]
    assert len([e for e in events if content(e)]) <= 1  # the answer, whole (or tool calls)
    assert all(r["body"]["stream"] is False for r in sim.requests)


def merged_by(home, merger: str) -> None:
    Collections(home).save(Roster(home).view(), "trio", ["fast", "mid", "slow"], merger=merger)


def test_merged_streams_the_mergers_tokens_as_they_arrive(gateway, home, sim):
    merged_by(home, "x-two")
    sim.script("x-two", hold_stream=True)
    with chat_stream(gateway, model="bench/trio:merged") as stream:
        panel = stream.headers["x-panelist-panel"]
        first = first_text(stream)
        assert sim.wait_held("x-two", 1, PATIENCE) and first == "[simulated "
        sim.release("x-two")
        rest = stream.rest()
    pieces = [first] + [content(e) for e in rest if content(e)]
    bench = rest[-2][1]["bench"]
    assert bench["merger"]["alias"] == "x-two" and "buffered" not in bench
    assert len(pieces) > 2
    record = panel_logged(home, panel)
    assert record["merger"]["answer"] == "".join(pieces) and record["merger"]["status"] == "ok"


def test_a_merged_json_reply_is_sent_whole_and_says_why(gateway, home, sim):
    merged_by(home, "x-two")
    with chat_stream(gateway, model="bench/trio:merged", response_format=SCHEMA) as stream:
        events = stream.rest()
    bench = events[-2][1]["bench"]
    assert bench["merger"]["alias"] == "x-two" and "JSON" in bench["buffered"]
    (text,) = [content(e) for e in events if content(e)]
    assert json.loads(text) == {"ok": True}


def test_a_merger_that_fails_before_its_first_token_leaves_every_answer_whole(gateway, home, sim):
    merged_by(home, "x-two")
    sim.script("x-two", fail="server_error")
    with chat_stream(gateway, model="bench/trio:merged") as stream:
        events = stream.rest()
    bench = events[-2][1]["bench"]
    assert "the merger x-two failed" in bench["note"]
    assert "the merger failed before its first token" in bench["buffered"]
    (text,) = [content(e) for e in events if content(e)]
    assert "## Seat 1: member · fast" in text


def test_a_reply_not_streamed_says_nothing_of_buffering(gateway):
    status, body, _ = gateway.post(
        "/v1/chat/completions",
        {"model": "bench/trio:pick", "messages": ASK, "response_format": SCHEMA},
    )
    assert status == 200 and "buffered" not in body["bench"]


def test_the_openai_sdk_gets_a_merged_stream_unchanged(gateway, home, sim):
    merged_by(home, "x-two")
    with openai_client(gateway) as client:
        with client.chat.completions.stream(model="bench/trio:merged", messages=ASK) as stream:
            events = list(stream)
            final = stream.get_final_completion()
    text = "".join(e.delta for e in events if e.type == "content.delta")
    assert text == final.choices[0].message.content and text.startswith("[simulated x-two]")
    last = [e.chunk for e in events if e.type == "chunk"][-1]
    assert last.model_extra["bench"]["merger"]["alias"] == "x-two"


def test_the_anthropic_helper_reads_the_tokens_as_they_come(gateway, sim):
    sim.script("fast", hold_stream=True)
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="local", max_retries=0, timeout=PATIENCE
    ) as client:
        with client.messages.stream(
            model="bench/trio:pick", max_tokens=300, messages=ASK
        ) as stream:
            pieces = []
            for text in stream.text_stream:
                pieces.append(text)
                if len(pieces) == 1:
                    assert sim.wait_held("fast", 1, PATIENCE)  # the rest is still held
                    sim.release("fast")
            final = stream.get_final_message()
    assert len(pieces) > 2 and "".join(pieces) == final.content[0].text
    assert final.stop_reason == "end_turn"


def test_the_responses_helper_reads_the_tokens_as_they_come(gateway, sim):
    sim.script("fast", hold_stream=True)
    with openai_client(gateway) as client:
        with client.responses.stream(model="bench/trio:pick", input="Review: x = 1/0") as stream:
            pieces = []
            for event in stream:
                if event.type == "response.output_text.delta":
                    pieces.append(event.delta)
                    if len(pieces) == 1:
                        assert sim.wait_held("fast", 1, PATIENCE)
                        sim.release("fast")
            final = stream.get_final_response()
    assert len(pieces) > 2 and "".join(pieces) == final.output_text
    assert final.model_extra["bench"]["picked"]["alias"] == "fast"


@pytest.mark.parametrize("mode, held", [("pick", "fast"), ("merged", "x-two")])
def test_a_caller_that_leaves_mid_answer_cancels_the_panel(gateway, home, sim, mode, held):
    merged_by(home, "x-two")
    sim.script(held, hold_stream=True)
    stream = chat_stream(gateway, model=f"bench/trio:{mode}")
    try:
        panel = stream.headers["x-panelist-panel"]
        first_text(stream)
        assert sim.wait_held(held, 1, PATIENCE)
    finally:
        stream.sock.shutdown(socket.SHUT_RDWR)
        stream.close()
    assert sim.wait_disconnects(1, timeout=PATIENCE)  # the streamed call was cut
    record = panel_logged(home, panel)
    assert record["abandoned"] is True
    cut = (
        record["merger"]
        if mode == "merged"
        else next(s for s in record["seats"] if s["alias"] == held)
    )
    assert cut["status"] == "cancelled"


STALLED = {
    "chat": ("/v1/chat/completions", {"messages": ASK}),
    "responses": ("/v1/responses", {"input": "Review: x = 1/0"}),
    "messages": ("/v1/messages", {"max_tokens": 300, "messages": ASK}),
}


def stalled_error(fmt: str, events: list) -> tuple[str, str]:
    """The code and message of the error a stream of ``fmt`` ended with."""
    data = [d for n, d in events if isinstance(d, dict)]
    if fmt == "responses":
        (failed,) = [d for n, d in events if n == "error"]
        return failed["code"], failed["message"]
    if fmt == "messages":
        (failed,) = [d for n, d in events if n == "error"]
        return failed["error"]["type"], failed["error"]["message"]
    return data[-1]["error"]["code"], data[-1]["error"]["message"]


@pytest.mark.parametrize("fmt", list(STALLED))
def test_a_first_choice_that_stalls_mid_answer_ends_the_stream_at_the_stall_limit(home, sim, fmt):
    from conftest import Gateway
    from panelist.gateway import make_gateway

    sim.script("fast", hold_stream=True)  # its first piece, then nothing until released
    path, body = STALLED[fmt]
    with Gateway(make_gateway(home, env={"PANELIST_STALL_TIMEOUT": "0.2"})) as gateway:
        with RawStream(
            gateway.server, path, dict(body, model="bench/trio:pick", stream=True)
        ) as stream:
            panel = stream.headers["x-panelist-panel"]
            events = stream.rest()  # ends though fast is still held
        assert sim.wait_disconnects(1, PATIENCE)  # the stalled call alone was cut
        code, message = stalled_error(fmt, events)
        assert "member1 fast stalled mid-answer" in message and "0.2 s" in message
        if fmt != "messages":
            assert code == "answer_stalled"
        record = panel_logged(home, panel)
    seats = {s["alias"]: s for s in record["seats"]}
    assert seats["fast"]["status"] == "cancelled"
    assert seats["mid"]["status"] == seats["slow"]["status"] == "ok"  # the others went on
    assert "stalled" in record["note"] and not record["abandoned"]
    sim.release("fast")


def test_the_stall_limit_is_a_gateway_limit_too(gateway, home, sim):
    Collections(home).set_limits({"stall_timeout": 0.2})
    sim.script("fast", hold_stream=True)
    with chat_stream(gateway) as stream:
        events = stream.rest()
    assert events[-2][1]["error"]["code"] == "answer_stalled"
    assert "0.2 s" in events[-2][1]["error"]["message"]
    sim.release("fast")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_stall_limit_that_is_not_a_positive_number_is_refused_at_start(home, value):
    from panelist.gateway import make_gateway
    from panelist.metrics.errors import ConfigInvalid

    with pytest.raises(ConfigInvalid, match="PANELIST_STALL_TIMEOUT"):
        make_gateway(home, env={"PANELIST_STALL_TIMEOUT": value})
    with pytest.raises(ConfigInvalid, match="stall_timeout"):
        Collections(home).set_limits({"stall_timeout": 0})
