"""Google's Gemini API (``/v1beta/models/{model}:generateContent``, ``:streamGenerateContent``,
``:countTokens``, ``GET /v1beta/models``) as a thin adapter over a panel.

A request comes in as a ``GenerateContentRequest`` and leaves as a chat-completions body; the
panel's ``chat.completion`` reply comes back as a ``GenerateContentResponse``, or as the events
of its stream (server-sent events, as ``alt=sse`` asks). Collections are the models,
``models/bench/<name>`` with the reply mode after a colon (``models/bench/reviewers:pick``).

Invariants:

* Nothing here seats, asks, logs or judges: the panel that answers is the chat one, so seating,
  logs, verdicts and call ids are shared with ``/v1/chat/completions``.
* Every field a panel carries over is checked for its JSON type before a panel is seated, a
  refusal naming the Gemini field (``contents[2].parts[0].functionResponse``); what needs state
  or tools this gateway does not have (``cachedContent``, built-in tools such as
  ``googleSearch``, more than one candidate) is refused, never dropped. Safety settings and
  other fields with no chat counterpart are ignored.
* Parts are reshaped, never reworded: text, inline images, function calls and responses
  (thought parts are dropped: seats cannot read another model's reasoning). A function call
  keeps its ``id`` when it has one; one without gets an id from its place
  (``call_<content>_<n>``), and a function response answers the first open call of the model
  turn before it with its ``id``, else its ``name``.
* ``responseSchema`` (Gemini's OpenAPI subset, upper-case types) and ``responseJsonSchema`` ask
  for JSON that follows the schema; ``responseMimeType: application/json`` alone for any JSON.
* Streams carry ``data:`` events only (Gemini's clients read every other line as JSON), no
  keep-alive comments: the text as it comes, function calls, then a last event with the finish
  reason and ``usageMetadata``. A failure after the stream began is one ``{"error": …}`` event.
* Errors are Google's shape: ``{"error": {"code", "message", "status"}}``.
"""

from __future__ import annotations

from panelist.metrics.errors import BadRequest
from panelist.metrics.store import jsonwire
from panelist.metrics.wire.messages import tool_input

MODES = {"AUTO": "auto", "VALIDATED": "auto", "ANY": "required", "NONE": "none"}
FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}
STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
METHODS = ("generateContent", "streamGenerateContent", "countTokens")
CONFIG = {
    "temperature": "temperature",
    "topP": "top_p",
    "maxOutputTokens": "max_tokens",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "stopSequences": "stop",
}
REFUSED = {
    "cachedContent": "cached contents are not kept here; send the whole conversation in 'contents'",
}
# tools a seat cannot run: the caller's own functions only
BUILT_IN = (
    "googleSearch",
    "googleSearchRetrieval",
    "codeExecution",
    "urlContext",
    "fileSearch",
    "googleMaps",
    "computerUse",
    "retrieval",
)


def split_path(rest: str) -> tuple[str, str]:
    """``bench/trio:pick:generateContent`` (what follows ``/v1beta/models/``) as the model
    (``bench/trio:pick``) and the method (``generateContent``, or "" for the model itself)."""
    model, _, method = rest.rpartition(":")
    if method in METHODS:
        return model.removeprefix("models/"), method
    return rest.removeprefix("models/"), ""


# -- requests -----------------------------------------------------------------------------------
def to_chat(body, model: str) -> dict:
    """The chat-completions body a ``generateContent`` request for ``model`` asks for."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object (a GenerateContentRequest: contents)")
    for name, why in REFUSED.items():
        if body.get(name):
            raise BadRequest(why, param=name)
    messages = _system(body.get("systemInstruction")) + _contents(body.get("contents"))
    chat = {"model": model, "messages": messages}
    chat.update(_config(body.get("generationConfig")))
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    choice = _tool_choice(body.get("toolConfig"))
    if choice is not None:
        chat["tool_choice"] = choice
    return chat


def count_body(body) -> dict:
    """The request a ``countTokens`` body counts: its ``generateContentRequest``, else itself."""
    if isinstance(body, dict) and isinstance(body.get("generateContentRequest"), dict):
        return body["generateContentRequest"]
    return body


def _system(value) -> list[dict]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "system", "content": value}]
    parts = value.get("parts") if isinstance(value, dict) else None
    if not isinstance(parts, list):
        raise BadRequest(
            '\'systemInstruction\' must be a Content: {"parts": [{"text": …}]}',
            param="systemInstruction",
        )
    text = "".join(p.get("text") or "" for p in parts if isinstance(p, dict))
    return [{"role": "system", "content": text}] if text else []


def _contents(contents) -> list[dict]:
    if isinstance(contents, dict):  # one Content, as some callers send it
        contents = [contents]
    if not isinstance(contents, list) or not contents:
        raise BadRequest(
            "'contents' must be a non-empty list of {role, parts} objects", param="contents"
        )
    out: list[dict] = []
    pending: list[dict] = []  # calls of the last model turn not answered yet
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        parts = content.get("parts") if isinstance(content, dict) else None
        role = content.get("role") or "user" if isinstance(content, dict) else None
        if not isinstance(parts, list) or role not in ("user", "model", "function"):
            raise BadRequest(
                f'{where} must be {{"role": "user" or "model", "parts": […]}}', param=where
            )
        if role == "model":
            message, pending = _model_turn(parts, i, where)
            out.append(message)
        else:
            out += _user_turn(parts, where, pending)
    return out


def _model_turn(parts: list, i: int, where: str) -> tuple[dict, list[dict]]:
    text: list[str] = []
    calls: list[dict] = []
    for n, part in enumerate(parts):
        at = f"{where}.parts[{n}]"
        if not isinstance(part, dict):
            raise BadRequest(f"{at} must be an object", param=at)
        if part.get("thought"):
            continue
        if "text" in part:
            text.append(_text(part, at))
        elif "functionCall" in part:
            call = part["functionCall"]
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise BadRequest(
                    f"{at}.functionCall must be {{name, args}}", param=f"{at}.functionCall"
                )
            cid = (
                call.get("id")
                if isinstance(call.get("id"), str) and call["id"]
                else f"call_{i}_{len(calls)}"
            )
            calls.append(
                {
                    "id": cid,
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": jsonwire.dumps(call.get("args") or {}),
                    },
                }
            )
    message: dict = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = calls
    return message, list(calls)


def _user_turn(parts: list, where: str, pending: list[dict]) -> list[dict]:
    """A user turn: its function responses as tool messages (first), the rest as one user
    message."""
    tools, content = [], []
    for n, part in enumerate(parts):
        at = f"{where}.parts[{n}]"
        if not isinstance(part, dict):
            raise BadRequest(f"{at} must be an object", param=at)
        if "text" in part:
            if not part.get("thought"):
                content.append({"type": "text", "text": _text(part, at)})
        elif "inlineData" in part or "fileData" in part:
            content.append(_image(part, at))
        elif "functionResponse" in part:
            tools.append(_answer(part["functionResponse"], pending, f"{at}.functionResponse"))
        else:
            raise BadRequest(
                f"{at}: a part here is text, inlineData, fileData or functionResponse", param=at
            )
    out = tools
    if content:
        only_text = all(p["type"] == "text" for p in content)
        out.append(
            {
                "role": "user",
                "content": "".join(p["text"] for p in content) if only_text else content,
            }
        )
    return out


def _text(part: dict, at: str) -> str:
    if not isinstance(part["text"], str):
        raise BadRequest(f"{at}.text must be a string", param=f"{at}.text")
    return part["text"]


def _image(part: dict, at: str) -> dict:
    inline = part.get("inlineData")
    if isinstance(inline, dict):
        kind, data = inline.get("mimeType"), inline.get("data")
        if not isinstance(kind, str) or not kind.startswith("image/") or not isinstance(data, str):
            raise BadRequest(
                f'{at}.inlineData must be an image: {{mimeType: "image/…", '
                "data: base64}} (other media are not read by a panel)",
                param=f"{at}.inlineData",
            )
        return {"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}}
    file = part.get("fileData")
    uri = file.get("fileUri") if isinstance(file, dict) else None
    if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
        raise BadRequest(
            f"{at}.fileData must name an image by an http(s) fileUri (uploaded "
            "files are not kept here)",
            param=f"{at}.fileData",
        )
    return {"type": "image_url", "image_url": {"url": uri}}


def _answer(response, pending: list[dict], at: str) -> dict:
    if not isinstance(response, dict) or not isinstance(response.get("name"), str):
        raise BadRequest(f"{at} must be {{name, response}}", param=at)
    rid = response.get("id")
    found = [c for c in pending if rid and c["id"] == rid] or [
        c for c in pending if c["function"]["name"] == response["name"]
    ]
    if not found:
        raise BadRequest(
            f"{at} answers '{response['name']}', which the model turn before it "
            "did not call (or another response answered already); send the model "
            "turn with its functionCall parts, then one functionResponse each",
            param=at,
        )
    pending.remove(found[0])
    return {
        "role": "tool",
        "tool_call_id": found[0]["id"],
        "content": jsonwire.dumps(response.get("response", {})),
    }


def _config(config) -> dict:
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise BadRequest("'generationConfig' must be an object", param="generationConfig")
    out = {theirs: config[mine] for mine, theirs in CONFIG.items() if config.get(mine) is not None}
    if config.get("candidateCount") not in (None, 1):
        raise BadRequest(
            "a panel answers with one candidate; leave candidateCount out or 1",
            param="generationConfig.candidateCount",
        )
    schema = config.get("responseJsonSchema", config.get("responseSchema"))
    if schema is not None:
        if not isinstance(schema, dict):
            raise BadRequest(
                "'generationConfig.responseSchema' must be a schema object",
                param="generationConfig.responseSchema",
            )
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": json_schema(schema)},
        }
    elif config.get("responseMimeType") == "application/json":
        out["response_format"] = {"type": "json_object"}
    return out


def json_schema(schema):
    """Gemini's schema (OpenAPI's subset: upper-case types, ``nullable``) as JSON Schema."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {k: json_schema(v) for k, v in value.items()}
        elif key in (
            "items",
            "anyOf",
            "oneOf",
            "allOf",
            "additionalProperties",
            "prefixItems",
            "not",
        ):
            out[key] = json_schema(value)
        elif key not in ("nullable", "propertyOrdering"):
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _tools(tools) -> list[dict]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of {functionDeclarations: […]}", param="tools")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise BadRequest(f"tools[{i}] must be an object", param=f"tools[{i}]")
        built = [k for k in BUILT_IN if k in tool]
        if built:
            raise BadRequest(
                f"tools[{i}].{built[0]} runs on Google's side, which a panel's "
                "seats cannot reach; declare your own functions instead",
                param=f"tools[{i}].{built[0]}",
            )
        for n, fn in enumerate(tool.get("functionDeclarations") or ()):
            at = f"tools[{i}].functionDeclarations[{n}]"
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise BadRequest(f"{at} must be {{name, description, parameters}}", param=at)
            params = fn.get("parametersJsonSchema", fn.get("parameters"))
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": fn["name"],
                        "description": fn.get("description") or "",
                        "parameters": json_schema(params)
                        if params
                        else {"type": "object", "properties": {}},
                    },
                }
            )
    return out


def _tool_choice(config):
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    if calling is None:
        return None
    mode = calling.get("mode", "AUTO") if isinstance(calling, dict) else None
    if mode not in MODES:
        raise BadRequest(
            "'toolConfig.functionCallingConfig.mode' must be one of " + ", ".join(MODES),
            param="toolConfig.functionCallingConfig.mode",
        )
    names = calling.get("allowedFunctionNames") or []
    if mode == "ANY" and isinstance(names, list) and len(names) == 1:
        return {"type": "function", "function": {"name": names[0]}}
    return MODES[mode]


# -- replies ------------------------------------------------------------------------------------
def _usage(reply: dict) -> dict:
    usage = reply.get("usage") or {}
    out = {
        "promptTokenCount": usage.get("prompt_tokens") or 0,
        "candidatesTokenCount": usage.get("completion_tokens") or 0,
        "totalTokenCount": usage.get("total_tokens") or 0,
    }
    if usage.get("estimated"):
        out["estimated"] = True  # the gateway's estimate: an upstream sent no counts
    return out


def _call_parts(message: dict) -> list[dict]:
    parts = []
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        parts.append(
            {
                "functionCall": {
                    "id": call["id"],
                    "name": fn["name"],
                    "args": tool_input(fn.get("arguments")),
                }
            }
        )
    return parts


def _response(parts: list[dict], model: str, panel: str, **extra) -> dict:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, **extra}],
        "modelVersion": model,
        "responseId": panel,
    }


def from_chat(reply: dict, model: str, panel: str) -> dict:
    """A panel's ``chat.completion`` as a ``GenerateContentResponse``."""
    choice = reply["choices"][0]
    message = choice["message"]
    parts = ([{"text": message["content"]}] if message.get("content") else []) + _call_parts(
        message
    )
    out = _response(
        parts or [{"text": ""}],
        model,
        panel,
        finishReason=FINISH.get(choice.get("finish_reason"), "STOP"),
    )
    out["usageMetadata"] = _usage(reply)
    out["bench"] = reply.get("bench")
    return out


def error_body(status: int, message: str) -> dict:
    """Google's error shape."""
    return {
        "error": {
            "code": status,
            "message": message,
            "status": STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT"),
        }
    }


class Events:
    """The events of one ``streamGenerateContent`` stream (``alt=sse``); see the module
    docstring."""

    done = False  # no [DONE]: the last event has the finish reason
    sections = False  # all mode sends the whole reply once every seat ended

    def __init__(self, model: str, panel: str):
        self.model, self.panel = model, panel
        self.streamed = ""

    def opening(self) -> list:
        return []

    def keepalive(self) -> list:
        return []  # Gemini's clients take any line that is not an event for JSON

    def text(self, piece: str) -> list:
        self.streamed += piece
        return [("", _response([{"text": piece}], self.model, self.panel))]

    def closing(self, reply: dict) -> list:
        message = reply["choices"][0]["message"]
        out = []
        if message.get("content") and not self.streamed:
            out.append(("", _response([{"text": message["content"]}], self.model, self.panel)))
        calls = _call_parts(message)
        if calls:
            out.append(("", _response(calls, self.model, self.panel)))
        last = from_chat(
            dict(
                reply,
                choices=[dict(reply["choices"][0], message={"role": "assistant", "content": ""})],
            ),
            self.model,
            self.panel,
        )
        last["candidates"][0]["content"]["parts"] = [{"text": ""}]
        return out + [("", last)]

    def failure(self, status: int, body: dict) -> list:
        return [("", error_body(status, body["error"]["message"]))]


# -- models -------------------------------------------------------------------------------------
def model_entry(entry: dict) -> dict:
    """One listed model (a collection in one reply mode) as ``GET /v1beta/models`` lists it."""
    return {
        "name": f"models/{entry['id']}",
        "baseModelId": entry["id"],
        "version": "panel",
        "displayName": entry["id"],
        "description": entry["description"],
        "inputTokenLimit": entry["together"]["context_window"],
        "supportedGenerationMethods": list(METHODS),
        "supportedActions": list(METHODS),
    }
