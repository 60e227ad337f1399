"""The Ollama and Gemini adapters' translations, in process (``metrics.wire.ollama``,
``gemini``), and their streams on the wire: NDJSON lines that each parse, keep-alives included,
and a stream that breaks off ending in the format's own error."""

import http.client
import json

import pytest

from conftest import PATIENCE, Gateway
from panelist.gateway import make_gateway
from panelist.metrics.errors import BadRequest
from panelist.metrics.wire import gemini, ollama

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ"
    "RU5ErkJggg=="
)
JPEG = "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0a"


def test_ollama_chat_becomes_a_chat_body():
    chat, stream = ollama.chat_to_chat(
        {
            "model": "bench/trio:latest",
            "format": "json",
            "options": {"temperature": 0.1, "num_predict": -1, "num_ctx": 8192, "stop": ["END"]},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is here?", "images": [PNG, JPEG]},
            ],
        }
    )
    assert stream is True  # Ollama streams unless told not to
    assert chat["model"] == "bench/trio" and chat["response_format"] == {"type": "json_object"}
    assert chat["temperature"] == 0.1 and chat["stop"] == ["END"] and "max_tokens" not in chat
    parts = chat["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "What is here?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    assert parts[2]["image_url"]["url"].startswith("data:image/jpeg;base64,/9j/")


def test_ollama_tool_results_find_their_calls_by_name_and_order():
    chat, _ = ollama.chat_to_chat(
        {
            "model": "bench/trio:pick",
            "stream": False,
            "messages": [
                {"role": "user", "content": "Orders 7 and 8, and the weather?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"function": {"name": "lookup", "arguments": {"n": 7}}},
                        {"function": {"name": "weather", "arguments": {}}},
                        {"function": {"name": "lookup", "arguments": {"n": 8}}},
                    ],
                },
                {"role": "tool", "tool_name": "weather", "content": "sunny"},
                {"role": "tool", "tool_name": "lookup", "content": "seven"},
                {"role": "tool", "content": "eight"},
            ],
        }
    )
    calls = chat["messages"][1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1_0", "call_1_1", "call_1_2"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"n": 7}
    assert [(m["tool_call_id"], m["content"]) for m in chat["messages"][2:]] == [
        ("call_1_1", "sunny"),
        ("call_1_0", "seven"),
        ("call_1_2", "eight"),
    ]


@pytest.mark.parametrize(
    "body, param",
    [
        (
            {
                "model": "bench/t",
                "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}],
            },
            "messages[1]",
        ),
        (
            {"model": "bench/t", "messages": [{"role": "user", "content": "x", "images": ["%%"]}]},
            "messages[0].images[0]",
        ),
        (
            {"model": "bench/t", "messages": [{"role": "user", "content": "x"}], "format": 3},
            "format",
        ),
        ({"model": "bench/t", "messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    ],
)
def test_ollama_refusals_name_the_field(body, param):
    with pytest.raises(BadRequest) as caught:
        ollama.chat_to_chat(body)
    assert caught.value.param == param


def test_ollama_generate_refuses_what_a_panel_cannot_keep():
    with pytest.raises(BadRequest, match="context"):
        ollama.generate_to_chat({"model": "bench/t", "prompt": "x", "context": [1, 2]})
    chat, stream = ollama.generate_to_chat(
        {"model": "bench/t", "prompt": "x", "system": "s", "stream": False}
    )
    assert (
        chat["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]
        and stream is False
    )


def test_gemini_schema_becomes_json_schema():
    schema = {
        "type": "OBJECT",
        "propertyOrdering": ["a", "b"],
        "required": ["a"],
        "properties": {
            "a": {"type": "STRING", "nullable": True},
            "b": {"type": "ARRAY", "items": {"type": "INTEGER"}},
        },
    }
    chat = gemini.to_chat(
        {
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": schema,
                "maxOutputTokens": 50,
            },
        },
        "bench/t",
    )
    assert chat["max_tokens"] == 50
    assert chat["response_format"]["json_schema"]["schema"] == {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"type": "array", "items": {"type": "integer"}},
        },
    }


def test_gemini_function_turns_keep_their_ids_or_get_them_from_their_place():
    chat = gemini.to_chat(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "Orders?"}]},
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "lookup", "args": {"n": 7}}},
                        {"functionCall": {"id": "abc", "name": "lookup", "args": {"n": 8}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"id": "abc", "name": "lookup", "response": {"r": 8}}},
                        {"functionResponse": {"name": "lookup", "response": {"r": 7}}},
                    ],
                },
            ],
            "toolConfig": {
                "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}
            },
        },
        "bench/t",
    )
    calls = chat["messages"][1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1_0", "abc"]
    assert [m["tool_call_id"] for m in chat["messages"][2:]] == ["abc", "call_1_0"]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


@pytest.mark.parametrize(
    "body, param",
    [
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}
                ]
            },
            "contents[0].parts[0].functionResponse",
        ),
        (
            {
                "contents": [{"role": "user", "parts": [{"text": "x"}]}],
                "generationConfig": {"candidateCount": 2},
            },
            "generationConfig.candidateCount",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "cachedContent": "c/1"},
            "cachedContent",
        ),
        (
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [{"inlineData": {"mimeType": "audio/wav", "data": "AA=="}}],
                    }
                ]
            },
            "contents[0].parts[0].inlineData",
        ),
    ],
)
def test_gemini_refusals_name_the_field(body, param):
    with pytest.raises(BadRequest) as caught:
        gemini.to_chat(body, "bench/t")
    assert caught.value.param == param


def test_gemini_paths_split_at_the_last_colon():
    assert gemini.split_path("bench/trio:pick:generateContent") == (
        "bench/trio:pick",
        "generateContent",
    )
    assert gemini.split_path("models/bench/trio:countTokens") == ("bench/trio", "countTokens")
    assert gemini.split_path("bench/trio:pick") == ("bench/trio:pick", "")


def test_an_ollama_stream_is_json_lines_only_keepalives_included(home, sim):
    sim.script("fast", hold_after=1)  # its second call waits for the test
    with Gateway(make_gateway(home, env={}, keepalive=0.05)) as gw:
        ask = {"model": "bench/trio:all", "messages": [{"role": "user", "content": "x"}]}
        assert gw.post("/api/chat", dict(ask, stream=False))[0] == 200
        conn = http.client.HTTPConnection(
            "127.0.0.1", gw.server.server_address[1], timeout=PATIENCE
        )
        try:
            conn.request("POST", "/api/chat", json.dumps(ask), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.headers["Content-Type"] == "application/x-ndjson"
            assert sim.wait_held("fast", 1, PATIENCE)
            # while a seat works, the stream keeps itself alive with lines of no text
            alive = json.loads(resp.readline())
            assert alive["done"] is False and alive["message"]["content"] == ""
            sim.release("fast")
            raw = resp.read().decode()
        finally:
            conn.close()
    lines = raw.split("\n")
    assert lines[-1] == "" and all(lines[:-1])  # one object a line, no blank lines
    parsed = [json.loads(line) for line in lines[:-1]]
    assert parsed[-1]["done"] is True and not any(p["done"] for p in parsed[:-1])
    assert parsed[-1]["eval_count"] > 0 and parsed[-1]["bench"]["reply"] == "all"
    text = "".join(p["message"]["content"] for p in parsed)
    assert "[simulated fast]" in text and "[simulated mid]" in text


def test_a_gemini_stream_that_stalls_ends_in_googles_error_shape(home, sim):
    sim.script("fast", hold_stream=True)
    with Gateway(make_gateway(home, env={"PANELIST_STALL_TIMEOUT": "0.2"})) as gw:
        conn = http.client.HTTPConnection(
            "127.0.0.1", gw.server.server_address[1], timeout=PATIENCE
        )
        try:
            conn.request(
                "POST",
                "/v1beta/models/bench/trio:pick:streamGenerateContent?alt=sse",
                json.dumps({"contents": [{"parts": [{"text": "x"}]}]}),
                {"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            raw = resp.read().decode()
        finally:
            conn.close()
        sim.release("fast")
    events = [json.loads(line[len("data: ") :]) for line in raw.split("\n") if line]
    assert all(line.startswith("data: ") for line in raw.split("\n") if line)
    assert events[0]["candidates"][0]["content"]["parts"][0]["text"]  # its first piece
    error = events[-1]["error"]
    assert error["code"] == 502 and error["status"] == "UNAVAILABLE"
    assert "stalled mid-answer" in error["message"]
