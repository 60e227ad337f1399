"""The simulated provider's streamed answers: a chat completion as OpenAI's stream chunks.

``events(completion, include_usage)`` turns a whole ``chat.completion`` into the ``data:``
events an OpenAI server sends for it under ``stream: true``: a role chunk, the text word by word,
each tool call (its index, id and name, then its arguments in two pieces), the chunk with the
``finish_reason``, the usage chunk when asked for (``stream_options.include_usage``: empty
``choices``), then ``[DONE]``. Invariant: the pieces, joined, are the completion's text and each
call's arguments exactly, so a streamed answer reads as the same answer unstreamed.
"""

from __future__ import annotations

import json
import re

_PIECES = re.compile(r"\s+|\S+\s*")  # leading space alone, then each word with its spaces


def events(completion: dict, include_usage: bool) -> list[bytes]:
    """The SSE events (each ``data: ...`` and its blank line) of ``completion``, streamed."""
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
        "system_fingerprint": completion.get("system_fingerprint"),
    }
    (choice,) = completion["choices"]
    message = choice["message"]

    def chunk(delta: dict, finish=None) -> dict:
        return dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": piece}) for piece in _PIECES.findall(message.get("content") or "")]
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = call["function"]
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": fn["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        half = len(fn["arguments"]) // 2
        out += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
            for part in (fn["arguments"][:half], fn["arguments"][half:])
            if part
        ]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append(dict(base, choices=[], usage=completion["usage"]))
    return [b"data: %s\n\n" % json.dumps(e).encode() for e in out] + [b"data: [DONE]\n\n"]
