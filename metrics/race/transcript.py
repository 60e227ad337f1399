"""The transcript of one run of a job: what it asked, each model call, each tool call, its output.

Invariants: events are kept in the order they happened; a tool call is recorded with what it
returned or what it raised, never both; ``render`` is plain text built only from the events
(the caller masks it before anyone blind reads it); ``public`` is JSON-ready.
"""

from __future__ import annotations

import threading

from panelist.metrics.store import jsonwire

MAX_SHOWN = 20_000   # characters of one event's text a rendering keeps (a judge's budget)


def as_text(value) -> str:
    """A job's output (or a tool's result) as text: strings as they are, data as JSON."""
    if isinstance(value, str):
        return value
    try:
        return jsonwire.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def arguments_of(raw):
    """A tool call's arguments as data when they are JSON, else the text as sent."""
    if isinstance(raw, str):
        try:
            return jsonwire.loads(raw)
        except ValueError:
            return raw
    return raw


class Transcript:
    """Thread-safe: a job may call its seat from threads of its own."""

    def __init__(self):
        self.events: list[dict] = []
        self.output: str | None = None
        self.error: str | None = None
        self._lock = threading.Lock()

    def add(self, event: dict) -> None:
        with self._lock:
            self.events.append(event)

    def asked(self, messages: list) -> None:
        self.add({"kind": "ask", "messages": [_message(m) for m in messages]})

    def model(self, result, model_call: int) -> None:
        self.add({"kind": "model", "call": model_call, "label": result.label,
                  "status": result.status, "text": result.text,
                  "tool_calls": [{"tool": c["function"]["name"],
                                  "arguments": arguments_of(c["function"]["arguments"])}
                                 for c in result.tool_calls],
                  "tokens": result.tokens, "seconds": result.seconds,
                  **({"error": f"{result.error_kind}: {result.error}"}
                     if not result.answered else {})})

    def tool(self, name: str, arguments, *, returned: str | None = None,
             raised: str | None = None) -> None:
        event = {"kind": "tool", "tool": name, "arguments": arguments}
        event.update({"raised": raised} if raised is not None else {"returned": returned})
        self.add(event)

    def tool_calls(self) -> list[dict]:
        """Every tool call the run made, in order: ``{"tool", "arguments"}``."""
        return [{"tool": e["tool"], "arguments": e["arguments"]}
                for e in self.events if e["kind"] == "tool"]

    def model_calls(self) -> list[dict]:
        return [e for e in self.events if e["kind"] == "model"]

    def public(self) -> dict:
        return {"events": list(self.events), "output": self.output, "error": self.error}

    def render(self) -> str:
        lines = []
        for e in self.events:
            if e["kind"] == "ask":
                lines.append("The job sent:")
                lines += [f"  [{m['role']}] {_cut(m['content'])}" for m in e["messages"]]
            elif e["kind"] == "model":
                if e["status"] not in ("ok", "tool_calls"):
                    lines.append(f"The model failed: {e.get('error', e['status'])}")
                    continue
                if e["text"]:
                    lines.append(f"The model answered: {_cut(e['text'])}")
                lines += [f"The model called {c['tool']} with {as_text(c['arguments'])}"
                          for c in e["tool_calls"]]
            elif e["kind"] == "tool":
                if "raised" in e:
                    lines.append(f"Tool {e['tool']} raised: {_cut(e['raised'])}")
                else:
                    lines.append(f"Tool {e['tool']} returned: {_cut(e['returned'])}")
        if self.error is not None:
            lines.append(f"The run failed: {_cut(self.error)}")
        else:
            lines.append(f"Final output: {_cut(self.output or '')}")
        return "\n".join(lines)


def _message(m) -> dict:
    """A message as the transcript keeps it: role and text (an image is a placeholder)."""
    if not isinstance(m, dict):
        return {"role": "?", "content": as_text(m)}
    content = m.get("content")
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and "image" in str(part.get("type", "")):
                parts.append("[image]")
        content = " ".join(parts)
    elif content is None:
        content = ""
    return {"role": str(m.get("role", "?")), "content": as_text(content)}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + " […cut]"
