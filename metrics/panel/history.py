"""Multi-turn history as each seat sees it, and the member a tool conversation sticks to.

A caller that carries on a conversation sends back the replies it was given. Such a reply is the
panel's answer to the caller, not any one seat's: shown as it came, a seat would take the whole
panel's markdown, or another seat's answer, for what it said itself. ``for_seat`` rewrites each
earlier Panelist reply for one seat:

* **Recognised** by its tool call ids (``Ledger.tool_call_owner``), by the hash of its text
  (``Ledger.delivered_panel``), or by a call id in its text (``call `p…-7.member1```, as the
  panel's markdown and merged replies show them). Any other message passes unchanged.
* **Its own answer**: a seat that answered in that panel sees its text and its tool calls.
* **Else the answer the caller was given**: a merged or picked reply as the caller sent it back;
  after a reply holding every seat's section, the answers given one after another without the
  sections' headings, call ids or statuses (never the panel's markdown as if one seat wrote it).
  While the earlier panel is still running (a picked reply goes out before the other seats end)
  only the picked seat's own answer is known: every other seat sees the reply as given.
* **Tool results stay valid** for each seat, since an upstream refuses a ``tool`` message
  answering a call id it did not issue. Of the ``tool`` messages right after the reply:
  a result for one of the seat's own calls stays; a result for a delivered call with the same
  function and arguments as one of the seat's calls is given to that call (its
  ``tool_call_id`` becomes the seat's); any other result goes into one ``user`` message after
  them that names the call and its result. A call of the seat's that no result answers was
  never run: it leaves ``tool_calls`` and is named in the seat's text instead.

Invariants: the input list and its messages are never changed; every message out is one of the
input's or is built from the ledger's record of the panel; each earlier panel's record is read
once per ``Conversation`` (O(1) each, through panels.idx), however many seats it is shown to.
"""

from __future__ import annotations

import json
import re

from panelist.metrics.ledger.index import ANSWERED
from panelist.metrics.ledger.ledger import Ledger

_CALL_ID = re.compile(r"\b(p\d{8}-\d{1,15})\.[a-z]+\d*\b")
_HEADING = re.compile(r"^## Seat \d+: .*$", re.M)
_CALL_LINE = re.compile(r"^call `[^`]+` · .*$", re.M)
SEPARATOR = "\n\n---\n\n"
NOTE_HEAD = (
    "Tool results the caller got for tool calls in the answer it was given, which "
    "were not your calls:"
)


def _text(content) -> str:
    """The text of a message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    return ""


def _calls(message: dict) -> list[dict]:
    """The well-formed tool calls of a message (each with a string id)."""
    calls = message.get("tool_calls")
    return (
        [c for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]
        if isinstance(calls, list)
        else []
    )


def _signature(call: dict) -> tuple:
    """What a tool call asks for: its function and arguments (parsed when they are JSON)."""
    fn = call.get("function")
    if not isinstance(fn, dict):
        fn = {}
    args = fn.get("arguments")
    try:
        args = json.dumps(json.loads(args), sort_keys=True) if isinstance(args, str) else args
    except ValueError:
        pass
    return fn.get("name"), args if isinstance(args, str) else json.dumps(args, sort_keys=True)


def _describe(call: dict | None) -> str:
    if call is None:
        return "a tool call"
    name, args = _signature(call)
    return f"{name} {args}"


def is_sections(text: str) -> bool:
    """Whether a reply is the panel's markdown: a section per seat, each with its call id."""
    return bool(_HEADING.search(text) and _CALL_LINE.search(text))


def _unsection(text: str) -> str:
    """The answers in a panel's markdown, without headings, call lines, notes or failures."""
    answers = []
    for part in _HEADING.split(text)[1:]:
        body = _CALL_LINE.sub("", part, count=1).strip()
        if body and not body.startswith("> "):
            answers.append(body)
    return SEPARATOR.join(answers)


class _Turn:
    """One earlier Panelist reply (``messages[start]``) and the tool results after it."""

    def __init__(self, start: int, end: int, record: dict | None, picked: str | None):
        self.start, self.end = start, end
        self.record = record  # the panel's calls.jsonl line; None while it still runs
        self.picked = picked  # whose tool calls were delivered, when the ids tell

    def seats(self) -> list[dict]:
        seats = self.record.get("seats") if self.record else None
        return [s for s in seats if isinstance(s, dict)] if isinstance(seats, list) else []

    def own(self, alias: str | None) -> tuple[str, list[dict]] | None:
        """What ``alias`` answered in this panel (text, tool calls), if it answered."""
        if alias is None:
            return None
        for seat in self.seats():
            if seat.get("alias") == alias and seat.get("status") in ANSWERED:
                answer = seat.get("answer")
                return (
                    answer if isinstance(answer, str) else "",
                    [
                        c
                        for c in seat.get("tool_calls") or ()
                        if isinstance(c, dict) and isinstance(c.get("id"), str)
                    ],
                )
        return None

    def given(self, reply: dict) -> dict:
        """The answer the caller was given, fit to show a seat as an earlier assistant turn."""
        text = _text(reply.get("content"))
        if not is_sections(text):
            return reply  # a merged or picked reply: as the caller has it
        if self.record is not None:
            answers = [
                s["answer"].strip()
                for s in self.seats()
                if s.get("status") in ANSWERED
                and isinstance(s.get("answer"), str)
                and s["answer"].strip()
            ]
            plain = SEPARATOR.join(answers)
        else:
            plain = _unsection(text)
        return {"role": "assistant", "content": plain or "(the panel gave no answer)"}

    def as_seen_by(self, alias: str | None, messages: list[dict]) -> list[dict]:
        reply, results = messages[0], messages[1:]
        if self.record is None and alias is not None and alias == self.picked:
            return list(messages)  # still running, and this seat's answer is the reply itself
        own = self.own(alias)
        if own is None:
            return [self.given(reply), *results]
        return _fit(*own, reply, results)


def _fit(text: str, calls: list[dict], reply: dict, results: list[dict]) -> list[dict]:
    """A seat's own answer followed by the tool results, made valid for it (module docstring)."""
    mine = {c["id"]: c for c in calls}
    delivered = {c["id"]: c for c in _calls(reply)}
    used: set[str] = set()
    kept, notes = [], []
    for result in results:
        tid = result.get("tool_call_id")
        if isinstance(tid, str) and tid in mine and tid not in used:  # mine's ids are str
            used.add(tid)
            kept.append(result)
            continue
        asked = delivered.get(tid)
        twin = (
            None
            if asked is None
            else next(
                (c for c in calls if c["id"] not in used and _signature(c) == _signature(asked)),
                None,
            )
        )
        if twin is not None:
            used.add(twin["id"])
            kept.append(dict(result, tool_call_id=twin["id"]))
        else:
            notes.append(f"- {_describe(asked)}: {_text(result.get('content'))}")
    ran = [c for c in calls if c["id"] in used]
    unrun = [f"(tool call not run: {_describe(c)})" for c in calls if c["id"] not in used]
    content = "\n\n".join(p for p in (text.strip(), "\n".join(unrun)) if p)
    message: dict = {"role": "assistant", "content": content or (None if ran else "")}
    if ran:
        message["tool_calls"] = ran
    out = [message, *kept]
    if notes:
        out.append({"role": "user", "content": "\n".join([NOTE_HEAD, *notes])})
    return out


class Conversation:
    """A request's messages with each earlier Panelist reply found once; ``for_seat`` per seat."""

    def __init__(self, messages: list[dict], ledger: Ledger):
        self.messages = messages
        self.turns: list[_Turn] = []
        records: dict[str, dict | None] = {}

        def record(panel: str) -> dict | None:
            if panel not in records:
                records[panel] = ledger.panel(panel)
            return records[panel]

        i, n = 0, len(messages)
        while i < n:
            m = messages[i]
            found = (
                _recognise(m, ledger, record)
                if isinstance(m, dict) and m.get("role") == "assistant"
                else None
            )
            if found is None:
                i += 1
                continue
            panel, picked = found
            end = i + 1
            while (
                end < n and isinstance(messages[end], dict) and messages[end].get("role") == "tool"
            ):
                end += 1
            self.turns.append(_Turn(i, end, record(panel), picked))
            i = end

    def for_seat(self, alias: str | None) -> list[dict]:
        """The messages as ``alias`` is to see them (``None``: as the caller was answered)."""
        if not self.turns:
            return self.messages
        out, pos = [], 0
        for turn in self.turns:
            out.extend(self.messages[pos : turn.start])
            out.extend(turn.as_seen_by(alias, self.messages[turn.start : turn.end]))
            pos = turn.end
        out.extend(self.messages[pos:])
        return out


def _recognise(message: dict, ledger: Ledger, record) -> tuple[str, str | None] | None:
    """``(panel, alias whose tool calls were delivered or None)`` if a Panelist reply."""
    for call in _calls(message):
        owner = ledger.tool_call_owner(call["id"])
        if owner is not None:
            return owner
    text = _text(message.get("content"))
    panel = ledger.delivered_panel(text)
    if panel is not None:
        return panel, None
    for m in _CALL_ID.finditer(text):
        if record(m.group(1)) is not None:
            return m.group(1), None
    return None


def for_seat(messages: list[dict], alias: str | None, ledger: Ledger) -> list[dict]:
    """``messages`` as the seat ``alias`` is to see them (see the module docstring). For many
    seats of one request, build one ``Conversation`` and call its ``for_seat`` per seat."""
    return Conversation(messages, ledger).for_seat(alias)


def sticky_alias(messages: list[dict], ledger: Ledger) -> str | None:
    """The member whose tool calls the conversation's latest known tool results answer: the one
    a picked reply should come from again, so a tool exchange stays with one model."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "tool":
            owner = ledger.tool_call_owner(m.get("tool_call_id"))
            if owner is not None:
                return owner[1]
    return None
