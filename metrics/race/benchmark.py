"""The race: a job run on the grade's pinned model (the reference), raced on every candidate of
its grade, each run judged blind against the reference, reported side by side.

A **job** is any object with ``grade`` and ``run(input, seat) -> output``; a **seat** is a handle
pinned to one model whose ``chat`` makes one call through the seats core (admission included)
and, given tools, runs the tool-call loop. ``Benchmark`` drives the race::

    bench = Benchmark(OrderAgent, runs=3, home=home)
    bench.set_inputs(["Where is order 42?", "Has order 43 shipped?"])   # or set_input(x)
    bench.set_rubric("Names the order's status and its delivery date.")
    answers = bench.run()         # what the reference runs returned, one per input
    bench.report().table()        # rows, means, intervals, the verdict and its test

Invariants:

* The reference runs once per input, and every candidate ``runs`` times per input; each run is
  judged against its own input's reference.
* ``run()`` returns exactly what the reference run returned (``set_input``), or the list of
  what each input's reference returned (``set_inputs``). When a reference fails, nothing is
  raced, the report is still built, logged and saved, and then the job's own exception (the
  first input's that failed) is raised.
* The reference, the candidate runs and the judgements are jobs of the seats core's sets
  (``SeatJob``), and every model call a set of its own: the core runs them, under admission,
  by the race's deadline and its cancel. Every candidate run is a fresh ``factory()`` job
  pinned to its model; ``parallel`` of them run at once (admission paces their calls), and
  ``JUDGES`` judgements; a failed run is a row saying why, and the race goes on.
* Every model and judge call is in ``runs/races/<race id>/calls.jsonl`` with the race id, the
  run and the role (reference / candidate / judge); the report is ``runs/races/<race id>.json``
  (and a ``race_reports`` row when the data folder names a database: ``race.reports``) and
  ``metadata[Benchmark.REPORT]`` (the parent's, when one was given, and the benchmark's own).
* A candidate run still going at the race's deadline, or past its cancel, plus the core's grace
  (its job's own code stuck: model calls end by then) is a failed row that says so, and the
  race ends without waiting for it; a run the cancel kept from beginning is a row that says so.
* A run that fails is never judged; a run that succeeds is judged as soon as it lands, blind
  (``race.blind``), by the ceiling model or the judges named (``set_judges``), in both orders
  (``set_orders``), each prompt kept in the race's folder (``race.jury``). No model judges its
  own family's runs: a ceiling of a raced model's family gives way to the strongest model of
  another (``jury.default_judge``), or leaves its own family's runs unjudged, saying why.
* A tool is called with its arguments coerced to its schema where that loses nothing
  (``tooldiff.coerce``: ``"42"`` for an ``integer`` is 42); the transcript keeps both.
* A run's tool calls are compared with its reference's in code (``tooldiff``); a call to a tool
  the reference did not call counts against accuracy unless ``set_allow_extra_tools`` allows
  it. The judge reads that difference in code's words only (``tooldiff.describe``): what a run
  chose to write stays in its own block.
* Every run's row carries ``flags``: text in it addressed to the judge (``flags``), for a
  person to read; a flag never voids or rescores a run.
* A race may be a look of a job raced again (``set_looks``, ``metrics.race.jobs``): its rows are
  numbered after the earlier looks' runs, the report holds every look's rows and the verdict
  is tested on all of them at the look's share of the error (``metrics.race.sequential``).
* Costs are the roster's prices (or, where none is typed, the catalog's) × tokens, in each
  model's currency, never summed across currencies.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, cast

from panelist.metrics.race import blind, checks, flags, jobs, jury, tooldiff
from panelist.metrics.race import reports as race_reports
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.race.costs import Costs, call_cost
# the grades a race reads, named here too: jobs import them with Benchmark
from panelist.metrics.race.gradebook import GradeBook, roster_candidates, strongest  # noqa: F401
from panelist.metrics.errors import BadRequest, Cancelled, NotFound, PanelistError
from panelist.metrics.home import Home, open_home
from panelist.metrics.seats.record import CallLog
from panelist.metrics.store.jsonl import utc_iso
from panelist.metrics.race import verdict
from panelist.metrics.race.report import BenchmarkReport, judging_of, summarise
from panelist.metrics.roster.known import KnownRoster
from panelist.metrics.roster.learned import LearnedFacts
from panelist.metrics.roster.roster import Model, Roster, RosterView
from panelist.metrics.seats import CallFailed, JobResult, SeatCall, SeatJob, SeatResult, Seats
from panelist.metrics.race.transcript import Transcript, arguments_of, as_text

log = logging.getLogger("panelist.race")

MAX_ROUNDS = 8          # model calls one ``chat`` may make while the model keeps calling tools
CALL_TIMEOUT = 120.0    # seconds one model call may take once admitted
RACE_TIMEOUT = 3600.0   # seconds the whole race (waits for admission included) may take
PARALLEL = 32           # runs in flight at once in this process (admission paces the calls)
JUDGES = 4              # judgements in flight at once


# -- tools -----------------------------------------------------------------------------------------
def tool(parameters: dict, *, name: str | None = None, description: str | None = None):
    """Mark a function as a tool a seat may offer: ``parameters`` is the JSON schema of its
    keyword arguments; the name defaults to the function's, the description to its docstring.

        @tool({"type": "object", "properties": {"number": {"type": "string"}},
               "required": ["number"]})
        def lookup_order(number): ...
    """
    if not isinstance(parameters, dict):
        raise TypeError("tool() takes the JSON schema of the tool's arguments, a dict such as "
                        '{"type": "object", "properties": {...}}')

    def mark(fn):
        fn.tool_spec = {"name": name or fn.__name__,
                        "description": description or (fn.__doc__ or "").strip(),
                        "parameters": parameters}
        return fn
    return mark


@dataclass(frozen=True)
class _Tool:
    name: str
    fn: Callable
    spec: dict

    def offer(self) -> dict:
        return {"type": "function", "function": {
            "name": self.name, "description": self.spec.get("description") or "",
            "parameters": self.spec.get("parameters") or {"type": "object", "properties": {}}}}


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
            raise TypeError(f"{item!r} is not a tool: mark a function with @tool(schema) or "
                            "pass a (function, schema) pair")
        if spec["name"] in out:
            raise ValueError(f"two tools are named {spec['name']!r}; give one another name")
        out[spec["name"]] = _Tool(spec["name"], fn, spec)
    return out


class ToolLoopTooLong(PanelistError):
    """Raised when a model still calls tools after ``max_rounds`` calls of one ``chat``."""


# -- the seat --------------------------------------------------------------------------------------
class Seat:
    """A job's handle on one model for one run; every call is recorded in its transcript."""

    def __init__(self, race: "_Race", model: Model, role: str, run: int, input_: int = 1):
        self._race, self.model, self.role, self.run = race, model, role, run
        self.input = input_   # which input (from 1) this run is of
        self.label = race.label(role, model.alias, input_, run)
        self.transcript = Transcript()
        self.results: list[SeatResult] = []
        self.started = time.monotonic()
        self.first_answer: float | None = None
        self._lock = threading.Lock()

    def chat(self, messages: list[dict], tools=None, *, max_rounds: int = MAX_ROUNDS,
             **params) -> str:
        """Ask the model; with ``tools``, answer its tool calls until it answers in text.

        Returns the final answer's text. A call that fails raises ``CallFailed`` (the job fails
        as it would in production); a model still calling tools after ``max_rounds`` calls
        raises ``ToolLoopTooLong``."""
        if not isinstance(messages, list) or not messages:
            raise BadRequest("seat.chat needs a non-empty list of messages such as "
                             '[{"role": "user", "content": "..."}]')
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
            history.append({"role": "assistant", "content": result.text or None,
                            "tool_calls": result.tool_calls})
            for call in result.tool_calls:
                history.append({"role": "tool", "tool_call_id": call["id"],
                                "content": self._use(offered, call)})
        raise ToolLoopTooLong(f"{self.role} run {self.run}: the model still called tools after "
                              f"{max_rounds} calls; raise max_rounds or check the tools' answers")

    def _call(self, history: list[dict], body: dict) -> SeatResult:
        with self._lock:
            n = len(self.results) + 1
        race = self._race
        call = SeatCall(label=f"{self.label}.{n}",
                        role=self.role, model=self.model, messages=list(history), params=body,
                        timeout=race.call_timeout, retries=1,
                        meta={"race": race.id, "run": self.run, "input": self.input,
                              "model_call": n})
        result, = race.seats.run([call], deadline=race.deadline, cancel=race.cancel,
                                 log=race.log)
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
            except Exception as exc:   # the tool's failure is the model's to read, and recorded
                why = f"{type(exc).__name__}: {exc}"
            else:
                self.transcript.tool(name, arguments, returned=returned, used=used)
                return returned
        self.transcript.tool(name, arguments, raised=why, used=used)
        return f"error: {why}"


# -- one race in flight ----------------------------------------------------------------------------
class _Race:
    """What every seat of one race shares: the core, its log, deadline, cancel flag and costs."""

    def __init__(self, race_id: str, folder: Path, seats: Seats, call_timeout: float,
                 timeout: float, cancel: threading.Event, inputs: int = 1,
                 log: CallLog | None = None):
        self.id, self.folder, self.seats = race_id, folder, seats
        self.inputs = inputs
        self.log = log if log is not None else CallLog(folder / "calls.jsonl")
        self.call_timeout = call_timeout
        self.deadline = time.monotonic() + timeout
        self.cancel = cancel
        self.costs = Costs()
        self.jury: jury.Jury   # set as the race starts (Benchmark._race), before any judging
        self.weights: dict[str, float] | None = None   # judge -> weight (set_jury_weights)
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


@dataclass
class _Run:
    seat: Seat
    output: object = None
    exception: BaseException | None = None
    wall: float = 0.0
    row: dict = field(default_factory=dict)   # filled by Benchmark._row as the run ends

    @property
    def succeeded(self) -> bool:
        return self.exception is None


class Benchmark:
    """Races a job across its grade; see the module docstring."""

    REPORT = "benchmark.report"

    def __init__(self, factory: Callable[[], object], runs: int = 1, parent=None, *,
                 home: Home | str | None = None, grades: GradeBook | None = None,
                 upstream: Upstream | None = None, admission="home",
                 call_timeout: float = CALL_TIMEOUT, timeout: float = RACE_TIMEOUT,
                 parallel: int = PARALLEL):
        """``factory()`` builds a fresh job per run; each candidate runs it ``runs`` times.
        ``parent``: an object with a ``metadata`` dict that also receives the report.
        ``admission``: ``"home"`` (the data folder's limits), an admission object, or None."""
        if not callable(factory):
            raise TypeError("Benchmark needs a factory: a callable that builds a fresh job")
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ValueError(f"runs must be a whole number of at least 1, not {runs!r}")
        if parent is not None and not isinstance(getattr(parent, "metadata", None), dict):
            raise TypeError("parent must have a 'metadata' dict the report can be set on")
        self.factory, self.runs, self.parent = factory, runs, parent
        self.home = home if isinstance(home, Home) else open_home(home)
        self.roster = Roster(self.home)
        self.grades = grades or GradeBook.of_home(self.home, self.roster)
        self.upstream = upstream
        self.admission = _admission(self.home) if admission == "home" else admission
        self.call_timeout, self.timeout, self.parallel = call_timeout, timeout, parallel
        self.metadata: dict = {}
        self._inputs: list = []
        self._listed = False   # set_inputs: run() returns a list
        self._margin = verdict.MARGIN
        self._candidates: list[str] | None = None
        self._judges: list[str] | None = None
        self._orders = "both"
        self._jury_weights: str | None = None
        self._on_judged: Callable[[str], None] | None = None
        self._rubric: str | None = None
        self._allow = None   # tooldiff.check_allow: extra tool calls that do not count
        self._scorer: Callable[[object, object], float | None] | None = None
        self._report: BenchmarkReport | None = None
        self._cancel = CancelFlag()
        self._progress = {"runs": 0, "done": 0, "judged": 0}
        self._progress_lock = threading.Lock()
        self._reserved: tuple[str, Path] | None = None
        self._earlier = jobs.Earlier(None)   # the job's earlier looks (none: a first race)

    # -- setters -----------------------------------------------------------------------------------
    def set_input(self, value) -> "Benchmark":
        """Race the job on this one input; ``run()`` returns what its reference returned."""
        self._inputs, self._listed = [value], False
        return self

    def set_inputs(self, values: list) -> "Benchmark":
        """Race the job on each of these inputs (one input says little about a job); the
        reference runs once per input and ``run()`` returns the list of what they returned."""
        if not isinstance(values, (list, tuple)) or not values:
            raise TypeError("set_inputs takes a non-empty list of the job's inputs, one per "
                            "item (set_input(x) takes a single one)")
        self._inputs, self._listed = list(values), True
        return self

    def set_margin(self, points: float) -> "Benchmark":
        """How many points of 10 worse than the pinned model a model may be and still be good
        enough (default 1): the verdict's non-inferiority margin."""
        self._margin = verdict.check_margin(points)
        return self

    def set_candidates(self, aliases: list[str]) -> "Benchmark":
        if isinstance(aliases, str) or not all(isinstance(a, str) for a in aliases):
            raise TypeError("set_candidates takes a list of model aliases")
        self._candidates = list(dict.fromkeys(aliases))
        return self

    def set_judges(self, aliases: list[str]) -> "Benchmark":
        """Judge with these models instead of the ceiling model alone: a jury, of distinct
        families, none of a candidate's or the reference's (refused otherwise, at ``run``)."""
        if isinstance(aliases, str) or not aliases or \
                not all(isinstance(a, str) for a in aliases):
            raise TypeError("set_judges takes a non-empty list of model aliases")
        self._judges = list(dict.fromkeys(aliases))
        return self

    def set_orders(self, orders: str) -> "Benchmark":
        """``"both"`` (default): every run is judged with the reference shown first and again
        with the candidate first; ``"random"``: once, in an order drawn per run (recorded)."""
        if orders not in jury.ORDERS:
            raise ValueError(f"orders must be one of {', '.join(jury.ORDERS)}, not {orders!r}")
        self._orders = orders
        return self

    def set_jury_weights(self, how: str | None) -> "Benchmark":
        """``"agreement"``: each judge counts in a run's pooled scores by its κ against people
        in its latest judge check of general work (else of every shape), floored at 0
        (``race.checks``); a judge never checked refuses the race. None: equal weights."""
        if how is not None and how not in checks.WEIGHTS:
            raise ValueError(f"jury weights must be one of {', '.join(checks.WEIGHTS)} or None, "
                             f"not {how!r}")
        self._jury_weights = how
        return self

    def set_looks(self, earlier: "jobs.Earlier") -> "Benchmark":
        """Race this as a look of a job (``metrics.race.jobs``): its report holds the earlier
        looks' rows beside its own, and its verdict is tested at this look's share."""
        if not isinstance(earlier, jobs.Earlier):
            raise TypeError("set_looks takes a jobs.Earlier")
        self._earlier = earlier
        return self

    @property
    def earlier(self) -> "jobs.Earlier":
        """The job this race is a look of, and what it carries from the earlier looks."""
        return self._earlier

    def on_judged(self, fn: Callable[[str], None] | None) -> "Benchmark":
        """``fn(alias)`` hears each candidate run's judging end (judged, void or failed)."""
        self._on_judged = fn
        return self

    def set_rubric(self, text: str) -> "Benchmark":
        if not isinstance(text, str):
            raise TypeError("the rubric is plain text")
        self._rubric = text
        return self

    def set_allow_extra_tools(self, allow) -> "Benchmark":
        """Which calls to a tool the reference did not call do not count against accuracy:
        ``True`` (any), a list of tool names, or ``None`` (none: the default, since code cannot
        tell a harmless call from one that deletes an order)."""
        self._allow = tooldiff.check_allow(allow)
        return self

    def set_scorer(self, fn: Callable[[object, object], float | None]) -> "Benchmark":
        """``fn(reference_output, output) -> float in [0, 1]``, or None when the pair cannot be
        compared; the judge runs beside it either way."""
        if not callable(fn):
            raise TypeError("the scorer is a callable fn(reference_output, output)")
        self._scorer = fn
        return self

    @classmethod
    def candidates(cls, grade: str, *, home: Home | str | None = None,
                   grades: GradeBook | None = None) -> list[str]:
        """Every callable model of ``grade`` (the default candidates of a race)."""
        if grades is None:
            home = home if isinstance(home, Home) else open_home(home)
            grades = GradeBook.of_home(home, Roster(home))
        return list(grades.candidates(grade))

    def reserve(self) -> str:
        """Name the next ``run()``'s race now (its id and folder are made here), so a caller can
        hand the id out before the race starts; ``run()`` takes it up."""
        with self._progress_lock:
            if self._reserved is None:
                self._reserved = _new_race(self.home.races)
            return self._reserved[0]

    def cancel(self) -> None:
        """Stop the race: calls waiting or in flight end as cancelled; ``run`` then reports."""
        self._cancel.set()

    def progress(self) -> dict:
        """``{"runs", "done", "judged"}`` so far (for a terminal or an HTTP poll)."""
        with self._progress_lock:
            return dict(self._progress)

    def report(self) -> BenchmarkReport:
        if self._report is None:
            raise BadRequest("there is no report yet: call run() first")
        return self._report

    # -- the race ----------------------------------------------------------------------------------
    def run(self):
        """Run the reference on each input, race the grade, judge each run; return what the
        reference returned (a list of what each input's returned, after ``set_inputs``)."""
        if not self._inputs:
            raise BadRequest("call set_input(x) or set_inputs([x, ...]) before run(): the job "
                             "needs its input")
        job = self.factory()
        grade = getattr(job, "grade", None)
        if not isinstance(grade, str) or not grade:
            raise BadRequest("the job has no 'grade': give its class a grade such as "
                             "grade = \"general\"")
        view = KnownRoster(self.roster, self.home).view()   # catalog prices count for costs
        pinned = self._model(view, self.grades.pinned(grade), f"the model pinned for grade "
                             f"'{grade}'", f"pin one with `panelist grade pin {grade} ALIAS`")
        aliases = self._candidates if self._candidates is not None else \
            list(self.grades.candidates(grade))
        candidates = [self._model(view, a, f"candidate '{a}'", "see `panelist model list`")
                      for a in aliases]
        barred: dict[str, str] = {}
        if self._judges is None:
            ceiling = self._model(view, self.grades.ceiling(), "the ceiling model (the judge)",
                                  "set one with `panelist grade ceiling ALIAS`, or name judges")
            judge, barred, warnings = jury.default_judge(ceiling, [pinned, *candidates],
                                                         strongest(self.grades, view))
            judges = [judge]
            for w in warnings:
                log.warning("race judge: %s", w)
        else:
            judges = [self._model(view, a, f"judge '{a}'", "see `panelist model list`")
                      for a in self._judges]
            warnings = jury.check(judges, [pinned, *candidates], chosen=True)
        weights = checks.weights(self.home.judge_checks, [m.alias for m in judges],
                                 checks.RACE_SHAPE) if self._jury_weights else None
        with self._progress_lock:
            self._progress = {"runs": 0, "done": 0, "judged": 0}
            reserved, self._reserved = self._reserved, None
        race_id, folder = reserved or _new_race(self.home.races)
        store = race_reports.of_home(self.home)
        try:
            store.named(race_id)   # other hosts on the database list it from now on
            return self._run_named(store, race_id, folder, job, grade, view, pinned, judges,
                                   candidates, warnings, barred, weights)
        finally:
            store.close()

    def _run_named(self, store, race_id, folder, job, grade, view, pinned, judges, candidates,
                   warnings, barred=None, weights=None):
        seats = Seats(self.roster, self.upstream, admission=self.admission,
                      learn=LearnedFacts(self.home).heard, thread_name=f"race-{race_id}")
        race = _Race(race_id, folder, seats, self.call_timeout, self.timeout, self._cancel,
                     len(self._inputs), log=store.call_log(race_id, folder / "calls.jsonl"))
        # the seed is the race's own: a rerun of one race's questions gets the same answers
        race.jury = jury.Jury(judges, folder, race_id, seed=int(race_id[-8:], 16) & 0x7FFFFFFF,
                              orders=self._orders, call_timeout=self.call_timeout)
        race.jury.barred = dict(barred or {})   # family -> why its runs are not judged
        race.weights = weights
        started, t0 = time.time(), time.monotonic()
        try:
            references = self._references(race, pinned, job)
            failed = next((r for r in references if not r.succeeded), None)
            rows: list[dict] = []
            if failed is None:
                rows = self._race(race, references, candidates, judges, view)
            report = self._report_of(race, grade, pinned, candidates, references, rows,
                                     started, time.monotonic() - t0, warnings)
        finally:
            race.log.close()
            seats.close()
        self._publish(report, folder, store)
        if failed is not None:
            raise failed.exception
        return [r.output for r in references] if self._listed else references[0].output

    def _references(self, race: _Race, pinned: Model, job) -> list["_Run"]:
        """The reference run of every input: a set of one runs in this thread."""
        units = [SeatJob(race.label("reference", pinned.alias, i, 0),
                         partial(self._one, race, pinned, "reference", 0, i,
                                 job if i == 1 else None))
                 for i in range(1, len(self._inputs) + 1)]
        landed = race.seats.run(units, deadline=race.deadline, cancel=race.cancel,
                                parallel=self.parallel if len(units) > 1 else None)
        return [self._run_of(race, one, pinned, "reference", 0, i)
                for i, one in enumerate(landed, 1)]

    def _model(self, view: RosterView, alias: str | None, what: str, fix: str) -> Model:
        if alias is None:
            raise NotFound(f"there is no {what}; {fix}")
        if hasattr(alias, "alias"):   # a Grades that hands out models rather than aliases
            alias = alias.alias
        model = view.models.get(alias)
        if model is None:
            raise NotFound(f"{what} is '{alias}', which is not on the roster; {fix}")
        return model

    def _one(self, race: _Race, model: Model, role: str, run: int, input_: int,
             job=None) -> _Run:
        seat = Seat(race, model, role, run, input_)
        out = _Run(seat)
        try:
            if job is None:
                job = self.factory()
            out.output = job.run(self._inputs[input_ - 1], seat)
            seat.transcript.output = as_text(out.output)
        except Exception as exc:   # the job's own failure: a row for a candidate, raised for
            out.exception = exc    # the reference once the report is written
            seat.transcript.error = f"{type(exc).__name__}: {exc}"
        out.wall = time.monotonic() - seat.started
        out.row = self._row(out, model, run)
        return out

    def _race(self, race: _Race, references: list[_Run], candidates: list[Model],
              judges: list[Model], view: RosterView) -> list[dict]:
        """Every candidate run (each input, ``runs`` times) as a job of one set (``parallel``
        at once), each judged, as it lands, against its input's reference by a job of a second
        set (``JUDGES`` at once)."""
        plan = [(m, i, n) for i in range(1, len(self._inputs) + 1)
                for n in range(1, self.runs + 1) for m in candidates]
        with self._progress_lock:
            self._progress["runs"] = len(plan)
        tasks = [as_text(x) for x in self._inputs]
        # every name the deployment knows a model by, on the roster or in the catalog; what an
        # input's job sent (its task, the rubric) is never masked in the runs of that input
        names = blind.Names.of([*view.models.values(), *candidates, *judges],
                               view.endpoints.values(), self._served_ids())
        maskers = [blind.Masker(names, [task, self._rubric or "", *ref.seat.transcript.sent()])
                   for task, ref in zip(tasks, references)]
        seen = [blind.seen(ref.seat.transcript.render, masker, ref.seat.model)
                for ref, masker in zip(references, maskers)]
        rows: list[dict] = []
        of = {race.label("candidate", m.alias, i, n): (m, i, n) for m, i, n in plan}
        runs = race.seats.start(
            [SeatJob(label, partial(self._one, race, m, "candidate", n, i))
             for label, (m, i, n) in of.items()],
            deadline=race.deadline, cancel=race.cancel, parallel=self.parallel)
        judging = race.seats.start([], deadline=race.deadline, cancel=race.cancel,
                                   parallel=JUDGES)
        judged_rows: dict[str, dict] = {}
        # a run still going at the deadline (or the cancel) is the job's own code stuck (its
        # model calls end by then): it is given up as a row that says so, not waited for
        for landed in runs:
            model, i, n = of[landed.label]
            # every unit of ``runs`` is a SeatJob, so every result a JobResult
            run = self._run_of(race, cast(JobResult, landed), model, "candidate", n, i)
            rows.append(run.row)
            self._count("done")
            if run.succeeded:
                label = f"judge.{run.row['label']}"
                judged_rows[label] = run.row
                judging.add(SeatJob(label, partial(self._judge, race, references[i - 1],
                                                   seen[i - 1], run, maskers[i - 1],
                                                   tasks[i - 1])))
        for result in judging:
            landed = cast(JobResult, result)   # ``judging`` is only ever given SeatJobs
            if landed.exception is not None:   # a fault of the race's own code
                raise landed.exception
            if landed.status != "ok":
                judged_rows[landed.label]["judge_error"] = \
                    f"the run was not judged: the race {_ended_how(landed)}"
            self._count("judged")
            if self._on_judged is not None:
                self._on_judged(judged_rows[landed.label]["model"])
        order = {(m.alias, i, n): k for k, (m, i, n) in enumerate(plan)}
        return sorted(rows, key=lambda r: order[(r["model"], r["input"], r["run"])])

    def _run_of(self, race: _Race, landed: JobResult, model: Model, role: str, n: int,
                input_: int) -> _Run:
        """The run a job of the core's ended with; a job given up or never begun is a failed
        row that says why."""
        if landed.status == "ok":
            return cast(_Run, landed.value)   # the value of a job of _one's
        if landed.exception is not None:   # ``_one`` keeps the job's own failure: this is ours
            raise landed.exception
        if landed.error_kind == "cancelled" and not landed.begun:
            exception: BaseException = Cancelled(f"the {role} run was cancelled before it began")
        else:
            exception = TimeoutError(f"the run {_ended_how(landed, self.timeout)}; its job is "
                                     "still working (a tool that never returns?)")
        run = _Run(Seat(race, model, role, n, input_), exception=exception)
        run.wall = time.monotonic() - (race.deadline - self.timeout) if landed.begun else 0.0
        run.row = self._row(run, model, n)
        return run

    def _count(self, what: str) -> None:
        with self._progress_lock:
            self._progress[what] += 1

    def _judge(self, race: _Race, reference: _Run, seen: blind.Seen, run: _Run,
               masker: blind.Masker, task: str) -> None:
        row = run.row
        barred = race.jury.barred.get(run.seat.model.family)
        if barred:   # no model of another family can judge it: it is never its own judge's
            row.update(judge_error=barred, reason=barred)
            return
        diff = tooldiff.tool_difference(reference.seat.transcript.tool_calls(),
                                        run.seat.transcript.tool_calls(),
                                        run.seat.transcript.output, task, self._allow)
        row["tool_difference"] = diff
        if self._scorer is not None:
            try:
                score = self._scorer(reference.output, run.output)
                if score is not None and (isinstance(score, bool) or
                                          not isinstance(score, (int, float)) or
                                          not 0 <= score <= 1):
                    raise ValueError(f"the scorer returned {score!r}, not a number from 0 to 1 "
                                     "or None")
                row["score"] = None if score is None else float(score)
            except Exception as exc:   # a scorer's bug is the row's note, not the race's end
                row["score_error"] = f"{type(exc).__name__}: {exc}"
        row.update(race.jury.judge(
            race.ask, label=row["label"], run=run.seat.run, input_=run.seat.input, task=task,
            rubric=self._rubric, reference=seen, candidate=blind.seen(run.seat.transcript.render,
                                                                      masker, run.seat.model),
            diff=diff, difference=masker(tooldiff.describe(diff, self._allow))))
        if race.weights:   # the jury weighted by measured agreement (race.checks)
            row.update(checks.reweigh(row, race.weights))
        if row.get("voided"):
            row["reason"] = row["voided"]

    def _served_ids(self) -> list[str]:
        return KnownRoster(self.roster, self.home).served_ids()

    def _row(self, run: _Run, model: Model, n: int) -> dict:
        seat = run.seat
        costs = [call_cost(model, r.tokens) for r in seat.results]
        priced = [c for c in costs if c is not None]
        tokens_in = sum((r.tokens or {}).get("prompt") or 0 for r in seat.results)
        tokens_out = sum((r.tokens or {}).get("completion") or 0 for r in seat.results)
        error = None if run.succeeded else f"{type(run.exception).__name__}: {run.exception}"
        return {
            "model": model.alias, "input": seat.input, "run": n, "role": seat.role,
            "label": seat.label, "succeeded": run.succeeded,
            "error": error, "model_calls": len(seat.results),
            "tool_calls": len(seat.transcript.tool_calls()),
            "tokens_in": tokens_in, "tokens_out": tokens_out,
            "first_answer": None if seat.first_answer is None
            else round(seat.first_answer - seat.started, 3),
            "wall": round(run.wall, 3),
            "cost": None if not costs or len(priced) < len(costs) else round(sum(priced), 8),
            "currency": model.currency, "score": None, "accuracy": None, "shown_work": None,
            "total": None, "reason": error or "", "judge_error": None, "tool_difference": None,
            "voided": None, "judgements": [],
            "flags": flags.scan(seat.transcript, [as_text(self._inputs[seat.input - 1]),
                                                  self._rubric or "", *seat.transcript.sent()]),
            "output": seat.transcript.output, "transcript": seat.transcript.public(),
        }

    def _report_of(self, race: _Race, grade: str, pinned: Model, candidates: list[Model],
                   references: list[_Run], rows: list[dict], started: float, seconds: float,
                   warnings: list[str]) -> BenchmarkReport:
        earlier = self._earlier
        rows = earlier.rows + earlier.number(rows, race.id)   # every look's runs, in order
        jury.even(rows)   # runs missing a judgement, scored as the runs judged in full are
        models = [summarise(m.alias, [r for r in rows if r["model"] == m.alias], m.currency)
                  for m in candidates] if rows else []
        failed = next((r for r in references if not r.succeeded), None)
        if failed is not None:
            where = f" on input {failed.seat.input}" if len(references) > 1 else ""
            decided = {"model": None, "state": "reference_failed",
                       "why": f"the reference run failed{where} ({failed.row['error']}): there "
                              "is nothing to judge against"}
        else:
            decided = verdict.decide(rows, models, pinned.alias, scored=self._scorer is not None,
                                     margin=self._margin, look=earlier.look)
        return BenchmarkReport(
            race=race.id, grade=grade, pinned=pinned.alias, ceiling=race.jury.judges[0].alias,
            judges=[m.alias for m in race.jury.judges],
            judging=checks.with_people(judging_of(rows, race.jury.public()),
                                       self.home.judge_checks, race.weights),
            warnings=warnings + earlier.warnings,
            job=earlier.job or jobs.key(
                grade, pinned.alias, [as_text(x) for x in self._inputs], None, self._rubric,
                [m.alias for m in candidates], [m.alias for m in race.jury.judges],
                self._orders, self._margin, code=True,
                allow_extra_tools=self._allow, jury_weights=self._jury_weights),
            looks=earlier.looks + [earlier.entry(race.id, self.runs,
                                                                  utc_iso(started), decided)],
            runs=self.runs, started=utc_iso(started), seconds=round(seconds, 3),
            task=as_text(self._inputs[0]), inputs=[as_text(x) for x in self._inputs],
            rubric=self._rubric, candidates=[m.alias for m in candidates],
            allow_extra_tools=list(self._allow) if isinstance(self._allow, tuple)
            else self._allow,
            reference=(failed or references[0]).row, references=[r.row for r in references],
            rows=rows, models=models, verdict=decided, costs=race.costs.public(),
            judge_failures=sum(1 for r in rows if r["succeeded"] and r["accuracy"] is None
                               and not r.get("voided")),
            voided=sum(1 for r in rows if r.get("voided")),
            calls_log=str(race.log.path))

    def _publish(self, report: BenchmarkReport, folder: Path, store) -> None:
        self._report = report
        store.save(folder.name, report.public())
        log.info("race %s\n%s", report.race, report.table())
        self.metadata[self.REPORT] = report
        if self.parent is not None:
            self.parent.metadata[self.REPORT] = report


def _ended_how(landed: JobResult, timeout: float | None = None) -> str:
    if landed.error_kind == "cancelled":
        return "was cancelled"
    return f"did not end within the race's {timeout:g} s" if timeout is not None else \
        "ran out of time"


def _admission(home: Home):
    try:
        from panelist.metrics.upstream.admission import Admission
    except ImportError:   # admission not installed in this build: no limits
        return None
    return Admission.of_home(home)


def _new_race(root: Path) -> tuple[str, Path]:
    """A fresh race id and its folder, made here so no two races share one."""
    root.mkdir(parents=True, exist_ok=True)
    day = time.strftime("%Y%m%d", time.gmtime())
    while True:
        race_id = f"r{day}-{secrets.token_hex(4)}"
        folder = root / race_id
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return race_id, folder


__all__ = ["Benchmark", "BenchmarkReport", "CallFailed", "GradeBook", "Seat", "ToolLoopTooLong",
           "roster_candidates", "tool"]
