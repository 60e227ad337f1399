"""A chat request's messages: validation, the size estimate, and the text that may be written down.

The estimate errs high on purpose: characters / 4, plus 10%, system text included, plus 2,500
tokens per image. Images never reach a log, an error or a merger: they are rendered as a
placeholder (``[image: data URL, 412 KB]``, or the URL without query string or user:password).

``check_messages`` checks every field of a message that anything after it reads (role, content
and its parts, name, tool calls and their ids), so the text written down, the history shown to
each seat and the ids of a delivered reply never meet a value of a wrong type.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit, urlunsplit

from panelist.metrics.errors import BadRequest

IMAGE_TOKENS = 2500
DATA_URL = re.compile(r"^data:image/[A-Za-z0-9.+-]+;base64,", re.ASCII)
# what an upstream might echo of an image: a data URL, or a long run of base64
ECHOED_DATA = re.compile(r"data:[A-Za-z0-9.+/-]*;base64,[A-Za-z0-9+/=\s]*|[A-Za-z0-9+/]{64,}={0,2}")
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def check_messages(messages) -> list[dict]:
    """``messages`` if every message is well formed (role, content, tool calls, ids), else a
    ``BadRequest`` whose param is the first field that is not."""
    if messages is None:
        raise BadRequest(
            "'messages' is required: a list of {role, content} objects", param="messages"
        )
    if not isinstance(messages, list) or not messages:
        raise BadRequest(
            "'messages' must be a non-empty list of {role, content} objects", param="messages"
        )
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise BadRequest(f"{where} must be an object with 'role' and 'content'", param=where)
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise BadRequest(
                f"{where}.role must be one of {', '.join(ROLES)}", param=f"{where}.role"
            )
        _check_content(m.get("content"), where)
        for name in ("name", "tool_call_id"):
            if m.get(name) is not None and not isinstance(m[name], str):
                raise BadRequest(f"{where}.{name} must be a string", param=f"{where}.{name}")
        if m.get("function_call") is not None and not isinstance(m["function_call"], dict):
            raise BadRequest(
                f"{where}.function_call must be an object", param=f"{where}.function_call"
            )
        if m.get("tool_calls") is not None:
            _check_tool_calls(m["tool_calls"], role, f"{where}.tool_calls")
    return messages


def _check_content(content, where: str) -> None:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise BadRequest(
            f"{where}.content must be a string or a list of parts", param=f"{where}.content"
        )
    for j, part in enumerate(content):
        pwhere = f"{where}.content[{j}]"
        if not isinstance(part, dict):
            raise BadRequest(f"{pwhere} must be an object with a 'type'", param=pwhere)
        if not isinstance(part.get("type"), str):
            raise BadRequest(
                f'{pwhere}.type must be a string such as "text"', param=f"{pwhere}.type"
            )
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise BadRequest(f"{pwhere}.text must be a string", param=f"{pwhere}.text")
        if part["type"] == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise BadRequest(
                    f"{pwhere}.image_url.url must be a string", param=f"{pwhere}.image_url.url"
                )
            if not (url.startswith("https://") or DATA_URL.match(url)):
                raise BadRequest(
                    f"{pwhere}.image_url.url must be an https:// URL or a "
                    "data:image/...;base64, URL",
                    param=f"{pwhere}.image_url.url",
                )


def _check_tool_calls(calls, role: str, where: str) -> None:
    """An assistant's ``tool_calls``: a list of ``{"id", "type": "function", "function":
    {"name", "arguments"}}``, as OpenAI's API requires them in a history."""
    if role != "assistant":
        raise BadRequest(f"{where}: only an assistant message carries tool calls", param=where)
    if not isinstance(calls, list):
        raise BadRequest(
            f'{where} must be a list of {{"id", "type": "function", '
            '"function": {"name", "arguments"}} objects',
            param=where,
        )
    for k, call in enumerate(calls):
        cwhere = f"{where}[{k}]"
        if not isinstance(call, dict):
            raise BadRequest(
                f"{cwhere} must be an object with 'id', 'type' and 'function'", param=cwhere
            )
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise BadRequest(
                f"{cwhere}.id must be the call's id, a non-empty string", param=f"{cwhere}.id"
            )
        if call.get("type", "function") != "function":
            raise BadRequest(f'{cwhere}.type must be "function"', param=f"{cwhere}.type")
        fn = call.get("function")
        if not isinstance(fn, dict):
            raise BadRequest(
                f"{cwhere}.function must be an object with 'name' and 'arguments'",
                param=f"{cwhere}.function",
            )
        if not isinstance(fn.get("name"), str):
            raise BadRequest(
                f"{cwhere}.function.name must be a string", param=f"{cwhere}.function.name"
            )
        if fn.get("arguments") is not None and not isinstance(fn["arguments"], str):
            raise BadRequest(
                f"{cwhere}.function.arguments must be a string (the arguments as JSON text)",
                param=f"{cwhere}.function.arguments",
            )


def _parts(content):
    if content is None:
        return
    if isinstance(content, str):
        yield "text", content
        return
    for part in content:
        if part.get("type") == "text":
            yield "text", part.get("text", "")
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            yield "image", image.get("url", "") if isinstance(image, dict) else image
        else:
            yield "other", part.get("type", "")


def estimate_tokens(messages: list[dict], *, tools=None, response_format=None) -> int:
    """The tokens a model reads for this request, estimated (characters / 4 and 10%, an image at
    a flat ``IMAGE_TOKENS``): every message's text, the tool calls it made (names and
    arguments) and the results it was given, and the tool definitions and response format
    schema a model is sent beside them, as the JSON it reads."""
    chars = images = 0
    for m in messages:
        for kind, value in _parts(m.get("content")):
            if kind == "text":
                chars += len(value)
            elif kind == "image":
                images += 1
        for call in m.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                chars += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    for extra in (tools, response_format):
        if extra:
            chars += len(json.dumps(extra, ensure_ascii=False, separators=(",", ":")))
    return int(chars / 4 * 1.1) + IMAGE_TOKENS * images


def image_placeholder(url: str) -> str:
    if url.startswith("data:"):
        size_kb = max(1, round(len(url.partition(",")[2]) * 3 / 4 / 1024))
        return f"[image: data URL, {size_kb} KB]"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        clean = urlunsplit((parts.scheme, host, parts.path, "", ""))
        return f"[image: {clean}{'?...' if parts.query else ''}]"
    except ValueError:
        return "[image: unreadable URL]"


def pieces_of(content) -> list[str]:
    """A message's content as text pieces: its text, each image as its placeholder, any other
    part as ``[kind part]``."""
    pieces = []
    for kind, value in _parts(content):
        if kind == "text":
            pieces.append(value)
        elif kind == "image":
            pieces.append(image_placeholder(value))
        else:
            pieces.append(f"[{value} part]")
    return pieces


def as_text(messages: list[dict]) -> str:
    """The whole conversation as text fit to log or to show another model."""
    out = []
    for m in messages:
        pieces = pieces_of(m.get("content"))
        # a tool conversation written down as text must still say what was called and what
        # came back
        for call in m.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                pieces.append(f"[called {fn.get('name')} with {fn.get('arguments')}]")
        role = m.get("role")
        if role == "tool" and m.get("tool_call_id"):
            role = f"tool (result of {m['tool_call_id']})"
        out.append(f"{role}: {' '.join(pieces)}")
    return "\n".join(out)


def image_urls(messages: list[dict]) -> list[str]:
    return [v for m in messages for kind, v in _parts(m.get("content")) if kind == "image"]


def scrub(text: str, urls: list[str]) -> str:
    """``text`` with every trace of the request's images replaced by placeholders: the data URLs
    (whole or cut short), long base64 runs, and http(s) URLs with their query or user:password."""
    if not urls or not text:
        return text
    for url in urls:
        if url.startswith("data:"):
            continue
        parts = urlsplit(url)
        # an upstream may echo the URL whole, with user:password, or cut short: anything that
        # starts like it and is not already a placeholder
        stem = (
            r"(?<!\[image: )"
            + re.escape(f"{parts.scheme}://")
            + r"[^\s\"'<>\]]*"
            + re.escape(f"{parts.hostname or ''}")
            + r"[^\s\"'<>\]]*"
        )
        text = re.sub(stem, lambda m: image_placeholder(m.group(0)), text)
    return ECHOED_DATA.sub("[image: data URL]", text)
