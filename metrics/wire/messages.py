"""Anthropic's Messages format (``POST /v1/messages``) as a thin adapter over a panel.

A request comes in as a Messages body and leaves as a chat-completions body; the panel's
``chat.completion`` reply comes back as a Messages reply, or as the events of a Messages stream.

Invariants:

* Nothing here seats, asks, logs or judges: the panel that answers is the chat one, so seating,
  logs, verdicts and call ids are shared with ``/v1/chat/completions``.
* Every field is checked for its JSON type before a panel is seated (those with no chat
  counterpart too); a refusal is a ``BadRequest`` naming the Messages field
  (``messages[2].content[0].tool_use_id``), in its message since Anthropic's error shape has no
  ``param``. ``max_tokens`` is required, as Anthropic requires it.
* What would need state or reach this gateway does not have is refused, never dropped: a
  ``thread`` (nothing is held between requests; the refusal carries the ``error_code`` on which
  Anthropic's clients send the whole conversation again), ``mcp_servers``, and a
  ``tool_result`` whose ``tool_use`` is not in an earlier assistant message (every seat would
  get an answer to a question it was never shown).
* What the caller sent is reshaped, never reworded: text, images (base64 or URL), tool uses
  (their ids kept, so a tool result finds its call) and tool results (``is_error`` marked in the
  text, the only place a chat tool message can hold it), ``output_config.format`` as
  ``response_format``. Thinking blocks are dropped: seats cannot read another model's signed
  reasoning. Fields with no chat counterpart (``top_k``, ``thinking``, ``metadata``, cache
  control) are ignored.
* A reply keeps its content, tool calls (ids verbatim), stop reason, usage and ``bench``; a tool
  call whose arguments are not a JSON object keeps them under ``_unparsed_arguments``.
* A stream is SSE comments while seats work, then, once the reply is known, ``message_start``
  (its message holds ``bench`` and the input usage: the clients' stream helpers build their
  final message from it, and keep nothing else ``message_delta`` has beyond stop reason and
  usage), each content block (start, one delta, stop), ``message_delta`` (stop reason, usage
  and ``bench``) and ``message_stop``; a failure after the stream opened is one ``error`` event.
* ``count_tokens`` answers the estimate the panel checks each seat's window against, of the
  same translated messages.
"""

from __future__ import annotations

from typing import Any

from panelist.metrics.store import jsonwire
from panelist.metrics.errors import BadRequest
from panelist.metrics.panel import jsonshape, prompt

# chat finish reasons -> Messages stop reasons (a reply holding tool calls is always tool_use)
STOP_REASONS = {"length": "max_tokens", "content_filter": "refusal"}
# Anthropic's error types by HTTP status; the rest are invalid_request_error below 500, api_error
# from 500 on
ERROR_TYPES = {
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
SKIPPED_BLOCKS = ("thinking", "redacted_thinking")
WHAT = "an Anthropic Messages request: model, max_tokens and messages"
# the error_code on which Anthropic's clients stop threading and send the whole conversation
NO_THREADS = {"details": {"error_code": "thread_unsupported_request"}}


# -- request ------------------------------------------------------------------------------------
def to_chat(body) -> tuple[dict, bool]:
    """The chat-completions body a Messages request asks for, and whether it wants a stream."""
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object ({WHAT})")
    _refuse_unheld(body)
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise BadRequest(
            "'max_tokens' is required: the most tokens each seat may write (e.g. 1024)",
            param="max_tokens",
        )
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("'max_tokens' must be a whole number of at least 1", param="max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false", param="stream")
    chat = _translate(body)
    chat["max_tokens"] = max_tokens
    for name in ("temperature", "top_p", "bench", "with"):
        if name in body:
            chat[name] = body[name]
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest("'stop_sequences' must be a list of strings", param="stop_sequences")
        if stop:
            chat["stop"] = stop
    return chat, stream


def count_tokens(body) -> tuple[object, int]:
    """The ``model`` a ``count_tokens`` request names, and the gateway's estimate of its
    prompt: the one the panel would check each seat's window against."""
    if not isinstance(body, dict):
        raise BadRequest(
            "the body must be a JSON object (a token count request: model and messages)"
        )
    _refuse_unheld(body)
    chat = _translate(body)
    return chat["model"], prompt.estimate_tokens(
        prompt.check_messages(chat["messages"]),
        tools=chat.get("tools"),
        response_format=chat.get("response_format"),
    )


def _refuse_unheld(body: dict) -> None:
    """Refuse what asks for state or reach the gateway does not have, before anything else:
    a threaded turn sends only part of the conversation, so no other field can be trusted."""
    if body.get("thread") is not None:
        raise BadRequest(
            "this gateway holds no message threads: send the whole conversation "
            "in 'messages' without 'thread' (the anthropic package's tool runner "
            "does so by itself; a thread helper needs "
            'unsupported_request_behavior="continue_unthreaded")',
            param="thread",
            details=NO_THREADS,
        )
    if body.get("mcp_servers") is not None:
        raise BadRequest(
            "this gateway does not connect to MCP servers: call the tools on your "
            "side (e.g. with the MCP SDK), offer them in 'tools' and answer each "
            "tool_use with a tool_result",
            param="mcp_servers",
        )


def _translate(body: dict) -> dict:
    """What a Messages request and a token count share: model, system, messages, tools, tool
    choice and output format, as chat's fields."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest(
            "'messages' must be a non-empty list of {role, content} objects", param="messages"
        )
    messages = []
    if body.get("system") is not None:
        messages.append({"role": "system", "content": _system(body["system"])})
    called: dict[str, str] = {}  # the tool_use ids of the assistant messages so far: where
    for i, message in enumerate(raw):
        messages += _message(message, f"messages[{i}]", called)
    _check_fields(body)
    chat = {"model": body.get("model"), "messages": messages}
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat.update(_tool_choice(body["tool_choice"]))
    config = body.get("output_config")
    if config is not None:
        fmt = _format(config)
        if fmt is not None:
            chat["response_format"] = fmt
    return chat


# Messages fields a panel does not carry over, by the JSON type they must have: checked all the
# same, so a mistyped one is named rather than silently dropped
IGNORED = {
    "top_k": (int, "a whole number"),
    "thinking": (dict, 'an object such as {"type": "disabled"}'),
    "service_tier": (str, "a string"),
    "container": (str, "a string"),
}


def _check_fields(body: dict) -> None:
    for name, (kind, said) in IGNORED.items():
        v = body.get(name)
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool)):
            raise BadRequest(f"'{name}' must be {said}", param=name)
    metadata = body.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise BadRequest(
            '\'metadata\' must be an object such as {"user_id": "..."}', param="metadata"
        )
    if metadata.get("user_id") is not None and not isinstance(metadata["user_id"], str):
        raise BadRequest("'metadata.user_id' must be a string", param="metadata.user_id")


def _format(config) -> dict | None:
    """``output_config.format`` (structured output) as chat's ``response_format``."""
    if not isinstance(config, dict):
        raise BadRequest("'output_config' must be an object", param="output_config")
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequest(
            '\'output_config.format\' must be {"type": "json_schema", "schema": {...}}',
            param="output_config.format",
        )
    if fmt.get("type") != "json_schema":
        raise BadRequest(
            "'output_config.format.type' must be json_schema", param="output_config.format.type"
        )
    if not isinstance(fmt.get("schema"), dict):
        raise BadRequest(
            "'output_config.format.schema' must be a JSON Schema object",
            param="output_config.format.schema",
        )
    jsonshape.check_schema(fmt["schema"], "output_config.format.schema")
    # chat wants the schema named; Messages never names it
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}


def _system(system) -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise BadRequest(
            '\'system\' must be a string or a list of {"type": "text", "text": ...} blocks',
            param="system",
        )
    for i, block in enumerate(system):
        where = f"system[{i}]"
        if not isinstance(block, dict) or block.get("type") != "text":
            raise BadRequest(
                f'{where} must be a {{"type": "text", "text": ...}} block', param=where
            )
        if not isinstance(block.get("text"), str):
            raise BadRequest(f"{where}.text must be a string", param=f"{where}.text")
    return "\n\n".join(b["text"] for b in system)


def _message(m, where: str, called: dict[str, str]) -> list[dict]:
    if not isinstance(m, dict):
        raise BadRequest(f"{where} must be an object with 'role' and 'content'", param=where)
    role = m.get("role")
    if role not in ("user", "assistant"):
        raise BadRequest(
            f"{where}.role must be 'user' or 'assistant' (a system prompt goes in "
            "the top-level 'system')",
            param=f"{where}.role",
        )
    content = m.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise BadRequest(
            f"{where}.content must be a string or a list of content blocks",
            param=f"{where}.content",
        )
    blocks = []
    for j, block in enumerate(content):
        bwhere = f"{where}.content[{j}]"
        if not isinstance(block, dict):
            raise BadRequest(f"{bwhere} must be a content block with a 'type'", param=bwhere)
        if not isinstance(block.get("type"), str):
            raise BadRequest(
                f'{bwhere}.type must be a string such as "text"', param=f"{bwhere}.type"
            )
        blocks.append((block, bwhere))
    return _assistant(blocks, called) if role == "assistant" else _user(blocks, called)


def _user(blocks, called: dict[str, str]) -> list[dict]:
    """Tool results become tool messages, ahead of the rest (chat wants them right after the
    assistant's calls); text and images stay one user message."""
    tools, parts = [], []
    for block, where in blocks:
        kind = block["type"]
        if kind == "tool_result":
            text, images = _tool_result(block, where, called)
            tools.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
            parts += images
        elif kind in ("text", "image"):
            parts.append(_part(block, where))
        else:
            raise _unsupported(kind, where, "text, image or tool_result")
    out = list(tools)
    if len(parts) == 1 and parts[0]["type"] == "text":
        out.append({"role": "user", "content": parts[0]["text"]})
    elif parts:
        out.append({"role": "user", "content": parts})
    return out


def _assistant(blocks, called: dict[str, str]) -> list[dict]:
    texts, calls = [], []
    for block, where in blocks:
        kind = block["type"]
        if kind == "text":
            texts.append(_part(block, where)["text"])
        elif kind == "tool_use":
            for field in ("id", "name"):
                if not isinstance(block.get(field), str) or not block[field]:
                    raise BadRequest(
                        f"{where}.{field} must be a non-empty string (a tool_use "
                        "needs its 'id' and 'name')",
                        param=f"{where}.{field}",
                    )
            args = block.get("input", {})
            if not isinstance(args, dict):
                raise BadRequest(f"{where}.input must be an object", param=f"{where}.input")
            called[block["id"]] = f"{where}.id"
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": jsonwire.dumps(args)},
                }
            )
        elif kind not in SKIPPED_BLOCKS:
            raise _unsupported(kind, where, "text, tool_use or thinking")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts or not calls else None,
    }
    if calls:
        message["tool_calls"] = calls
    return [message]


def _part(block: dict, where: str) -> dict:
    """A text or image block as a chat content part."""
    if block["type"] == "text":
        if not isinstance(block.get("text"), str):
            raise BadRequest(f"{where}.text must be a string", param=f"{where}.text")
        return {"type": "text", "text": block["text"]}
    source = block.get("source")
    if not isinstance(source, dict):
        source = {}
    kind = source.get("type")
    if kind == "base64":
        media, data = source.get("media_type"), source.get("data")
        if media not in IMAGE_TYPES or not isinstance(data, str):
            raise BadRequest(
                f"{where}.source must have a media_type of {', '.join(IMAGE_TYPES)} "
                "and base64 'data'",
                param=f"{where}.source",
            )
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if kind == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url.startswith("https://"):
            raise BadRequest(
                f"{where}.source.url must be an https:// URL", param=f"{where}.source.url"
            )
        return {"type": "image_url", "image_url": {"url": url}}
    raise BadRequest(
        f'{where}.source must be {{"type": "base64", "media_type", "data"}} '
        'or {"type": "url", "url"} (uploaded files are not kept here)',
        param=f"{where}.source",
    )


def _tool_result(block: dict, where: str, called: dict[str, str]) -> tuple[str, list[dict]]:
    """A tool result's text, and its images (which a chat tool message cannot hold)."""
    tid = block.get("tool_use_id")
    if not isinstance(tid, str):
        raise BadRequest(
            f"{where}.tool_use_id must be the id of the tool_use it answers",
            param=f"{where}.tool_use_id",
        )
    if tid not in called:
        # the latest calls, where they are: an id changed on the way shows here
        latest = ", ".join(f"'{_short(c)}' at {w}" for c, w in list(called.items())[-3:])
        raise BadRequest(
            f"{where}.tool_use_id: no earlier assistant message has a tool_use "
            f"with id '{_short(tid)}'"
            + (f" (the latest tool_use ids: {latest})" if latest else "")
            + "; send the whole conversation, the assistant message that called "
            "the tool included, ahead of its tool_result",
            param=f"{where}.tool_use_id",
        )
    content = block.get("content", "")
    texts, images = [], []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for k, inner in enumerate(content):
            iwhere = f"{where}.content[{k}]"
            if not isinstance(inner, dict) or inner.get("type") not in ("text", "image"):
                raise BadRequest(f"{iwhere} must be a text or image block", param=iwhere)
            part = _part(inner, iwhere)
            if part["type"] == "text":
                texts.append(part["text"])
            else:
                images.append(part)
    else:
        raise BadRequest(
            f"{where}.content must be a string or a list of text and image blocks",
            param=f"{where}.content",
        )
    if block.get("is_error") is not None and not isinstance(block["is_error"], bool):
        raise BadRequest(f"{where}.is_error must be true or false", param=f"{where}.is_error")
    text = "\n".join(texts)
    if block.get("is_error") is True:
        text = f"[tool error] {text}"
    return text, images


def _short(text: str) -> str:
    return text if len(text) <= 64 else text[:64] + "…"


def _unsupported(kind: str, where: str, allowed: str) -> BadRequest:
    return BadRequest(
        f"{where}: '{kind}' blocks are not accepted here; send {allowed} blocks "
        "(documents as text, images inline or by https URL)",
        param=f"{where}.type",
    )


def _tools(tools) -> list[dict]:
    if not isinstance(tools, list):
        raise BadRequest(
            "'tools' must be a list of {name, description, input_schema}", param="tools"
        )
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise BadRequest(f"{where} must be an object", param=where)
        if tool.get("type") not in (None, "custom"):
            raise BadRequest(
                f"{where} is a server tool ('{tool.get('type')}'), which only "
                "Anthropic runs; send tools as {name, description, input_schema} "
                "and run them yourself",
                param=f"{where}.type",
            )
        schema = tool.get("input_schema")
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise BadRequest(f"{where}.name must be a non-empty string", param=f"{where}.name")
        if not isinstance(schema, dict):
            raise BadRequest(
                f"{where}.input_schema must be a JSON Schema object", param=f"{where}.input_schema"
            )
        function = {"name": tool["name"], "parameters": schema}
        if tool.get("description") is not None:
            if not isinstance(tool["description"], str):
                raise BadRequest(
                    f"{where}.description must be a string", param=f"{where}.description"
                )
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice) -> dict:
    said = (
        'must be {"type": "auto"}, {"type": "any"}, {"type": "none"} or '
        '{"type": "tool", "name": ...}'
    )
    if not isinstance(choice, dict):
        raise BadRequest(f"'tool_choice' {said}", param="tool_choice")
    kind = choice.get("type")
    if kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise BadRequest(
                "'tool_choice.name' must be the name of one of the tools", param="tool_choice.name"
            )
        out: dict[str, Any] = {
            "tool_choice": {"type": "function", "function": {"name": choice["name"]}}
        }
    elif isinstance(kind, str) and kind in ("auto", "any", "none"):
        out = {"tool_choice": "required" if kind == "any" else kind}
    else:
        raise BadRequest(f"'tool_choice.type' {said}", param="tool_choice.type")
    parallel = choice.get("disable_parallel_tool_use")
    if parallel is not None and not isinstance(parallel, bool):
        raise BadRequest(
            "'tool_choice.disable_parallel_tool_use' must be true or false",
            param="tool_choice.disable_parallel_tool_use",
        )
    if parallel:
        out["parallel_tool_calls"] = False
    return out


# -- reply --------------------------------------------------------------------------------------
def from_chat(reply: dict, panel: str) -> dict:
    """A panel's ``chat.completion`` reply as a Messages reply (``bench`` kept at the top)."""
    choice = reply["choices"][0]
    message = choice.get("message") or {}
    text, calls = message.get("content"), message.get("tool_calls") or []
    content = [{"type": "text", "text": text or ""}] if text or not calls else []
    content += [
        {
            "type": "tool_use",
            "id": c["id"],
            "name": c["function"]["name"],
            "input": tool_input(c["function"].get("arguments")),
        }
        for c in calls
    ]
    usage = reply.get("usage") or {}
    return {
        "id": f"msg_{panel}",
        "type": "message",
        "role": "assistant",
        "model": reply.get("model"),
        "content": content,
        "stop_reason": "tool_use"
        if calls
        else STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("prompt_tokens") or 0,
            "output_tokens": usage.get("completion_tokens") or 0,
            **({"estimated": True} if usage.get("estimated") else {}),
        },
        "bench": reply.get("bench"),
    }


def tool_input(arguments) -> dict:
    """A tool call's arguments (a JSON text) as the object formats other than OpenAI's carry
    them; a text that is not a JSON object is kept under ``_unparsed_arguments``."""
    if not arguments:
        return {}
    try:
        value = jsonwire.loads(arguments)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_unparsed_arguments": arguments}


def error_body(status: int, message: str, **extra) -> dict:
    """Anthropic's error shape for a refusal or failure of this status."""
    kind = ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message, **extra}}


def from_openai(status: int, body: dict) -> dict:
    """An OpenAI error body in Anthropic's shape; fields OpenAI's lacks (a failed panel's
    ``seats``) ride along inside ``error``. Anthropic's shape has no ``param``: a message that
    does not name its field already starts with it (``model: no collection named; ...``)."""
    error = body["error"]
    extra = {k: v for k, v in error.items() if k not in ("message", "type", "param", "code")}
    message, param = error["message"], error.get("param")
    if isinstance(param, str) and param and param not in message:
        message = f"{param}: {message}"
    return error_body(status, message, **extra)


# -- stream -------------------------------------------------------------------------------------
class Events:
    """The events of one Messages stream, as ``(event name, data)`` pairs in sending order; a
    keep-alive is an SSE comment (the name None, the data its text), which every SSE reader
    skips, so nothing precedes ``message_start`` that a client could take out of order.

    ``message_start`` waits for the reply, since the message it starts is the one clients keep
    (the SDK's final message is built from it): it then carries ``bench`` whole. Text sent as it
    comes (``text``) cannot wait: its ``message_start`` carries what is known at the first piece
    (``bench.panel``, ``bench.streaming``), the whole ``bench`` rides on ``message_delta``, and
    ``closing`` only ends the text block (the deltas added up to ``streamed``)."""

    done = False  # no ``[DONE]``: ``message_stop`` ends the stream
    sections = False  # all mode's reply is sent whole

    def __init__(self, panel: str, model: str):
        self.panel, self.model = panel, model
        self.streamed = ""
        self.started = False

    def opening(self) -> list[tuple[str, dict]]:
        return []

    def keepalive(self) -> list[tuple[None, str]]:
        return [(None, ": seats still working")]

    def _start(self, message: dict) -> list[tuple[str, dict]]:
        self.started = True
        return [("message_start", {"type": "message_start", "message": message})]

    def text(self, piece: str) -> list[tuple[str, dict]]:
        out = (
            []
            if self.started
            else self._start(
                {
                    "id": f"msg_{self.panel}",
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                    "bench": {"panel": self.panel, "streaming": True},
                }
            )
        )
        if not self.streamed:  # a reply with text has it as its first block (``from_chat``)
            out.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
        self.streamed += piece
        return out + [
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        ]

    def closing(self, reply: dict) -> list[tuple[str, dict]]:
        message = from_chat(reply, self.panel)
        out = (
            []
            if self.started
            else self._start(
                dict(
                    message,
                    model=self.model,
                    content=[],
                    stop_reason=None,
                    usage={"input_tokens": message["usage"]["input_tokens"], "output_tokens": 0},
                )
            )
        )
        for i, block in enumerate(message["content"]):
            if i == 0 and self.streamed and block["type"] == "text":  # sent as it came
                out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
                continue
            if block["type"] == "text":
                start, delta = dict(block, text=""), {"type": "text_delta", "text": block["text"]}
            else:
                start = dict(block, input={})
                delta = {"type": "input_json_delta", "partial_json": jsonwire.dumps(block["input"])}
            out += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]
        out += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": message["usage"],
                    "bench": message["bench"],
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return out

    def failure(self, status: int, body: dict) -> list[tuple[str, dict]]:
        """The stream's end when the panel failed after it opened; ``body`` is OpenAI's."""
        return [("error", from_openai(status, body))]
