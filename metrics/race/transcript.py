"""The transcript of one run of a job: what it asked, each model call, each tool call, its output.

Invariants: events are kept in the order they happened; a tool call is recorded with the
arguments the model sent, the arguments the tool was called with when its schema's coercion
changed them (``used``), and what it returned or what it raised, never both; ``render`` is plain
text built only from the events, every part a model wrote (and what tools returned, which can
echo it) passed through the caller's mask, what the job itself sent left as it was; it numbers
the tool calls from 1 in the order ``tool_calls`` lists them ("Tool call N", its name and
arguments as JSON), the numbers the tool difference names calls by; ``public`` is JSON-ready.
"""

from __future__ import annotations

import threading
from typing import Callable

from panelist.metrics.store import jsonwire

MAX_SHOWN = 20_000  # characters of one event's text a rendering keeps (a judge's budget)


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
        self.add(
            {
                "kind": "model",
                "call": model_call,
                "label": result.label,
                "status": result.status,
                "text": result.text,
                "tool_calls": [
                    {
                        "tool": c["function"]["name"],
                        "arguments": arguments_of(c["function"]["arguments"]),
                    }
                    for c in result.tool_calls
                ],
                "tokens": result.tokens,
                "seconds": result.seconds,
                **(
                    {"error": f"{result.error_kind}: {result.error}"} if not result.answered else {}
                ),
            }
        )

    def tool(
        self,
        name: str,
        arguments,
        *,
        returned: str | None = None,
        raised: str | None = None,
        used=None,
    ) -> None:
        event = {"kind": "tool", "tool": name, "arguments": arguments}
        if used is not None and used != arguments:
            event["used"] = used
        event.update({"raised": raised} if raised is not None else {"returned": returned})
        self.add(event)

    def tool_calls(self) -> list[dict]:
        """Every tool call the run made, in order: ``{"tool", "arguments"}``, ``used`` when
        coercion changed the arguments, and ``returned`` or ``raised``."""
        return [
            {k: v for k, v in e.items() if k != "kind"} for e in self.events if e["kind"] == "tool"
        ]

    def model_calls(self) -> list[dict]:
        return [e for e in self.events if e["kind"] == "model"]

    def public(self) -> dict:
        return {"events": list(self.events), "output": self.output, "error": self.error}

    def render(self, mask: Callable[[str, bool], str] | None = None) -> str:
        """The run as text. ``mask(text, by_model)`` is given every part a model wrote
        (``by_model`` True) and every tool result (False); what the job sent, but the
        assistant messages it sent back, is shown as it was."""

        def m(text: str, by_model: bool = True) -> str:
            return _cut(mask(text, by_model) if mask is not None else text)

        lines, calls = [], 0
        for e in self.events:
            if e["kind"] == "ask":
                lines.append("The job sent:")
                lines += [
                    f"  [{x['role']}] "
                    + (m(x["content"]) if x["role"] == "assistant" else _cut(x["content"]))
                    for x in e["messages"]
                ]
            elif e["kind"] == "model":
                if e["status"] not in ("ok", "tool_calls"):
                    lines.append(f"The model failed: {m(e.get('error', e['status']), False)}")
                    continue
                if e["text"]:
                    lines.append(f"The model answered: {m(e['text'])}")
                lines += [
                    f"The model called {c['tool']} with {m(as_text(c['arguments']))}"
                    for c in e["tool_calls"]
                ]
            elif e["kind"] == "tool":
                # numbered as ``tool_calls`` numbers them: the tool difference names calls so
                calls += 1
                head = (
                    f"Tool call {calls}: {m(jsonwire.dumps(str(e['tool'])))} with "
                    f"{m(_quoted(e['arguments']))}"
                )
                if "raised" in e:
                    lines.append(f"{head} raised: {m(e['raised'], False)}")
                else:
                    lines.append(f"{head} returned: {m(e['returned'], False)}")
        if self.error is not None:
            lines.append(f"The run failed: {m(self.error, False)}")
        else:
            lines.append(f"Final output: {m(self.output or '')}")
        return "\n".join(lines)

    def sent(self) -> list[str]:
        """What the job itself sent (never masked: it is the task's, not a model's)."""
        return [
            x["content"]
            for e in self.events
            if e["kind"] == "ask"
            for x in e["messages"]
            if x["role"] != "assistant"
        ]


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


def _quoted(value) -> str:
    """Data as JSON, text too (in quotes): a run's arguments shown as what they are, data."""
    return jsonwire.dumps(value) if isinstance(value, str) else as_text(value)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + " […cut]"
