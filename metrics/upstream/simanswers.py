"""What a simulated model answers (``metrics.upstream.sim``): the text it reads in a request,
the refusals its behaviour scripts, its tool calls and JSON, and its plain reply. Functions of a
request and a behaviour only: no sockets, no state."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


def _contents(messages: list) -> tuple[list[str], str, int]:
    """The text of every message, the last user message's text, and how many images they hold."""
    texts, last, images = [], "", 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        mine = []
        if isinstance(content, str):
            mine.append(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") in ("image_url", "input_image", "image"):
                    images += 1
                elif isinstance(part.get("text"), str):
                    mine.append(part["text"])
        texts += mine
        if message.get("role") == "user":
            last = " ".join(mine)
    return texts, last, images


def _tool_history_error(messages: list) -> str | None:
    """Why a history breaks the tool-call rule OpenAI's API enforces, or None: each ``tool``
    message answers a call of the assistant message just before the tool messages, and every
    call of an assistant message is answered before the conversation goes on."""
    unanswered: list = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            tid = message.get("tool_call_id")
            if tid not in unanswered:
                return (
                    f"messages[{i}]: a message with role 'tool' must answer a tool call of "
                    f"the assistant message before it; tool_call_id {tid!r} was not issued "
                    "there or was answered already"
                )
            unanswered.remove(tid)
            continue
        if unanswered:
            return (
                f"messages[{i}]: an assistant message with 'tool_calls' must be followed by "
                f"tool messages answering each tool_call_id; not answered: "
                f"{', '.join(map(str, unanswered))}"
            )
        calls = message.get("tool_calls") if role == "assistant" else None
        unanswered = (
            [c.get("id") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        )
    if unanswered:
        return (
            "the last message calls tools: send the tool messages answering "
            f"{', '.join(map(str, unanswered))} before asking again"
        )
    return None


def _unsupported(model: str, body: dict, b: dict) -> tuple[str, str] | None:
    """``(param, message)`` when the request asks for what the model is scripted to lack: tools,
    a json_schema response format, or more completion tokens than its ``max_output``."""
    if b.get("tools") is False and body.get("tools"):
        return "tools", f"registry/{model} does not support tools"
    fmt = body.get("response_format")
    if (
        b.get("structured_output") is False
        and isinstance(fmt, dict)
        and fmt.get("type") == "json_schema"
    ):
        return "response_format", (
            "Invalid parameter: 'response_format' of type 'json_schema' "
            "is not supported with this model"
        )
    cap = b.get("max_output")
    for param in ("max_completion_tokens", "max_tokens"):
        asked = body.get(param)
        if cap and type(asked) is int and asked > cap:
            return param, b.get("message") or (
                f"{param} is too large: {asked}. This model supports at most {cap} completion "
                f"tokens, whereas you provided {asked}."
            )
    return None


def _ruled(b: dict, asked: str) -> str | None:
    """The answer of the first rule whose text the last user message contains, if any."""
    for rule in b.get("rules") or ():
        if rule["contains"] in asked:
            return rule["answer"]
    return None


def _last_role(messages: list) -> str | None:
    last = messages[-1] if messages else None
    return last.get("role") if isinstance(last, dict) else None


def _tool_calls(b: dict, body: dict, messages: list, seq: int) -> list[dict]:
    """The scripted tool calls this request gets: only tools it offers, and only before any
    tool result came back (a model that called once answers the results with text)."""
    script = b.get("tool_calls")
    tools = body.get("tools")
    if not script or not isinstance(tools, list) or _last_role(messages) == "tool":
        return []
    offered = {
        t.get("function", {}).get("name")
        for t in tools
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    }
    calls = []
    for i, call in enumerate(script):
        if call.get("name") not in offered:
            continue
        args = call.get("arguments", {})
        calls.append(
            {
                "id": f"call_sim{seq:06x}_{i}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return calls


def _after_tools(model: str, messages: list) -> str:
    said = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    quoted = "; ".join(str(s) for s in said[-3:])
    return f"[simulated {model}] The tools said: {quoted}."


def _wants_json(body: dict) -> bool:
    fmt = body.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def _json_answer(b: dict, body: dict, n: int, asked: str = "") -> str:
    ruled = next((r["answer"] for r in b.get("json_rules") or () if r["contains"] in asked), None)
    if ruled is not None:
        return ruled if isinstance(ruled, str) else json.dumps(ruled)
    scripted = b.get("json")
    if isinstance(scripted, list) and scripted:
        scripted = scripted[(n - 1) % len(scripted)]
    if isinstance(scripted, str):
        return scripted
    if scripted is not None:
        return json.dumps(scripted)
    fmt = body["response_format"]
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt["type"] == "json_schema" else None
    schema = schema or {"type": "object"}
    return json.dumps(_from_schema(schema, body.get("model"), 0, schema))


def _from_schema(schema, model, depth: int, root=None):
    """A small value that satisfies ``schema``'s types and required keys; local refs
    (``#/$defs/...``, as pydantic writes nested models) are followed."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and isinstance(root, dict):
        target: Any = root  # parsed JSON, walked down the reference
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _from_schema(target, model, depth + 1, root)
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _from_schema(schema[key][0], model, depth + 1, root)
    given = schema.get("type")
    kind: Any = given[0] if isinstance(given, list) and given else given  # parsed JSON
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        keys = schema.get("required") or list(props)
        return {k: _from_schema(props.get(k, {}), model, depth + 1, root) for k in keys}
    if kind == "array":
        return []
    return {
        "string": f"simulated {model}",
        "integer": 1,
        "number": 1.0,
        "boolean": True,
        "null": None,
    }.get(kind, f"simulated {model}")


def _reply(model: str, asked: str, images: int) -> str:
    words = asked.split()
    quoted = " ".join(words[:6]) + (" …" if len(words) > 6 else "")
    said = f'You asked: "{quoted}".' if words else "You sent no text."
    seen = f" I was shown {images} image{'s' if images != 1 else ''}." if images else ""
    return (
        f"[simulated {model}] {said}{seen} This is a scripted reply from a simulated model; "
        "no language model read your prompt."
    )


# -- a scripted judge of answers (``panelist judge check``) ----------------------------------------
JUDGE_MODES = ("truth", "useful", "longer")
TRUTH = re.compile(r"\(truth=(useful|poor)\)")
_JUDGE_BLOCK = re.compile(
    r"<<<BEGIN (\w+) (answer(?: [AB])?)>>>\n(.*?)\n<<<END \1 \2>>>", re.DOTALL
)


def truth_mark(useful: bool) -> str:
    """The mark a simulated answer carries of its hidden quality, which a ``truth`` judge reads
    (people's verdicts in a simulated ledger are drawn from the same mark)."""
    return f"(truth={'useful' if useful else 'poor'})"


def _truth(text: str) -> bool | None:
    found = TRUTH.search(text)
    return None if found is None else found.group(1) == "useful"


def _draw(seed, *parts: str) -> float:
    """A number in [0, 1) fixed by the seed and the texts: the same question gets the same
    answer however many threads ask, and a question in the other order is a fresh draw."""
    digest = hashlib.blake2b(
        "\x00".join((str(seed), *parts)).encode("utf-8", "replace"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") / 2**64


def judged(script: dict, body: dict, messages: list) -> str | None:
    """The scripted judge's JSON answer to a judge check's question, or None when the request
    is no such question (its ``response_format`` names ``usefulness`` or ``preference``).

    ``mode``: ``truth`` agrees with each answer's hidden mark (``truth_mark``) with probability
    ``agree`` (a pair whose marks are alike is a coin toss); ``useful`` calls every answer
    useful and prefers whichever it is shown first; ``longer`` calls an answer useful when it is
    at least ``long`` characters (default 200) and prefers the longer of two (the first when
    they are as long)."""
    fmt = body.get("response_format")
    name = ((fmt or {}).get("json_schema") or {}).get("name") if isinstance(fmt, dict) else None
    if name not in ("usefulness", "preference"):
        return None
    texts, _, _ = _contents(messages)
    blocks = {m.group(2): m.group(3) for text in texts for m in _JUDGE_BLOCK.finditer(text)}
    mode, seed = script.get("mode", "truth"), script.get("seed", 0)
    agree = script.get("agree", 1.0)
    if name == "usefulness":
        answer = blocks.get("answer", "")
        if mode == "useful":
            useful = True
        elif mode == "longer":
            useful = len(answer) >= script.get("long", 200)
        else:
            truth = _truth(answer)
            useful = (
                (_draw(seed, "mark", answer) < 0.5)
                if truth is None
                else truth == (_draw(seed, "mark", answer) < agree)
            )
        return json.dumps({"useful": useful, "reason": "scripted"})
    a, b = blocks.get("answer A", ""), blocks.get("answer B", "")
    if mode == "useful":
        better = "A"
    elif mode == "longer":
        better = "B" if len(b) > len(a) else "A"
    else:
        ta, tb = _truth(a), _truth(b)
        draw = _draw(seed, "pair", a, b)
        if ta is None or tb is None or ta == tb:
            better = "A" if draw < 0.5 else "B"
        else:
            right = "A" if ta else "B"
            better = right if draw < agree else ("B" if right == "A" else "A")
    return json.dumps({"better": better, "reason": "scripted"})


def listed(name: str, b: dict) -> dict:
    """One model's entry in ``GET /models``: what the behaviour scripts, in the fields many
    providers use (``context_length``, per-token ``pricing``, input modalities)."""
    entry = {"id": name, "object": "model", "created": 0, "owned_by": "panelist-simulation"}
    if b.get("window"):
        entry["context_length"] = b["window"]
    if b.get("price") is not None:
        entry["pricing"] = {
            "prompt": f"{b['price'][0] / 1e6:.12g}",
            "completion": f"{b['price'][1] / 1e6:.12g}",
        }
    if b.get("vision") is not None:
        entry["architecture"] = {"input_modalities": ["text", "image"] if b["vision"] else ["text"]}
    if b.get("max_output"):
        entry["top_provider"] = {"max_completion_tokens": b["max_output"]}
    if b.get("tools") is not None or b.get("structured_output") is not None:
        # as aggregators list them: a model states every parameter it takes
        params = ["max_tokens", "temperature", "stop"]
        if b.get("tools") is not False:
            params += ["tools", "tool_choice"]
        if b.get("structured_output") is not False:
            params += ["response_format", "structured_outputs"]
        entry["supported_parameters"] = params
    return entry
