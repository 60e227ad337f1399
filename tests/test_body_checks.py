"""Every body is checked whole before any seat is asked: a field of a wrong JSON type is a 400
that names it (``param`` in OpenAI's shape, the message in Anthropic's), and the simulated
upstream hears nothing; a body that passes is a panel whose line is written.

The table-driven part puts each of a few wrong types at each field of a full request in each
wire format (chat completions, Responses, Messages) and holds every answer to that rule: never
a 500, a refusal costs no seat and names its field, every field refuses some wrong type, and
every panel that ran (200, or 502 when its seats failed) is in the log under the id its reply
names.
"""

import copy
import http.client
import json

import pytest

from conftest import PATIENCE, TEST_MODELS, logged, wait_until

SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["ok"],
    "additionalProperties": False,
}
LOOKUP = {"type": "object", "properties": {"q": {"type": "string"}}}

CHAT = {
    "model": "bench/trio:pick",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Look it up"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        {"role": "user", "content": "Review: x", "name": "ann"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "find", "parameters": LOOKUP},
        }
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "temperature": 0.2,
    "top_p": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "max_tokens": 100,
    "seed": 1,
    "stop": ["END"],
    "user": "u",
    "stream": False,
    "n": 1,
    "bench": {"reply": "pick"},
    "with": [],
    "logit_bias": {"50256": -100},
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "a", "strict": True, "schema": SCHEMA},
    },
}

RESPONSES = {
    "model": "bench/trio:pick",
    "instructions": "Be brief.",
    "input": [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Look it up"}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
        {"role": "user", "content": "Review: x"},
    ],
    "tools": [{"type": "function", "name": "lookup", "description": "find", "parameters": LOOKUP}],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "text": {"format": {"type": "json_schema", "name": "a", "strict": True, "schema": SCHEMA}},
    "temperature": 0.2,
    "top_p": 1,
    "max_output_tokens": 100,
    "store": False,
    "metadata": {"k": "v"},
    "user": "u",
    "stream": False,
    "bench": {"reply": "pick"},
    "with": [],
}

MESSAGES = {
    "model": "bench/trio:pick",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Look it up"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "found"}],
                },
                {"type": "text", "text": "Review: x"},
            ],
        },
    ],
    "tools": [{"name": "lookup", "description": "find", "input_schema": LOOKUP}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
    "temperature": 0.2,
    "top_p": 1,
    "top_k": 5,
    "stop_sequences": ["END"],
    "metadata": {"user_id": "u"},
    "stream": False,
    "bench": {"reply": "pick"},
    "with": [],
    "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
}

# wrong JSON types (and a wrong string): each is put at each field below in turn
WRONG = ["x", 7, 1.5, True, None, [], {}, [{}], [7]]


def _schema_fields(at: tuple) -> list[tuple]:
    return [
        at,
        at + ("type",),
        at + ("properties",),
        at + ("properties", "ok"),
        at + ("properties", "ok", "type"),
        at + ("properties", "items", "items"),
        at + ("required",),
        at + ("additionalProperties",),
        at + ("anyOf",),
        at + ("allOf",),
        at + ("oneOf",),
        at + ("enum",),
        at + ("$ref",),
        at + ("items",),
        at + ("$defs",),
    ]


CHAT_FIELDS = [
    ("model",),
    ("messages",),
    ("messages", 0),
    ("messages", 0, "role"),
    ("messages", 0, "content"),
    ("messages", 1, "content", 0),
    ("messages", 1, "content", 0, "type"),
    ("messages", 1, "content", 0, "text"),
    ("messages", 2, "content"),
    ("messages", 2, "tool_calls"),
    ("messages", 2, "tool_calls", 0),
    ("messages", 2, "tool_calls", 0, "id"),
    ("messages", 2, "tool_calls", 0, "type"),
    ("messages", 2, "tool_calls", 0, "function"),
    ("messages", 2, "tool_calls", 0, "function", "name"),
    ("messages", 2, "tool_calls", 0, "function", "arguments"),
    ("messages", 3, "tool_call_id"),
    ("messages", 3, "content"),
    ("messages", 4, "name"),
    ("stream",),
    ("stream_options",),
    ("n",),
    ("temperature",),
    ("top_p",),
    ("presence_penalty",),
    ("frequency_penalty",),
    ("max_tokens",),
    ("max_completion_tokens",),
    ("seed",),
    ("stop",),
    ("user",),
    ("logit_bias",),
    ("logprobs",),
    ("parallel_tool_calls",),
    ("tools",),
    ("tools", 0),
    ("tools", 0, "type"),
    ("tools", 0, "function"),
    ("tools", 0, "function", "name"),
    ("tools", 0, "function", "description"),
    ("tools", 0, "function", "parameters"),
    ("tool_choice",),
    ("bench",),
    ("bench", "reply"),
    ("with",),
    ("response_format",),
    ("response_format", "type"),
    ("response_format", "json_schema"),
    ("response_format", "json_schema", "name"),
    ("response_format", "json_schema", "strict"),
    *_schema_fields(("response_format", "json_schema", "schema")),
]

RESPONSES_FIELDS = [
    ("model",),
    ("instructions",),
    ("input",),
    ("input", 0),
    ("input", 0, "type"),
    ("input", 0, "role"),
    ("input", 0, "content"),
    ("input", 0, "content", 0),
    ("input", 0, "content", 0, "type"),
    ("input", 0, "content", 0, "text"),
    ("input", 1, "call_id"),
    ("input", 1, "name"),
    ("input", 1, "arguments"),
    ("input", 2, "call_id"),
    ("input", 2, "output"),
    ("input", 3, "content"),
    ("input", 3, "role"),
    ("tools",),
    ("tools", 0),
    ("tools", 0, "type"),
    ("tools", 0, "name"),
    ("tools", 0, "description"),
    ("tools", 0, "parameters"),
    ("tool_choice",),
    ("parallel_tool_calls",),
    ("text",),
    ("text", "format"),
    ("text", "format", "type"),
    ("text", "format", "name"),
    ("text", "format", "strict"),
    *_schema_fields(("text", "format", "schema")),
    ("temperature",),
    ("top_p",),
    ("max_output_tokens",),
    ("store",),
    ("metadata",),
    ("user",),
    ("stream",),
    ("bench",),
    ("bench", "reply"),
    ("with",),
    ("include",),
    ("truncation",),
    ("reasoning",),
]

MESSAGES_FIELDS = [
    ("model",),
    ("max_tokens",),
    ("system",),
    ("system", 0),
    ("system", 0, "text"),
    ("messages",),
    ("messages", 0),
    ("messages", 0, "role"),
    ("messages", 0, "content"),
    ("messages", 0, "content", 0),
    ("messages", 0, "content", 0, "type"),
    ("messages", 0, "content", 0, "text"),
    ("messages", 1, "content", 1, "id"),
    ("messages", 1, "content", 1, "name"),
    ("messages", 1, "content", 1, "input"),
    ("messages", 2, "content", 0, "tool_use_id"),
    ("messages", 2, "content", 0, "content"),
    ("messages", 2, "content", 0, "content", 0, "text"),
    ("messages", 2, "content", 0, "is_error"),
    ("tools",),
    ("tools", 0),
    ("tools", 0, "name"),
    ("tools", 0, "description"),
    ("tools", 0, "input_schema"),
    ("tools", 0, "type"),
    ("tool_choice",),
    ("tool_choice", "type"),
    ("tool_choice", "disable_parallel_tool_use"),
    ("temperature",),
    ("top_p",),
    ("top_k",),
    ("stop_sequences",),
    ("metadata",),
    ("stream",),
    ("bench",),
    ("bench", "reply"),
    ("with",),
    ("thinking",),
    ("output_config",),
    ("output_config", "format"),
    ("output_config", "format", "type"),
    *_schema_fields(("output_config", "format", "schema")),
]


def put(body: dict, path: tuple, value) -> dict:
    """A copy of ``body`` with ``value`` at ``path`` (the last key added when missing)."""
    out = copy.deepcopy(body)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def name_of(path: tuple) -> str:
    """A field's path as the error names it: ``messages[2].tool_calls[0].id``."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


@pytest.fixture()
def quick(sim):
    """Every simulated model answers at once: a panel ends as soon as it is asked."""
    for alias in TEST_MODELS:
        sim.script(alias, latency=0.0)
    return sim


def send(gateway, path: str, body) -> tuple[int, dict, object]:
    """``(status, headers, JSON body or the raw bytes of a stream)`` over a real socket."""
    conn = http.client.HTTPConnection("127.0.0.1", gateway.server.port, timeout=PATIENCE)
    try:
        conn.request(
            "POST",
            path,
            json.dumps(body),
            {"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
        )
        resp = conn.getresponse()
        data = resp.read()
        headers = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    kind = headers.get("content-type", "")
    return resp.status, headers, json.loads(data) if "json" in kind else data


def panel_logged(gateway, panel: str) -> bool:
    return wait_until(lambda: gateway.get(f"/bench/panels/{panel}")[0] == 200)


def refusal_named(route: str, body, field: str) -> str | None:
    """Why a 400's body fails to name ``field`` (None when it names it)."""
    if route == "/v1/messages":  # Anthropic's shape has no param: the message names the field
        error = body.get("error") if body.get("type") == "error" else None
        if not isinstance(error, dict) or error.get("type") != "invalid_request_error":
            return f"not Anthropic's error shape: {body}"
        return None if field in error["message"] else f"message does not name it: {error}"
    param = body["error"]["param"] or ""
    if param == field or param.startswith((field + ".", field + "[")):
        return None
    return f"param {param!r}: {body['error']['message']}"


def check_route(gateway, sim, route: str, base: dict, fields: list[tuple]) -> list[str]:
    """Each wrong value at each field, held to the rule in the module docstring; the broken
    cases, one line each."""
    status, headers, _ = send(gateway, route, base)
    assert status == 200 and panel_logged(gateway, headers["x-panelist-panel"])
    broken = []
    for path in fields:
        refused = 0
        for value in WRONG:
            body, field = put(base, path, value), name_of(path)
            asked = len(sim.requests)
            status, headers, reply = send(gateway, route, body)
            case = f"{route} {field}={json.dumps(value)}: {status}"
            panel = headers.get("x-panelist-panel")
            if status >= 500 and status != 502:
                broken.append(f"{case} {reply}")
            elif status < 400 or status == 502:
                if panel is None or not panel_logged(gateway, panel):
                    broken.append(f"{case} but panel {panel} was never logged")
            else:
                if len(sim.requests) != asked:
                    broken.append(f"{case} after {len(sim.requests) - asked} seat(s) were asked")
                if panel is not None:
                    broken.append(f"{case} names panel {panel}, though none ran")
                if status == 400 and (why := refusal_named(route, reply, field)):
                    broken.append(f"{case} does not name the field: {why}")
                refused += status == 400
        if not refused:  # every field listed is one the format defines: its type is checked
            broken.append(f"{route} {name_of(path)}: no wrong type was refused")
    return broken


@pytest.mark.parametrize(
    "route,base,fields",
    [
        ("/v1/chat/completions", CHAT, CHAT_FIELDS),
        ("/v1/responses", RESPONSES, RESPONSES_FIELDS),
        ("/v1/messages", MESSAGES, MESSAGES_FIELDS),
    ],
    ids=["chat", "responses", "messages"],
)
def test_a_wrong_type_at_any_field_is_a_400_before_any_seat_or_a_panel_that_is_logged(
    gateway, quick, route, base, fields
):
    broken = check_route(gateway, quick, route, base, fields)
    assert not broken, f"{len(broken)} broken:\n" + "\n".join(broken)


# -- the cases the trial found ------------------------------------------------------------------
HISTORY = [
    {"role": "user", "content": "Review: x"},
    {"role": "assistant", "content": "Looks fine."},
    {"role": "user", "content": "And now?"},
]


@pytest.mark.parametrize("mode", ["pick", "all"])
@pytest.mark.parametrize("calls", ["x", {}, 5, {"id": "call_1"}, [5]])
def test_a_history_with_tool_calls_that_are_no_list_of_calls_is_a_400_before_any_seat(
    gateway, home, quick, mode, calls
):
    messages = copy.deepcopy(HISTORY)
    messages[1]["tool_calls"] = calls
    status, headers, body = send(
        gateway, "/v1/chat/completions", {"model": f"bench/trio:{mode}", "messages": messages}
    )
    assert status == 400, body
    assert body["error"]["param"].startswith("messages[1].tool_calls"), body
    assert "tool_calls" in body["error"]["message"]
    assert quick.requests == [] and "x-panelist-panel" not in headers
    assert logged(home) == []


def test_responses_text_that_is_no_object_is_a_400_before_any_seat(gateway, home, quick):
    status, headers, body = send(
        gateway, "/v1/responses", {"model": "bench/trio", "input": "Review: x", "text": "x"}
    )
    assert status == 400, body
    assert (
        body["error"]["param"] == "text" and "'text' must be an object" in body["error"]["message"]
    )
    assert quick.requests == [] and logged(home) == []


@pytest.mark.parametrize(
    "route,body,param",
    [
        (
            "/v1/chat/completions",
            {
                "model": "bench/trio:pick",
                "messages": [{"role": "user", "content": "Review: x"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "a", "schema": {"type": [{}]}},
                },
            },
            "response_format.json_schema.schema.type[0]",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "bench/trio:pick",
                "messages": [{"role": "user", "content": "Review: x"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "a",
                        "schema": {
                            "type": "object",
                            "properties": {"n": {"type": ["integer", {}]}},
                        },
                    },
                },
            },
            "response_format.json_schema.schema.properties.n.type[1]",
        ),
        (
            "/v1/responses",
            {
                "model": "bench/trio:pick",
                "input": "Review: x",
                "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": [{}]}}},
            },
            "text.format.schema.type[0]",
        ),
    ],
)
def test_a_schema_whose_type_is_no_type_name_is_a_400_before_any_seat(
    gateway, home, quick, route, body, param
):
    status, headers, reply = send(gateway, route, body)
    assert status == 400, reply
    assert reply["error"]["param"] == param, reply
    assert "type" in reply["error"]["message"]
    assert quick.requests == [] and logged(home) == []


def test_messages_refuse_such_a_schema_in_anthropics_shape(gateway, home, quick):
    status, _, reply = send(
        gateway,
        "/v1/messages",
        {
            "model": "bench/trio:pick",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "Review: x"}],
            "output_config": {"format": {"type": "json_schema", "schema": {"type": [{}]}}},
        },
    )
    assert status == 400
    assert reply["type"] == "error" and reply["error"]["type"] == "invalid_request_error"
    assert "output_config.format.schema.type[0]" in reply["error"]["message"]
    assert quick.requests == [] and logged(home) == []
