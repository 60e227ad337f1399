"""A race's seats: what every seat of one race in flight shares (``RaceInFlight``: the seats
core, the race's call log, deadline, cancel flag and costs), a job's ``Seat`` on one model, and
the tools a seat may offer its model (``tool``).

Invariants:

* Every call a seat makes is one set of the seats core, under the race's deadline and cancel,
  logged in the race's ``calls.jsonl`` with the race id, run, input and model call, and costed.
* A ``chat`` with tools answers the model's tool calls until it answers in text, at most
  ``max_rounds`` calls (``ToolLoopTooLong`` past that); a tool is called with its arguments
  coerced to its schema where that loses nothing (``tooldiff.coerce``), and what it returned or
  raised is recorded in the seat's transcript and sent back to the model.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from panelist.metrics.errors import BadRequest, PanelistError
from panelist.metrics.race import jury, tooldiff
from panelist.metrics.race.costs import Costs
from panelist.metrics.race.transcript import Transcript, arguments_of, as_text
from panelist.metrics.roster.roster import Model
from panelist.metrics.seats import SeatCall, SeatResult, Seats
from panelist.metrics.seats.record import CallLog

MAX_ROUNDS = 8  # model calls one ``chat`` may make while the model keeps calling tools


# -- tools -----------------------------------------------------------------------------------------
def tool(parameters: dict, *, name: str | None = None, description: str | None = None):
    """Mark a function as a tool a seat may offer: ``parameters`` is the JSON schema of its
    keyword arguments; the name defaults to the function's, the description to its docstring.

        @tool({"type": "object", "properties": {"number": {"type": "string"}},
               "required": ["number"]})
        def lookup_order(number): ...
    """
    if not isinstance(parameters, dict):
        raise TypeError(
            "tool() takes the JSON schema of the tool's arguments, a dict such as "
            '{"type": "object", "properties": {...}}'
        )

    def mark(fn):
        fn.tool_spec = {
            "name": name or fn.__name__,
            "description": description or (fn.__doc__ or "").strip(),
            "parameters": parameters,
        }
        return fn

    return mark


@dataclass(frozen=True)
class _Tool:
    name: str
    fn: Callable
    spec: dict

    def offer(self) -> dict:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.spec.get("description") or "",
                "parameters": self.spec.get("parameters") or {"type": "object", "properties": {}},
            },
        }


def _tools(tools) -> dict[str, _Tool]:
    """Tools given as ``@tool`` functions or ``(function, schema)`` pairs, by name."""
    out: dict[str, _Tool] = {}
    for item in tools or ():
        if isinstance(item, tuple) and len(item) == 2 and callable(item[0]):
            fn, schema = item
            spec = dict(schema) if "parameters" in schema else {"parameters": schema}
            spec.setdefault("name", fn.__name__)
            spec.setdefault("description", (fn.__doc__ or "").strip())
        elif callable(item) and isinstance(getattr(item, "tool_spec", None), dict):
            fn, spec = item, item.tool_spec
        else:
            raise TypeError(
                f"{item!r} is not a tool: mark a function with @tool(schema) or "
                "pass a (function, schema) pair"
            )
        if spec["name"] in out:
            raise ValueError(f"two tools are named {spec['name']!r}; give one another name")
        out[spec["name"]] = _Tool(spec["name"], fn, spec)
    return out


class ToolLoopTooLong(PanelistError):
    """Raised when a model still calls tools after ``max_rounds`` calls of one ``chat``."""


# -- the seat --------------------------------------------------------------------------------------
class Seat:
    """A job's handle on one model for one run; every call is recorded in its transcript."""

    def __init__(self, race: RaceInFlight, model: Model, role: str, run: int, input_: int = 1):
        self._race, self.model, self.role, self.run = race, model, role, run
        self.input = input_  # which input (from 1) this run is of
        self.label = race.label(role, model.alias, input_, run)
        self.transcript = Transcript()
        self.results: list[SeatResult] = []
        self.started = time.monotonic()
        self.first_answer: float | None = None
        self._lock = threading.Lock()

    def chat(
        self, messages: list[dict], tools=None, *, max_rounds: int = MAX_ROUNDS, **params
    ) -> str:
        """Ask the model; with ``tools``, answer its tool calls until it answers in text.

        Returns the final answer's text. A call that fails raises ``CallFailed`` (the job fails
        as it would in production); a model still calling tools after ``max_rounds`` calls
        raises ``ToolLoopTooLong``."""
        if not isinstance(messages, list) or not messages:
            raise BadRequest(
                "seat.chat needs a non-empty list of messages such as "
                '[{"role": "user", "content": "..."}]'
            )
        offered = _tools(tools)
        body = dict(params)
        if offered:
            body["tools"] = [t.offer() for t in offered.values()]
        history = list(messages)
        self.transcript.asked(messages)
        for _ in range(max_rounds):
            result = self._call(history, body)
            if not result.tool_calls or not offered:
                return result.text
            history.append(
                {
                    "role": "assistant",
                    "content": result.text or None,
                    "tool_calls": result.tool_calls,
                }
            )
            for call in result.tool_calls:
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": self._use(offered, call),
                    }
                )
        raise ToolLoopTooLong(
            f"{self.role} run {self.run}: the model still called tools after "
            f"{max_rounds} calls; raise max_rounds or check the tools' answers"
        )

    def _call(self, history: list[dict], body: dict) -> SeatResult:
        with self._lock:
            n = len(self.results) + 1
        race = self._race
        call = SeatCall(
            label=f"{self.label}.{n}",
            role=self.role,
            model=self.model,
            messages=list(history),
            params=body,
            timeout=race.call_timeout,
            retries=1,
            meta={"race": race.id, "run": self.run, "input": self.input, "model_call": n},
        )
        (result,) = race.seats.run([call], deadline=race.deadline, cancel=race.cancel, log=race.log)
        with self._lock:
            self.results.append(result)
            if result.answered and self.first_answer is None:
                self.first_answer = time.monotonic()
        self.transcript.model(result, n)
        race.spent(self.model, result)
        return result.check()

    def _use(self, offered: dict[str, _Tool], call: dict) -> str:
        """Run one tool call; what it returned (or raised) is recorded and sent back."""
        name = call["function"]["name"]
        arguments = arguments_of(call["function"]["arguments"])
        found = offered.get(name)
        used = None
        if found is None:
            why = f"no tool named {name!r}; offered: {', '.join(offered)}"
        elif not isinstance(arguments, dict):
            why = "the arguments are not a JSON object"
        else:
            used = tooldiff.coerce(found.spec.get("parameters"), arguments)
            try:
                returned = as_text(found.fn(**used))
            except Exception as exc:  # the tool's failure is the model's to read, and recorded
                why = f"{type(exc).__name__}: {exc}"
            else:
                self.transcript.tool(name, arguments, returned=returned, used=used)
                return returned
        self.transcript.tool(name, arguments, raised=why, used=used)
        return f"error: {why}"


# -- one race in flight ----------------------------------------------------------------------------
class RaceInFlight:
    """What every seat of one race shares: the core, its log, deadline, cancel flag and costs."""

    def __init__(
        self,
        race_id: str,
        folder: Path,
        seats: Seats,
        call_timeout: float,
        timeout: float,
        cancel: threading.Event,
        inputs: int = 1,
        log: CallLog | None = None,
    ):
        self.id, self.folder, self.seats = race_id, folder, seats
        self.inputs = inputs
        self.log = log if log is not None else CallLog(folder / "calls.jsonl")
        self.call_timeout = call_timeout
        self.deadline = time.monotonic() + timeout
        self.cancel = cancel
        self.costs = Costs()
        self.jury: jury.Jury  # set as the race starts (Benchmark._race), before any judging
        self.weights: dict[str, float] | None = None  # judge -> weight (set_jury_weights)
        self._lock = threading.Lock()

    def spent(self, model: Model, result: SeatResult) -> None:
        with self._lock:
            self.costs.add_call(model, result.tokens)

    def ask(self, calls: list[SeatCall]) -> list[SeatResult]:
        """A set of calls at once, by the race's deadline and cancel, logged and costed."""
        results = self.seats.run(calls, deadline=self.deadline, cancel=self.cancel, log=self.log)
        for call, result in zip(calls, results):
            self.spent(call.model, result)
        return results

    def label(self, role: str, alias: str, input_: int, run: int) -> str:
        """``<role>.<alias>.run<n>``, with ``.input<i>`` before the run when there are several
        inputs (a race of one input keeps the labels it always had)."""
        within = f".input{input_}" if self.inputs > 1 else ""
        return f"{role}.{alias}{within}.run{run}"
