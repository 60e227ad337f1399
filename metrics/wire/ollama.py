"""Ollama's API (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``,
``/api/version``) as a thin adapter over a panel.

A request comes in as an Ollama body and leaves as a chat-completions body; the panel's
``chat.completion`` reply comes back as Ollama's reply, or as the lines of its NDJSON stream.
Collections are Ollama's models: ``bench/<name>`` with a reply mode as its tag
(``bench/reviewers:pick``); the tag ``latest`` is the collection's own mode.

Invariants:

* Nothing here seats, asks, logs or judges: the panel that answers is the chat one, so seating,
  logs, verdicts and call ids are shared with ``/v1/chat/completions``.
* Every field a panel carries over is checked for its JSON type before a panel is seated, a
  refusal naming the Ollama field (``messages[1].images[0]``); fields a panel has no use for
  (``keep_alive``, ``think``, most ``options``) are ignored, as a model server ignores what a
  model lacks.
* Ollama's tool calls carry no ids: each assistant call gets one made from its place
  (``call_<message>_<n>``), and each ``tool`` message answers the first call not yet answered
  of the assistant message before it, by ``tool_name`` when it gives one. A tool message that
  answers no call is refused: every seat would get an answer to a question it was never shown.
* ``format``: ``"json"`` asks for a JSON object, a schema for JSON that follows it.
* Streams are NDJSON: one JSON object a line and nothing else (Ollama's clients parse every
  line), the text as ``done: false`` lines, tool calls on one line of their own, and a last
  ``done: true`` line with the counts and ``bench``. While seats work a line with empty text
  keeps the connection alive. A failure after the stream began is one ``{"error": …}`` line.
* Counts are the panel's ``usage`` (``prompt_eval_count``, ``eval_count``), durations its
  seconds in nanoseconds as Ollama states them; a usage that is an estimate says so in
  ``bench``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from typing import Any

from panelist.metrics.errors import BadRequest
from panelist.metrics.store import jsonwire
from panelist.metrics.wire.messages import tool_input

# the Ollama API level whose routes and fields are served here (what /api/version answers)
API_VERSION = "0.9.0"
ROLES = ("system", "user", "assistant", "tool")
# options a panel carries over, by their chat names
OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "num_predict": "max_tokens",
    "seed": "seed",
    "stop": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
DONE = {"length": "length", "tool_calls": "stop", "stop": "stop"}
# the first bytes of an image's base64 tell its type; Ollama's clients send no type
IMAGE_STARTS = (
    ("/9j/", "image/jpeg"),
    ("iVBOR", "image/png"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
)
EPOCH = "1970-01-01T00:00:00Z"


def model_name(model) -> str:
    """A collection id from an Ollama model name: the tag ``latest`` is the collection's own
    reply mode (some clients add it to every name)."""
    if isinstance(model, str) and model.endswith(":latest"):
        return model[: -len(":latest")]
    return model


# -- requests -----------------------------------------------------------------------------------
def chat_to_chat(body) -> tuple[dict, bool]:
    """The chat-completions body an ``/api/chat`` request asks for, and whether it streams
    (Ollama streams unless told ``"stream": false``)."""
    _check_body(body, "an Ollama chat request: model and messages")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest(
            "'messages' must be a non-empty list of {role, content} objects", param="messages"
        )
    chat = _common(body, _messages(raw))
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise BadRequest(
                "'tools' must be a list of function tools ({\"type\": "
                '"function", "function": {name, description, parameters}})',
                param="tools",
            )
        chat["tools"] = tools
    return chat, body.get("stream", True) is not False


def generate_to_chat(body) -> tuple[dict, bool]:
    """The chat-completions body an ``/api/generate`` request asks for, and whether it
    streams."""
    _check_body(body, "an Ollama generate request: model and prompt")
    for name in ("prompt", "system", "suffix", "template"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise BadRequest(f"'{name}' must be a string", param=name)
    if body.get("suffix"):
        raise BadRequest(
            "'suffix' (fill in the middle) is not served by a panel; send the "
            "whole text in 'prompt'",
            param="suffix",
        )
    if body.get("context"):
        raise BadRequest(
            "'context' needs the tokens of an earlier answer, which a panel does "
            "not keep; use /api/chat with the whole conversation",
            param="context",
        )
    if not (body.get("prompt") or "").strip():
        raise BadRequest("'prompt' is empty: give the text to answer", param="prompt")
    user = {"role": "user", "content": body["prompt"]}
    if body.get("images"):
        user["content"] = _with_images(body["prompt"], body["images"], "images")
    messages = [{"role": "system", "content": body["system"]}] if body.get("system") else []
    return _common(body, messages + [user]), body.get("stream", True) is not False


def _check_body(body, what: str) -> None:
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object ({what})")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest(
            "'model' must name a collection, such as 'bench/<name>' or "
            "'bench/<name>:pick' (GET /api/tags lists them)",
            param="model",
        )
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false", param="stream")


def _common(body: dict, messages: list[dict]) -> dict:
    """The chat body's model, messages, options and format."""
    chat: dict[str, Any] = {"model": model_name(body["model"]), "messages": messages}
    options = body.get("options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest(
            "'options' must be an object such as {\"temperature\": 0.2}", param="options"
        )
    for name, theirs in OPTIONS.items():
        value = (options or {}).get(name)
        if value is None:
            continue
        if name == "num_predict" and (type(value) is not int or value == 0):
            raise BadRequest(
                "'options.num_predict' must be a whole number (below 0: no limit)",
                param="options.num_predict",
            )
        if name == "num_predict" and value < 0:
            continue  # Ollama's "no limit"
        chat[theirs] = value
    fmt = body.get("format")
    if fmt == "json":
        chat["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "format", "schema": fmt},
        }
    elif fmt not in (None, ""):
        raise BadRequest("'format' must be \"json\" or a JSON schema object", param="format")
    return chat


def _messages(raw: list) -> list[dict]:
    out: list[dict] = []
    pending: list[dict] = []  # calls of the last assistant message not answered yet
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(
                f"{where} must be an object whose role is one of " + ", ".join(ROLES), param=where
            )
        content = m.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise BadRequest(f"{where}.content must be a string", param=f"{where}.content")
        role = m["role"]
        if role == "tool":
            out.append(_tool_message(m, content, pending, where))
            continue
        message: dict = {"role": role, "content": content}
        if m.get("images"):
            if role != "user":
                raise BadRequest(
                    f"{where}.images: only a user message may carry images", param=f"{where}.images"
                )
            message["content"] = _with_images(content, m["images"], f"{where}.images")
        pending = []
        if role == "assistant" and m.get("tool_calls"):
            message["tool_calls"] = pending = _calls(m["tool_calls"], i, where)
            pending = list(pending)
        out.append(message)
    return out


def _calls(raw, i: int, where: str) -> list[dict]:
    if not isinstance(raw, list):
        raise BadRequest(f"{where}.tool_calls must be a list", param=f"{where}.tool_calls")
    calls = []
    for n, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise BadRequest(
                f'{where}.tool_calls[{n}] must be {{"function": {{name, arguments}}}}}}',
                param=f"{where}.tool_calls[{n}]",
            )
        args = fn.get("arguments")
        args = args if isinstance(args, str) else jsonwire.dumps(args if args is not None else {})
        cid = call.get("id") if isinstance(call.get("id"), str) and call["id"] else f"call_{i}_{n}"
        calls.append(
            {"id": cid, "type": "function", "function": {"name": fn["name"], "arguments": args}}
        )
    return calls


def _tool_message(m: dict, content: str, pending: list[dict], where: str) -> dict:
    """A tool result, as the answer to the first open call of the assistant message before it
    (of its ``tool_name``, when it names one)."""
    name = m.get("tool_name") or m.get("name")
    named = [c for c in pending if c["function"]["name"] == name] if name else pending
    if m.get("tool_call_id"):
        named = [c for c in pending if c["id"] == m["tool_call_id"]] or named
    if not named:
        raise BadRequest(
            f"{where} is a tool result, but the assistant message before it made "
            + (f"no open call of '{name}'" if name else "no call left to answer")
            + "; send each assistant message with its tool_calls, then one tool "
            "message per call",
            param=where,
        )
    call = named[0]
    pending.remove(call)
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


def _with_images(text: str, images, where: str) -> list[dict]:
    if not isinstance(images, list) or not all(isinstance(x, str) and x for x in images):
        raise BadRequest(f"{where} must be a list of base64-encoded images", param=where)
    parts: list[dict] = [{"type": "text", "text": text}] if text else []
    for n, data in enumerate(images):
        try:
            base64.b64decode(data[:64] + "=" * (-len(data[:64]) % 4), validate=True)
        except ValueError:
            raise BadRequest(
                f"{where}[{n}] is not base64: send the image's bytes base64-encoded",
                param=f"{where}[{n}]",
            ) from None
        kind = next((t for start, t in IMAGE_STARTS if data.startswith(start)), "image/png")
        parts.append({"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}})
    return parts


# -- replies ------------------------------------------------------------------------------------
def _now() -> str:
    return (
        dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _counts(reply: dict) -> dict:
    usage = reply.get("usage") or {}
    nanos = int(float((reply.get("bench") or {}).get("seconds") or 0) * 1e9)
    return {
        "total_duration": nanos,
        "load_duration": 0,
        "prompt_eval_count": usage.get("prompt_tokens") or 0,
        "prompt_eval_duration": 0,
        "eval_count": usage.get("completion_tokens") or 0,
        "eval_duration": nanos,
    }


def _bench(reply: dict) -> dict:
    bench = dict(reply.get("bench") or {})
    if (reply.get("usage") or {}).get("estimated"):
        bench["usage_estimated"] = True  # the counts above are the gateway's estimate
    return bench


def tool_calls(message: dict) -> list[dict]:
    """A chat message's tool calls in Ollama's shape: arguments as an object (a call whose
    arguments are not a JSON object keeps them under ``_unparsed_arguments``)."""
    out = []
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        out.append({"function": {"name": fn["name"], "arguments": tool_input(fn.get("arguments"))}})
    return out


def chat_reply(reply: dict, model: str) -> dict:
    """A panel's ``chat.completion`` as an ``/api/chat`` reply."""
    choice = reply["choices"][0]
    message = choice["message"]
    said = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        said["tool_calls"] = tool_calls(message)
    return {
        "model": model,
        "created_at": _now(),
        "message": said,
        "done": True,
        "done_reason": DONE.get(choice.get("finish_reason"), "stop"),
        **_counts(reply),
        "bench": _bench(reply),
    }


def generate_reply(reply: dict, model: str) -> dict:
    """A panel's ``chat.completion`` as an ``/api/generate`` reply."""
    choice = reply["choices"][0]
    return {
        "model": model,
        "created_at": _now(),
        "response": choice["message"].get("content") or "",
        "done": True,
        "done_reason": DONE.get(choice.get("finish_reason"), "stop"),
        **_counts(reply),
        "bench": _bench(reply),
    }


def error_body(message: str) -> dict:
    """Ollama's error shape: the message alone."""
    return {"error": message}


class Events:
    """The NDJSON lines of one ``/api/chat`` (``generate=False``) or ``/api/generate`` stream,
    as ``(name, object)`` pairs the server writes one a line (see the module docstring)."""

    done = False  # no closing sentinel: the last line says done
    sections = False  # all mode sends the whole reply once every seat ended
    ndjson = True  # one JSON object a line, no SSE framing
    content_type = "application/x-ndjson"

    def __init__(self, model: str, generate: bool = False):
        self.model, self.generate = model, generate
        self.streamed = ""

    def _line(self, text: str, **extra) -> tuple[str, dict]:
        said = (
            {"response": text}
            if self.generate
            else {"message": {"role": "assistant", "content": text, **extra}}
        )
        return "", {"model": self.model, "created_at": _now(), **said, "done": False}

    def opening(self) -> list:
        return []

    def keepalive(self) -> list:
        return [self._line("")]

    def text(self, piece: str) -> list:
        self.streamed += piece
        return [self._line(piece)]

    def closing(self, reply: dict) -> list:
        message = reply["choices"][0]["message"]
        out = []
        if message.get("content") and not self.streamed:
            out.append(self._line(message["content"]))
        if message.get("tool_calls") and not self.generate:
            out.append(self._line("", tool_calls=tool_calls(message)))
        last = (generate_reply if self.generate else chat_reply)(reply, self.model)
        if self.generate:
            last["response"] = ""
        else:
            last["message"] = {"role": "assistant", "content": ""}
        return out + [("", last)]

    def failure(self, status: int, body: dict) -> list:
        return [("", error_body(body["error"]["message"]))]


# -- models -------------------------------------------------------------------------------------
def _details(entry: dict) -> dict:
    return {
        "parent_model": "",
        "format": "panel",
        "family": "panel",
        "families": ["panel"],
        "parameter_size": f"{len(entry['members'])} members",
        "quantization_level": "",
    }


def tag(entry: dict) -> dict:
    """One listed model (a collection in one reply mode) as ``/api/tags`` lists it."""
    return {
        "name": entry["id"],
        "model": entry["id"],
        "modified_at": EPOCH,
        "size": 0,
        "digest": hashlib.sha256(entry["id"].encode()).hexdigest(),
        "details": _details(entry),
    }


def show(entry: dict) -> dict:
    """``/api/show`` of one model: what it can take (``capabilities``) and its window."""
    caps = entry["together"]["capabilities"]
    return {
        "modelfile": f"# a Panelist collection: {entry['description'] or entry['id']}\n",
        "parameters": "",
        "template": "",
        "details": _details(entry),
        "model_info": {
            "general.architecture": "panel",
            "general.basename": entry["id"],
            "panel.context_length": entry["together"]["context_window"],
        },
        "capabilities": ["completion"] + [c for c in ("tools", "vision") if c in caps],
        "modified_at": EPOCH,
    }
