"""Pick mode: which one seat's answer is a panel's reply, and when that is known.

The reply of a pick is one seat's answer verbatim (text, tool calls, finish reason), so an agent
loop or a structured-output parser works as with a single model. Every seat is still asked,
logged and owed a verdict; only the reply is one answer.

The order of preference:

1. ``Request.prefer``, when that alias sits in the panel as a member (a tool conversation keeps
   the member that started it);
2. the members, by useful rate for the request's shape, counted with one useful and one
   not-useful verdict added: ``(useful + 1) / (useful + not_useful + 2)``. A member never judged
   stands at 1/2, so a member judged mostly useful ranks above it and one judged mostly not
   useful below it, and a single verdict moves a member less than many do. Ties keep the
   collection's member order (first member first);
3. then the other seats (nominees and explorers) in seat order, as failover of last resort.

A seat's answer can be the reply when the seat answered (status ``ok`` or ``tool_calls``) and
it is what the request demands of the one answer (``Demand``):

* a forced ``tool_choice`` is followed, as OpenAI guarantees it is: ``"required"`` takes an
  answer that calls a tool, a named function an answer whose every call is to that function,
  ``"none"`` an answer that calls none (a prose answer is not a tool call, whatever it says);
* else an answer that calls tools is taken as it is;
* else, when the request asked for JSON (``response_format``), its text is that JSON
  (``jsonshape``).

The pick is known as soon as the first seat in the order has finished with a usable answer and
every seat before it has finished without one: a slower seat later in the order is never waited
for, and a faster one never jumps the order. Each seat passed over is named, with why, in the
failover note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panelist.metrics.panel import jsonshape
from panelist.metrics.plaintext import shorten

if TYPE_CHECKING:
    from panelist.metrics.seats import SeatResult


def rate(state) -> float:
    """A member's useful rate with one verdict of each kind added (1/2 when never judged)."""
    useful = getattr(state, "useful", 0) or 0
    not_useful = getattr(state, "not_useful", 0) or 0
    return (useful + 1) / (useful + not_useful + 2)


def order(results: list, members: tuple[str, ...], states: dict, prefer: str | None = None) -> list:
    """``results`` (in seat order) in the order of preference described above."""
    seated = [r for r in results if r.seat == "member"]
    rank = {alias: i for i, alias in enumerate(members)}
    seated.sort(key=lambda r: (-rate(states.get(r.alias)), rank.get(r.alias, len(rank))))
    first = [r for r in seated if prefer is not None and r.alias == prefer][:1]
    rest = [r for r in results if r.seat != "member"]
    return first + [r for r in seated if r not in first] + rest


class Demand:
    """What the one answer of a request must be: the JSON of ``response_format`` (``fmt``), and
    what a forced ``tool_choice`` asks (``tool``: ``"required"``, ``"none"``, a function's name,
    or None when the model may choose, as with ``"auto"`` or no ``tool_choice``)."""

    def __init__(self, fmt=None, tool_choice=None):
        self.fmt = fmt
        if tool_choice in ("required", "none"):
            self.tool = tool_choice
        elif isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
            self.tool = tool_choice["function"].get("name")
        else:
            self.tool = None

    @property
    def checked(self) -> bool:
        """Whether an answer must be read before it can be the reply (JSON asked, or a tool
        choice forced); when not, the first seat in the order that answers is the pick."""
        return self.tool is not None or jsonshape.wants_json(self.fmt)

    def why_checked(self) -> str:
        """``checked`` in words, "" when not: the first choice's answer is then the reply
        whatever it says, and a stream may send it as it is written (``live.py``)."""
        if jsonshape.wants_json(self.fmt):
            return (
                "the response_format asks for JSON: the answer is checked whole before it is sent"
            )
        if self.tool == "none":
            return 'tool_choice is "none": the answer is checked for tool calls before it is sent'
        if self.tool is not None:
            return (
                "tool_choice asks for a tool call: the answer is checked for one before it is sent"
            )
        return ""

    @property
    def forced(self) -> bool:
        """Whether the reply must be a tool call (``"required"`` or a named function)."""
        return self.tool not in (None, "none")

    def choice(self) -> str:
        """The forced tool choice in words: ``tool_choice is "required"``, ``tool_choice names
        lookup_order``."""
        return (
            f'tool_choice is "{self.tool}"'
            if self.tool in ("required", "none")
            else f"tool_choice names {self.tool}"
        )

    def wanted(self) -> str:
        """The answer a forced tool choice asks for, in words."""
        return (
            f'a tool call (tool_choice "{self.tool}")'
            if self.tool == "required"
            else f"a call of {self.tool} (tool_choice names it)"
        )

    def tool_problem(self, calls: list) -> str | None:
        """Why an answer with these tool calls does not follow the tool choice, or None."""
        if self.tool is None:
            return None
        if self.tool == "none":
            return f"called a tool, though {self.choice()}" if calls else None
        if not calls:
            return f"answered without calling a tool, though {self.choice()}"
        # OpenAI answers a named function with that function only: another call in the same
        # answer would reach a caller that asked for exactly one
        other = (
            sorted({c["function"]["name"] for c in calls} - {self.tool})
            if self.tool != "required"
            else []
        )
        return f"called {', '.join(other)}, not {self.tool} as tool_choice names" if other else None


ANY = Demand()


def problem(result, demand: Demand = ANY) -> str | None:
    """Why ``result`` cannot be the reply to a request that demands ``demand``."""
    if not result.answered:  # an error's reason already starts with its kind
        said = reason(result)
        return (
            said if result.status == "error" and said else f"{result.status}: {said or 'no answer'}"
        )
    why = demand.tool_problem(result.tool_calls or [])
    if why is not None:
        return why
    if result.tool_calls:  # taken as it is: a tool call carries no JSON to check
        return None
    why = jsonshape.problem(result.answer, demand.fmt)
    return None if why is None else f"not the JSON asked for: {why}"


class Picker:
    """Seats are offered as they finish; ``offer`` says when the pick is decided."""

    def __init__(self, ordered: list[SeatResult], demand: Demand = ANY):
        self.order = ordered
        self.demand = demand
        self.picked: SeatResult | None = None
        self.passed: list[tuple[SeatResult, str]] = []  # (seat, why) passed over, in order
        self._pos = 0
        self._done: set[str] = set()

    @property
    def decided(self) -> bool:
        return self.picked is not None or self._pos >= len(self.order)

    def offer(self, result) -> bool:
        """Take a finished seat; True once the pick is decided (picked, or nobody left)."""
        self._done.add(result.call)
        while (
            self.picked is None
            and self._pos < len(self.order)
            and self.order[self._pos].call in self._done
        ):
            candidate = self.order[self._pos]
            why = problem(candidate, self.demand)
            if why is None:
                self.picked = candidate
            else:
                self.passed.append((candidate, why))
                self._pos += 1
        return self.decided

    def note(self) -> str:
        """The failover, in words; empty when the first choice was picked."""
        if not self.passed:
            return ""
        said = "; ".join(f"{label(r)} {r.alias}: {_short(why)}" for r, why in self.passed)
        if self.picked is None:
            return f"no seat's answer could be used ({said})"
        return f"failover: {said}; picked {label(self.picked)} {self.picked.alias}"


def first_usable(ordered: list, demand: Demand = ANY) -> Picker:
    """A picker over seats that have all finished: the first usable answer in ``ordered``."""
    picker = Picker(ordered, demand)
    for r in ordered:
        if picker.offer(r):
            break
    return picker


def reason(result) -> str:
    """A failed seat's error as one line, ``kind: message``: a ``SeatResult``'s ``reason``, or
    the ``error`` of a seat that carries the line whole (as read back from a reply)."""
    return getattr(result, "reason", None) or result.error


def label(result) -> str:
    """``member1``, ``explorer2``, ``merger``: the seat's part of its call id."""
    return result.call.rsplit(".", 1)[-1]


def _short(text: str, limit: int = 160) -> str:
    return shorten(str(text), limit)  # what to do stays whole; no word is cut
