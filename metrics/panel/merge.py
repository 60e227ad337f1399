"""Merged replies: one extra call after the panel that reconciles the seats' answers.

The merger is the collection's ``merger``; else the member with the most useful verdicts for
the request's shape; else the first member whose window holds the request plus every answer.
Whichever it is must fit that size and be able to answer (not retired, not cooling down); when
none can, or its call fails, the reply is every answer plus a one-line note saying why.

The merger's messages (``merger_input``): its instructions as the one system message (the
caller's own system and developer text quoted inside them), then the conversation as the caller
was answered, each message's content as text (images as placeholders, never the images: its job
is to report agreement and disagreement, not to look again), with the conversation's tool calls
and results as the assistant ``tool_calls`` and ``tool`` messages they are, so the merger knows
a call was made and what it returned; then one user message holding every seat's answer. The
tool messages always answer a call of the assistant message before them, as upstreams demand: a
result for no such call is quoted in a user message, a call no result answers is named in its
message's text instead.

When the request asked for JSON (``response_format``), the merger is sent the same
``response_format`` and told to answer in that JSON. The request's tools (and ``tool_choice``)
reach the merger only when a seat called a tool this turn, so it may answer with that call (the
caller's agent runs it); a turn whose seats answered in text is merged in text, which is how an
agent loop through a merged panel ends. The panel checks the merger's answer like a picked
seat's (``pick.problem``). Merged JSON takes the value most seats gave, so the seats it overruled
are kept beside it (``disagreement``).

The merger's output budget is its own, never the caller's ``max_tokens``: the seats'
completion tokens added up (an answer's length / 4 where a seat reported none), plus a quarter
and 256 tokens of headroom, at least ``MIN_BUDGET``; and never more than the merger's context
window minus its input estimate, when the window is known.
"""

from __future__ import annotations

import math
from typing import Any

from panelist.metrics.panel import jsonshape, prompt
from panelist.metrics.store import jsonwire
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import Model, RosterView
from panelist.metrics.panel.seating import window_of, why_not

INSTRUCTIONS = (
    "You merge the answers a panel of models gave to the last request of the conversation "
    "below; the seats' answers follow it. Write one answer that says "
    "where the seats agreed, where they disagreed, and who said what, naming each seat by its "
    "label and model (for example: member1 sim-swift). Keep every distinct claim, attributed; "
    "do not settle a disagreement by your own judgement and do not add claims of your own. "
    "Seats that failed or came back empty are listed so; do not guess what they would have said."
)
JSON_TOO = (
    "The caller needs the answer as JSON: reply with that JSON only, no prose around it and no "
    "code fence. Where the seats disagree on a value, pick the one most seats gave and keep "
    "the disagreement out of the JSON."
)
TOOLS_TOO = (
    "The caller offered tools. When the seats asked to call a tool, you may answer with that "
    "tool call yourself (the caller runs it and sends the result back) instead of prose."
)
MIN_BUDGET = 1024
# what offers a model tools; the merger gets none of it on a turn no seat called a tool
TOOL_PARAMS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


def offers_tools(request_tools: bool, seats: list) -> bool:
    """Whether the merger is offered the request's tools: only when a seat called one."""
    return request_tools and any(s.answered and s.tool_calls for s in seats)


def merger_params(params: dict, tools: bool) -> dict:
    """The request's parameters as the merger gets them: without the tools unless offered."""
    return dict(params) if tools else {k: v for k, v in params.items() if k not in TOOL_PARAMS}


def conversation(messages: list[dict]) -> tuple[list[str], list[dict]]:
    """``(the caller's instructions, the conversation)`` as the merger reads them: system and
    developer text apart, every other message as text with its tool calls and results kept as
    such, paired as upstreams require (module docstring)."""
    said, out = [], []
    opened: dict | None = None  # the last assistant message that called tools
    waiting: dict[str, dict] = {}  # its calls no tool message answered yet, by id

    def close() -> None:
        nonlocal opened
        if opened is not None and waiting:
            opened["tool_calls"] = [c for c in opened["tool_calls"] if c["id"] not in waiting]
            unrun = "\n".join(
                f"(tool call not run: {c['function']['name']} {c['function']['arguments']})"
                for c in waiting.values()
            )
            opened["content"] = "\n\n".join(p for p in (opened["content"], unrun) if p)
            if not opened["tool_calls"]:
                del opened["tool_calls"]
        opened = None
        waiting.clear()

    for m in messages:
        role, text = m.get("role"), " ".join(prompt.pieces_of(m.get("content")))
        if role == "tool" and m.get("tool_call_id") in waiting:
            waiting.pop(m["tool_call_id"])
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": text})
            continue
        close()
        if role in ("system", "developer"):
            said.append(text)
        elif role == "assistant":
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": c["function"].get("arguments") or "{}",
                    },
                }
                for c in m.get("tool_calls") or ()
            ]
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text or (None if calls else ""),
            }
            out.append(message)
            if calls:
                message["tool_calls"] = calls
                opened, waiting = message, {c["id"]: c for c in calls}
        elif role == "tool":
            out.append(
                {"role": "user", "content": f"(a tool result for {m.get('tool_call_id')}: {text})"}
            )
        elif role == "function":
            out.append(
                {"role": "user", "content": f"(the function {m.get('name')} returned: {text})"}
            )
        else:
            out.append({"role": "user", "content": text})
    close()
    return said, out


def merger_input(
    messages: list[dict], seats: list, urls: list[str], *, response_format=None, tools: bool = False
) -> list[dict]:
    """The merger's messages: its instructions, the conversation (``conversation``) and every
    seat's answer, images scrubbed; told to answer in JSON (and given the schema), or that it
    may answer with a tool call when ``tools`` are offered."""
    instructions, turns = conversation(messages)
    lines = ["## The seats' answers"]
    for s in seats:
        label = s.call.rsplit(".", 1)[-1]
        lines.append(f"### {label} ({s.alias}) · {s.status}")
        if s.answered:
            lines.append(prompt.scrub(s.answer, urls))
            lines.extend(
                f"(asked to call the tool {c['function']['name']} with "
                f"{c['function']['arguments']})"
                for c in s.tool_calls
            )
        else:
            lines.append(f"(no answer: {s.reason or s.status})")
        lines.append("")
    system = [INSTRUCTIONS]
    if jsonshape.wants_json(response_format):
        system.append(JSON_TOO)
        schema = jsonshape.schema_of(response_format)
        if isinstance(schema, dict):
            system.append("The JSON must fit this schema: " + jsonwire.dumps(schema))
    if tools:
        system.append(TOOLS_TOO)
    if instructions:
        system.append("The caller's instructions to the seats:\n\n" + "\n\n".join(instructions))
    return [
        {"role": "system", "content": "\n\n".join(system)},
        *turns,
        {"role": "user", "content": "\n".join(lines)},
    ]


def disagreement(answer, seats: list) -> list[dict]:
    """The seats whose JSON differs from the JSON ``answer`` (the merged reply, or the seat's
    answer a merge fell back to): ``{"call", "alias", "fields"}`` each, in seat order, where
    ``fields`` are the top-level keys whose value differs or that one side lacks (sorted;
    ``["$"]`` when the JSON is no object), or None when the seat's text is not JSON at all.
    Seats that failed or called tools, and the answer's own seat, are not compared."""
    try:
        merged = jsonwire.loads(answer.answer or "", strict=True)
    except ValueError:
        return []
    out = []
    for s in seats:
        if s is answer or not s.answered or s.tool_calls:
            continue
        try:
            said = jsonwire.loads(s.answer or "", strict=True)
        except ValueError:
            out.append({"call": s.call, "alias": s.alias, "fields": None})
            continue
        if isinstance(merged, dict) and isinstance(said, dict):
            fields = sorted(
                k
                for k in merged.keys() | said.keys()
                if k not in merged or k not in said or not _same(merged[k], said[k])
            )
        else:
            fields = [] if _same(merged, said) else ["$"]
        if fields:
            out.append({"call": s.call, "alias": s.alias, "fields": fields})
    return out


def _same(a, b) -> bool:
    """JSON equality, nested: 1 and 1.0 are equal, true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    numbers = isinstance(a, (int, float)) and isinstance(b, (int, float))
    return (numbers or type(a) is type(b)) and a == b


def budget(seats: list, window: int | None, size: int) -> int:
    """The merger's ``max_tokens`` for merging ``seats`` from an input of ``size`` tokens."""
    spent = sum(
        (s.tokens or {}).get("completion") or math.ceil(len(s.answer or "") / 4)
        for s in seats
        if s.answered
    )
    want = max(MIN_BUDGET, math.ceil(spent * 1.25) + 256)
    if window is not None and window - size > 0:
        return min(want, window - size)
    return want


def choose(
    collection: Collection, roster: RosterView, states: dict, size: int, now: float
) -> tuple[Model | None, str]:
    """The merger for a request whose merge input is estimated at ``size`` tokens, or None and
    why not. ``states`` holds the ledger state of each roster alias for the request's shape."""
    order: list[str] = []
    if collection.merger:
        order.append(collection.merger)
    judged = [
        (states[a].useful, -i, a)
        for i, a in enumerate(collection.members)
        if a in states and states[a].useful > 0
    ]
    if judged:
        order.append(max(judged)[2])
    order.extend(collection.members)
    reasons = []
    for alias in dict.fromkeys(order):
        model = roster.models.get(alias)
        if model is None:
            reasons.append(f"{alias}: not in the roster")
            continue
        why = why_not(model, states.get(alias), size, now)
        if why is None:
            return model, ""
        window = window_of(model, states.get(alias))
        reasons.append(
            f"{alias}: {why}"
            if window is None or window >= size
            else f"{alias}: window {window} tokens < {size} needed"
        )
    return None, "no merger could take the request plus every answer (" + "; ".join(reasons) + ")"
