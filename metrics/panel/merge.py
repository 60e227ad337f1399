"""Merged replies: one extra call after the panel that reconciles the seats' answers.

The merger is the collection's ``merger``; else the member with the most useful verdicts for
the request's shape; else the first member whose window holds the request plus every answer.
Whichever it is must fit that size and be able to answer (not retired, not cooling down); when
none can, or its call fails, the reply is every answer plus a one-line note saying why. The
merger reads the request as text, with image placeholders, never the images: its job is to
report agreement and disagreement, not to look again.

When the request asked for JSON (``response_format``), the merger is sent the same
``response_format`` and told to answer in that JSON; when it offered tools, the merger is sent
the tools and may itself answer with a tool call (the caller's agent runs it). The panel checks
the merger's answer like a picked seat's (``pick.problem``).

The merger's output budget is its own, never the caller's ``max_tokens``: the seats'
completion tokens added up (an answer's length / 4 where a seat reported none), plus a quarter
and 256 tokens of headroom, at least ``MIN_BUDGET``; and never more than the merger's context
window minus its input estimate, when the window is known.
"""

from __future__ import annotations

import math

from panelist.metrics.panel import jsonshape, prompt
from panelist.metrics.store import jsonwire
from panelist.metrics.roster.collection import Collection
from panelist.metrics.roster.roster import Model, RosterView
from panelist.metrics.panel.seating import window_of, why_not

INSTRUCTIONS = (
    "You merge the answers a panel of models gave to one request. Write one answer that says "
    "where the seats agreed, where they disagreed, and who said what, naming each seat by its "
    "label and model (for example: member1 sim-swift). Keep every distinct claim, attributed; "
    "do not settle a disagreement by your own judgement and do not add claims of your own. "
    "Seats that failed or came back empty are listed so; do not guess what they would have said.")
JSON_TOO = (
    "The caller needs the answer as JSON: reply with that JSON only, no prose around it and no "
    "code fence. Where the seats disagree on a value, pick the one most seats gave and keep "
    "the disagreement out of the JSON.")
TOOLS_TOO = (
    "The caller offered tools. When the seats asked to call a tool, you may answer with that "
    "tool call yourself (the caller runs it and sends the result back) instead of prose.")
MIN_BUDGET = 1024


def merger_input(request_text: str, seats: list, urls: list[str], *, response_format=None,
                 tools: bool = False) -> list[dict]:
    """The merger's messages: the request as text and every seat's answer, images scrubbed;
    told to answer in JSON (and given the schema) or with a tool call when the caller wants."""
    lines = ["## The request", request_text, "", "## The seats' answers"]
    for s in seats:
        label = s.call.rsplit(".", 1)[-1]
        lines.append(f"### {label} ({s.alias}) · {s.status}")
        if s.answered:
            lines.append(prompt.scrub(s.answer, urls))
            lines.extend(f"(asked to call the tool {c['function']['name']} with "
                         f"{c['function']['arguments']})" for c in s.tool_calls)
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
    return [{"role": "system", "content": "\n\n".join(system)},
            {"role": "user", "content": "\n".join(lines)}]


def budget(seats: list, window: int | None, size: int) -> int:
    """The merger's ``max_tokens`` for merging ``seats`` from an input of ``size`` tokens."""
    spent = sum((s.tokens or {}).get("completion") or math.ceil(len(s.answer or "") / 4)
                for s in seats if s.answered)
    want = max(MIN_BUDGET, math.ceil(spent * 1.25) + 256)
    if window is not None and window - size > 0:
        return min(want, window - size)
    return want


def choose(collection: Collection, roster: RosterView, states: dict, size: int,
           now: float) -> tuple[Model | None, str]:
    """The merger for a request whose merge input is estimated at ``size`` tokens, or None and
    why not. ``states`` holds the ledger state of each roster alias for the request's shape."""
    order: list[str] = []
    if collection.merger:
        order.append(collection.merger)
    judged = [(states[a].useful, -i, a) for i, a in enumerate(collection.members)
              if a in states and states[a].useful > 0]
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
        reasons.append(f"{alias}: {why}" if window is None or window >= size else
                       f"{alias}: window {window} tokens < {size} needed")
    return None, "no merger could take the request plus every answer (" + "; ".join(reasons) + ")"
