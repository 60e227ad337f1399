"""OpenAI's Responses format (``POST /v1/responses``) as a thin adapter over a panel.

A request comes in as a Responses body and leaves as a chat-completions body; the panel's
``chat.completion`` reply comes back as a ``response`` object, or as the events of a Responses
stream.

Invariants:

* Nothing here seats, asks, logs or judges: the panel that answers is the chat one, so seating,
  logs, verdicts and call ids are shared with ``/v1/chat/completions``.
* Every field is checked for its JSON type before a panel is seated; a refusal is a
  ``BadRequest`` naming the Responses field (``input[3].content[0].text``), so the reply (its
  echo of the request's settings included) reads only checked values.
* Nothing is kept between requests: ``previous_response_id``, ``conversation`` and stored item
  references are refused (send the whole conversation in ``input``); ``store`` is accepted and
  ignored, and every response says ``"store": false``.
* What the caller sent is reshaped, never reworded: ``instructions`` become the system message,
  message items their chat messages, ``function_call`` items the assistant's tool calls (call ids
  kept) and ``function_call_output`` items tool messages. Reasoning items are dropped: seats
  cannot read another model's reasoning.
* A reply keeps its text, tool calls (ids verbatim), finish reason (``length`` makes the
  response ``incomplete``), usage and ``bench`` (a top-level field clients ignore).
* A stream numbers every event in ``sequence_number`` from 0, in sending order.
"""

from __future__ import annotations

import itertools

from panelist.metrics.errors import BadRequest
from panelist.metrics.panel import jsonshape

STATELESS = (
    "Panelist keeps no conversation between requests; send the whole conversation in 'input'"
)
# Responses fields with nothing to carry to a panel; everything else unknown is ignored too
REFUSED = {
    "previous_response_id": f"'previous_response_id' needs a stored response: {STATELESS}",
    "conversation": f"'conversation' needs a stored conversation: {STATELESS}",
    "background": "'background' responses are not run here; ask without it (or stream)",
    "prompt": "stored prompt templates are not kept here; send the text in 'instructions' "
    "and 'input'",
}
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
WHAT = "a Responses request: model and input"


# -- request ------------------------------------------------------------------------------------
def to_chat(body) -> tuple[dict, bool]:
    """The chat-completions body a Responses request asks for, and whether it wants a stream.
    Every field is checked here (``_check_fields``), under its Responses name, before a panel
    is seated; what the chat body then holds is checked again by the panel, and passes."""
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object ({WHAT})")
    for name, why in REFUSED.items():
        if body.get(name) not in (None, False):
            raise BadRequest(why, param=name)
    _check_fields(body)
    stream = body.get("stream") is True
    messages = []
    instructions = body.get("instructions")
    if instructions is not None:
        messages.append({"role": "system", "content": instructions})
    messages += _input(body.get("input"))
    chat = {"model": body.get("model"), "messages": messages}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    for name in ("temperature", "top_p", "parallel_tool_calls", "bench", "with"):
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    fmt = _format(body.get("text"))
    if fmt is not None:
        chat["response_format"] = fmt
    return chat, stream


# Responses fields by the JSON type they must have; those a panel does not carry over are
# checked all the same, so a mistyped field is named rather than silently dropped
TYPED = {
    "stream": (bool, "true or false"),
    "instructions": (str, "a string"),
    "parallel_tool_calls": (bool, "true or false"),
    "store": (bool, "true or false"),
    "user": (str, "a string"),
    "service_tier": (str, "a string"),
    "reasoning": (dict, 'an object such as {"effort": "low"}'),
    "safety_identifier": (str, "a string"),
    "prompt_cache_key": (str, "a string"),
}
TRUNCATIONS = ("auto", "disabled")


def _check_fields(body: dict) -> None:
    for name, (kind, said) in TYPED.items():
        if body.get(name) is not None and not isinstance(body[name], kind):
            raise BadRequest(f"'{name}' must be {said}", param=name)
    for name, least in (("max_output_tokens", 1), ("max_tool_calls", 1), ("top_logprobs", 0)):
        v = body.get(name)
        if v is not None and (type(v) is not int or v < least):
            raise BadRequest(f"'{name}' must be a whole number of at least {least}", param=name)
    metadata = body.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise BadRequest("'metadata' must be an object whose values are strings", param="metadata")
    include = body.get("include")
    if include is not None and (
        not isinstance(include, list) or not all(isinstance(i, str) for i in include)
    ):
        raise BadRequest("'include' must be a list of strings", param="include")
    if body.get("truncation") is not None and body["truncation"] not in TRUNCATIONS:
        raise BadRequest("'truncation' must be auto or disabled", param="truncation")


def _input(value) -> list[dict]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise BadRequest(
            "'input' must be a string or a non-empty list of input items "
            "(messages, function_call and function_call_output items)",
            param="input",
        )
    messages: list[dict] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where} must be an input item object", param=where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            messages.append(_message(item, where))
        elif kind == "function_call":
            _function_call(messages, item, where)
        elif kind == "function_call_output":
            messages.append(_function_output(item, where))
        elif kind == "item_reference":
            raise BadRequest(
                f"{where}: item references need stored items; {STATELESS}", param=f"{where}.type"
            )
        elif kind != "reasoning":
            raise BadRequest(
                f"{where}: '{kind}' items are not accepted; send message, "
                "function_call and function_call_output items",
                param=f"{where}.type",
            )
    if not messages:
        raise BadRequest("'input' holds no message to answer", param="input")
    return messages


def _message(item: dict, where: str) -> dict:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise BadRequest(
            f"{where}.role must be user, assistant, system or developer", param=f"{where}.role"
        )
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise BadRequest(
            f"{where}.content must be a string or a list of content parts", param=f"{where}.content"
        )
    parts = [_part(part, f"{where}.content[{j}]") for j, part in enumerate(content)]
    if role != "user":  # the roles whose chat content is plainest as one string
        if any(p["type"] != "text" for p in parts):
            raise BadRequest(
                f"{where}: only a user message may hold images", param=f"{where}.content"
            )
        return {"role": role, "content": "".join(p["text"] for p in parts)}
    if len(parts) == 1 and parts[0]["type"] == "text":
        return {"role": role, "content": parts[0]["text"]}
    return {"role": role, "content": parts}


def _part(part, where: str) -> dict:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text", "text"):
        if not isinstance(part.get("text"), str):
            raise BadRequest(f"{where}.text must be a string", param=f"{where}.text")
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str):
            raise BadRequest(
                f"{where}.image_url must be an https:// or data:image/ URL "
                "(uploaded file ids are not kept here)",
                param=f"{where}.image_url",
            )
        image = {"url": url}
        if part.get("detail") is not None:
            if not isinstance(part["detail"], str):
                raise BadRequest(
                    f'{where}.detail must be a string such as "auto"', param=f"{where}.detail"
                )
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "refusal":
        raise BadRequest(f"{where}.refusal must be a string", param=f"{where}.refusal")
    raise BadRequest(
        f"{where} must be an input_text, output_text or input_image part (files "
        "and audio are not accepted)",
        param=f"{where}.type" if isinstance(part, dict) else where,
    )


def _function_call(messages: list[dict], item: dict, where: str) -> None:
    """A call joins the assistant message just before it, as chat keeps a turn's calls together."""
    call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments", "")
    for field, value in (("call_id", call_id), ("name", name), ("arguments", args)):
        if not isinstance(value, str):
            raise BadRequest(
                f"{where}.{field} must be a string (a function_call needs string "
                "'call_id', 'name' and 'arguments')",
                param=f"{where}.{field}",
            )
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
    last = messages[-1] if messages else None
    if (
        last is not None
        and last["role"] == "assistant"
        and isinstance(last.get("content"), (str, type(None)))
    ):
        last.setdefault("tool_calls", []).append(call)
        return
    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _function_output(item: dict, where: str) -> dict:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str):
        raise BadRequest(
            f"{where}.call_id must be the call_id of the function_call it answers",
            param=f"{where}.call_id",
        )
    if isinstance(output, list):
        parts = [_part(p, f"{where}.output[{k}]") for k, p in enumerate(output)]
        if any(p["type"] != "text" for p in parts):
            raise BadRequest(f"{where}.output may hold text only", param=f"{where}.output")
        output = "".join(p["text"] for p in parts)
    if not isinstance(output, str):
        raise BadRequest(f"{where}.output must be a string", param=f"{where}.output")
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def _tools(tools) -> list[dict]:
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of function tools", param="tools")
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise BadRequest(
                f"{where}: only function tools are passed to seats, not '{kind}'; "
                'send {"type": "function", "name", "parameters"} and run '
                "the tool yourself",
                param=f"{where}.type",
            )
        # the flat Responses form, or chat's nested one
        spec = tool["function"] if isinstance(tool.get("function"), dict) else tool
        at = f"{where}.function" if spec is not tool else where
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            raise BadRequest(f"{at}.name must be a non-empty string", param=f"{at}.name")
        for name, kind, said in (
            ("description", str, "a string"),
            ("parameters", dict, "a JSON Schema object"),
            ("strict", bool, "true or false"),
        ):
            if spec.get(name) is not None and not isinstance(spec[name], kind):
                raise BadRequest(f"{at}.{name} must be {said}", param=f"{at}.{name}")
        function = {
            k: spec[k]
            for k in ("name", "description", "parameters", "strict")
            if spec.get(k) is not None
        }
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice):
    if choice in ("auto", "none", "required"):
        return choice
    if (
        isinstance(choice, dict)
        and choice.get("type") == "function"
        and isinstance(choice.get("name"), str)
    ):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise BadRequest(
        "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": "
        '"function", "name": ...}',
        param="tool_choice",
    )


def _format(text) -> dict | None:
    """``text.format`` as chat's ``response_format`` (None: plain text)."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise BadRequest(
            '\'text\' must be an object such as {"format": {"type": "json_object"}}', param="text"
        )
    if text.get("verbosity") is not None and not isinstance(text["verbosity"], str):
        raise BadRequest("'text.verbosity' must be a string", param="text.verbosity")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequest(
            '\'text.format\' must be {"type": "text"}, {"type": '
            '"json_object"} or {"type": "json_schema", "name", '
            '"schema"}',
            param="text.format",
        )
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise BadRequest(
            "'text.format.type' must be text, json_object or json_schema", param="text.format.type"
        )
    if not isinstance(fmt.get("schema"), dict):
        raise BadRequest(
            "'text.format.schema' must be a JSON Schema object", param="text.format.schema"
        )
    jsonshape.check_schema(fmt["schema"], "text.format.schema")
    for name, kind, said in (
        ("name", str, "a string"),
        ("description", str, "a string"),
        ("strict", bool, "true or false"),
    ):
        if fmt.get(name) is not None and not isinstance(fmt[name], kind):
            raise BadRequest(f"'text.format.{name}' must be {said}", param=f"text.format.{name}")
    schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
    return {"type": "json_schema", "json_schema": schema}


# -- reply --------------------------------------------------------------------------------------
def shell(body: dict, panel: str, model: str | None, created: int) -> dict:
    """A response in progress: the request's settings echoed, no output yet (``model``: the
    reply's, None when it named none)."""
    tools = [{"type": "function", **t["function"]} for t in _tools(body.get("tools") or [])]
    metadata = body.get("metadata")
    return {
        "id": f"resp_{panel}",
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": body.get("temperature"),
        "text": {"format": (body.get("text") or {}).get("format") or {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": tools,
        "top_p": body.get("top_p"),
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": metadata if isinstance(metadata, dict) else {},
    }


def message_item(panel: str, text: str) -> dict:
    """The answer's text as the ``message`` output item (always the first item)."""
    return {
        "type": "message",
        "id": f"msg_{panel}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def from_chat(reply: dict, body: dict, panel: str) -> dict:
    """A panel's ``chat.completion`` reply as a completed (or incomplete) ``response``."""
    choice = reply["choices"][0]
    message = choice.get("message") or {}
    text, calls = message.get("content"), message.get("tool_calls") or []
    output = []
    if text or not calls:
        output.append(message_item(panel, text or ""))
    output += [
        {
            "type": "function_call",
            "id": f"fc_{panel}_{i}",
            "call_id": c["id"],
            "name": c["function"]["name"],
            "arguments": c["function"].get("arguments") or "",
            "status": "completed",
        }
        for i, c in enumerate(calls)
    ]
    usage = reply.get("usage") or {}
    tokens_in, tokens_out = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    cut = INCOMPLETE.get(choice.get("finish_reason"))
    response = shell(body, panel, reply.get("model"), reply.get("created") or 0)
    response.update(
        status="incomplete" if cut else "completed",
        incomplete_details={"reason": cut} if cut else None,
        output=output,
        usage={
            "input_tokens": tokens_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens_in + tokens_out,
            **({"estimated": True} if usage.get("estimated") else {}),
        },
        bench=reply.get("bench"),
    )
    return response


# -- stream -------------------------------------------------------------------------------------
class Events:
    """The events of one Responses stream, as ``(event name, data)`` pairs in sending order;
    a keep-alive is an SSE comment (the name None, the data its text). Text sent as it comes
    (``text``) opens the message item at once; ``closing`` then only ends it, with the text
    the deltas added up to (``streamed``)."""

    done = False  # no ``[DONE]``: ``response.completed`` ends the stream
    sections = False  # all mode's reply is sent whole

    def __init__(self, body: dict, panel: str, model: str, created: int):
        self.body, self.panel = body, panel
        self.shell = shell(body, panel, model, created)
        self._numbers = itertools.count()
        self.streamed = ""

    def _event(self, kind: str, **data) -> tuple[str, dict]:
        return kind, {"type": kind, "sequence_number": next(self._numbers), **data}

    def opening(self) -> list[tuple[str, dict]]:
        return [
            self._event("response.created", response=self.shell),
            self._event("response.in_progress", response=self.shell),
        ]

    def keepalive(self) -> list[tuple[None, str]]:
        return [(None, ": seats still working")]

    def text(self, piece: str) -> list[tuple[str, dict]]:
        # the message is always the first output item when there is text (``from_chat``)
        out = [] if self.streamed else self._message_start(0, message_item(self.panel, ""))
        self.streamed += piece
        return out + [
            self._event(
                "response.output_text.delta",
                item_id=f"msg_{self.panel}",
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        ]

    def closing(self, reply: dict) -> list[tuple[str, dict]]:
        response = from_chat(reply, self.body, self.panel)
        out = []
        for n, item in enumerate(response["output"]):
            if item["type"] != "message":
                out += self._call(n, item)
                continue
            if not self.streamed:
                out += self._message_start(n, item)
                out.append(
                    self._event(
                        "response.output_text.delta",
                        item_id=item["id"],
                        output_index=n,
                        content_index=0,
                        delta=item["content"][0]["text"],
                        logprobs=[],
                    )
                )
            out += self._message_end(n, item)
        final = (
            "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        )
        out.append(self._event(final, response=response))
        return out

    def _message_start(self, n: int, item: dict) -> list[tuple[str, dict]]:
        part = item["content"][0]
        return [
            self._event(
                "response.output_item.added",
                output_index=n,
                item=dict(item, status="in_progress", content=[]),
            ),
            self._event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=n,
                content_index=0,
                part=dict(part, text=""),
            ),
        ]

    def _message_end(self, n: int, item: dict) -> list[tuple[str, dict]]:
        part = item["content"][0]
        ids = {"item_id": item["id"], "output_index": n}
        return [
            self._event(
                "response.output_text.done", **ids, content_index=0, text=part["text"], logprobs=[]
            ),
            self._event("response.content_part.done", **ids, content_index=0, part=part),
            self._event("response.output_item.done", output_index=n, item=item),
        ]

    def _call(self, n: int, item: dict) -> list[tuple[str, dict]]:
        ids = {"item_id": item["id"], "output_index": n}
        return [
            self._event(
                "response.output_item.added",
                output_index=n,
                item=dict(item, status="in_progress", arguments=""),
            ),
            self._event("response.function_call_arguments.delta", **ids, delta=item["arguments"]),
            self._event(
                "response.function_call_arguments.done",
                **ids,
                name=item["name"],
                arguments=item["arguments"],
            ),
            self._event("response.output_item.done", output_index=n, item=item),
        ]

    def failure(self, status: int, body: dict) -> list[tuple[str, dict]]:
        """The stream's end when the panel failed after it opened (``body``: the error reply
        it would have had): an ``error`` event, then ``response.failed``."""
        error = body["error"]
        code = error.get("code") or error.get("type") or "server_error"
        failed = dict(
            self.shell, status="failed", error={"code": code, "message": error["message"]}
        )
        # the error's own fields (a failed panel's seats too), but the event's type stays
        said = {k: v for k, v in error.items() if k != "type"}
        return [
            self._event("error", **dict(said, code=code)),
            self._event("response.failed", response=failed),
        ]
