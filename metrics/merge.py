"""Merged replies: one extra call after the panel that reconciles the seats' answers.

The merger is the collection's ``merger``; else the member with the most useful verdicts for
the request's shape; else the first member whose window holds the request plus every answer.
Whichever it is must fit that size and be able to answer (not retired, not cooling down); when
none can, or its call fails, the reply is every answer plus a one-line note saying why. The
merger reads the request as text, with image placeholders, never the images: its job is to
report agreement and disagreement, not to look again.
"""

from __future__ import annotations

from panelist.metrics import prompt
from panelist.metrics.collection import Collection
from panelist.metrics.roster import Model, RosterView
from panelist.metrics.route import window_of, why_not

INSTRUCTIONS = (
    "You merge the answers a panel of models gave to one request. Write one answer that says "
    "where the seats agreed, where they disagreed, and who said what, naming each seat by its "
    "label and model (for example: member1 sim-swift). Keep every distinct claim, attributed; "
    "do not settle a disagreement by your own judgement and do not add claims of your own. "
    "Seats that failed or came back empty are listed so; do not guess what they would have said.")


def merger_input(request_text: str, seats: list, urls: list[str]) -> list[dict]:
    """The merger's messages: the request as text and every seat's answer, images scrubbed."""
    lines = ["## The request", request_text, "", "## The seats' answers"]
    for s in seats:
        label = s.call.rsplit(".", 1)[-1]
        lines.append(f"### {label} ({s.alias}) · {s.status}")
        if s.answered:
            lines.append(prompt.scrub(s.answer, urls))
            lines.extend(f"(asked to call the tool {c['function']['name']} with "
                         f"{c['function']['arguments']})" for c in s.tool_calls)
        else:
            lines.append(f"(no answer: {s.error or s.status})")
        lines.append("")
    return [{"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": "\n".join(lines)}]


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
