"""OpenAI's chat completions as a stream: a panel's reply as ``chat.completion.chunk`` events.

``Events`` makes the events of one stream in sending order, as ``(name, data)`` pairs the
server sends (``name`` None: an SSE comment whose text is ``data``; "": a plain data event):
the role chunk that opens it, keep-alive comments, text deltas as they come, then the rest of
the reply (content not yet sent, tool calls in OpenAI's delta form with their ``index``, the
final chunk with ``finish_reason``, ``usage`` and ``bench``). The stream ends with ``[DONE]``.

Invariants: the text deltas sent add up to ``streamed``; a reply's content is sent once, as
deltas or whole; ``bench`` and ``usage`` ride on the final chunk only.
"""

from __future__ import annotations


class Events:
    """The events of one chat stream; see the module docstring."""

    done = True  # the stream ends with ``data: [DONE]``
    sections = True  # all mode sends each seat's section as it finishes

    def __init__(self, panel: str, model: str, created: int):
        self._base = {
            "id": f"chatcmpl-{panel}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        self.streamed = ""  # the text sent as deltas so far

    def _chunk(self, delta: dict, finish=None, **extra) -> tuple[str, dict]:
        return "", dict(
            self._base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}], **extra
        )

    def opening(self) -> list[tuple[str, dict]]:
        return [self._chunk({"role": "assistant"})]

    def keepalive(self) -> list[tuple[None, str]]:
        return [(None, ": seats still working")]

    def text(self, piece: str) -> list[tuple[str, dict]]:
        self.streamed += piece
        return [self._chunk({"content": piece})]

    def closing(self, reply: dict) -> list[tuple[str, dict]]:
        (choice,) = reply["choices"]
        message = choice["message"]
        out = []
        if message.get("content") and not self.streamed:
            out.append(self._chunk({"content": message["content"]}))
        if message.get("tool_calls"):
            out.append(
                self._chunk(
                    {
                        "tool_calls": [
                            dict(call, index=i) for i, call in enumerate(message["tool_calls"])
                        ]
                    }
                )
            )
        out.append(
            self._chunk({}, choice["finish_reason"], usage=reply["usage"], bench=reply["bench"])
        )
        return out

    def failure(self, status: int, body: dict) -> list[tuple[str, dict]]:
        """The stream's end when the panel failed after it opened: the error body a reply
        would have had, as a data event (OpenAI's clients raise it)."""
        return [("", body)]
