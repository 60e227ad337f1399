"""The plain chat job a race can run without code: a system text and a prompt sent to one seat.

``panelist race`` and ``POST /bench/race`` describe a race as a ``ChatSpec`` (grade, one prompt
or a list of inputs, system, rubric, runs, candidates, judges, orders, margin,
allow_extra_tools); ``benchmark``
checks it against the roster and the grades and returns a ``Benchmark`` ready to ``run()`` a
``ChatJob`` per run. The command line may also give the job tools, read from a Python file
(``load_tools``), and its inputs from a JSONL file, one input a line (``load_inputs``).

The tools file convention: a Python file that ends with a ``TOOLS`` list, each item either a
function marked with ``@tool(schema)`` or a ``(function, schema)`` pair, where ``schema`` is the
JSON schema of the function's keyword arguments (or ``{"name", "description", "parameters"}``)::

    from panelist.metrics.race import tool

    @tool({"type": "object", "properties": {"number": {"type": "string"}},
           "required": ["number"]})
    def find_order(number):
        \"\"\"Find an order by its number.\"\"\"
        return {"order_id": "ord-" + number, "status": "shipped"}

    TOOLS = [find_order]

Invariants: a spec is checked whole before anything runs, and every refusal names the field
(``param``) and says what to send instead; a race is refused before it starts when its grade is
on no model, has no pinned model (the reference), or there is no judge (the ceiling model, or
the judges named), when the judges named share a family with each other, a candidate or the
reference, or when it would plan more than ``MAX_PLANNED`` runs (candidates × inputs × runs).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.home import Home
from panelist.metrics.race import checks, jobs, jury, sequential, tooldiff, verdict
from panelist.metrics.race.benchmark import Benchmark, GradeBook, strongest
from panelist.metrics.race.seat import _tools
from panelist.metrics.roster.roster import Roster, RosterView
from panelist.metrics.store import jsonwire, readfile

MAX_RUNS = 100  # runs per candidate and input a request may ask for
# runs per candidate and input when none is asked for: the fewest that measure the spread of a
# difference (two degrees of freedom, ``sequential.SPREAD_UNITS``), so a first race's advice
# rests on a spread it saw rather than one assumed
DEFAULT_RUNS = sequential.SPREAD_UNITS
MAX_CANDIDATES = 50
MAX_INPUTS = 1_000
MAX_PLANNED = 10_000  # candidate runs one race may plan: candidates × inputs × runs
MAX_PROMPT = 1_000_000  # characters of one input; the gateway's body cap bounds it first
MAX_SYSTEM = 200_000
MAX_RUBRIC = 20_000
MAX_JUDGES = 9
FIELDS = (
    "grade",
    "prompt",
    "inputs",
    "system",
    "rubric",
    "runs",
    "candidates",
    "judges",
    "orders",
    "margin",
    "allow_extra_tools",
    "jury_weights",
)

Done = Callable[[str, str, bool], None]  # (alias, role, succeeded) as each run of the job ends
Judged = Callable[[str], None]  # (alias) as each candidate run's judging ends


@dataclass(frozen=True)
class ChatSpec:
    grade: str
    prompt: str
    system: str | None = None
    rubric: str | None = None
    runs: int = DEFAULT_RUNS
    candidates: tuple[str, ...] | None = None  # None: every callable model of the grade
    judges: tuple[str, ...] | None = None  # None: the ceiling model
    orders: str = "both"
    inputs: tuple[str, ...] = ()  # several inputs; () races ``prompt`` alone
    margin: float = verdict.MARGIN
    # extra calls to tools the reference did not call that do not count: True, names or None
    allow_extra_tools: bool | tuple[str, ...] | None = None
    jury_weights: str | None = None  # "agreement": by each judge's judge check

    @property
    def texts(self) -> tuple[str, ...]:
        """Every input the job runs on (``prompt`` alone, or each of ``inputs``)."""
        return self.inputs or (self.prompt,)

    @classmethod
    def parse(cls, body) -> "ChatSpec":
        """A spec from a JSON object (an HTTP body, or the command line's options)."""
        if not isinstance(body, dict):
            raise BadRequest(
                'the body must be a JSON object such as {"grade": "general", "prompt": "..."}'
            )
        if "tools" in body:
            raise BadRequest(
                "tools are not taken over HTTP (they are code); race a tool-using "
                "job with `panelist race --tools tools.py` or the Python API",
                param="tools",
            )
        unknown = sorted(set(body) - set(FIELDS))
        if unknown:
            raise BadRequest(
                f"unknown field(s) {', '.join(unknown)}; send only {', '.join(FIELDS)}",
                param=unknown[0],
            )
        grade = body.get("grade")
        if not isinstance(grade, str) or not grade.strip():
            raise BadRequest(
                "'grade' is required: the grade of model the job needs, e.g. "
                "general (`panelist grade list` shows them)",
                param="grade",
            )
        inputs = _inputs(body)
        prompt = inputs[0] if inputs else body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadRequest(
                "'prompt' is required: the text the job sends the model (or "
                "'inputs', a list of such texts, one job input each)",
                param="prompt",
            )
        if len(prompt) > MAX_PROMPT:
            raise BadRequest(
                f"'prompt' is {len(prompt)} characters, over {MAX_PROMPT}; race a shorter input",
                param="prompt",
            )
        system = _text(body, "system", MAX_SYSTEM)
        rubric = _text(body, "rubric", MAX_RUBRIC)
        runs = body.get("runs", DEFAULT_RUNS)
        if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
            raise BadRequest(
                f"'runs' must be a whole number from 1 to {MAX_RUNS}: how many "
                "times each candidate runs the job on each input",
                param="runs",
            )
        try:
            margin = verdict.check_margin(
                verdict.MARGIN if body.get("margin") is None else body["margin"]
            )
        except ValueError as exc:
            raise BadRequest(f"'margin': {exc}", param="margin") from None
        candidates = body.get("candidates")
        if candidates is not None:
            if (
                not isinstance(candidates, list)
                or not candidates
                or not all(isinstance(a, str) and a.strip() for a in candidates)
            ):
                raise BadRequest(
                    "'candidates' must be a non-empty list of model aliases; leave "
                    "it out to race every model of the grade",
                    param="candidates",
                )
            if len(candidates) > MAX_CANDIDATES:
                raise BadRequest(f"at most {MAX_CANDIDATES} candidates", param="candidates")
            candidates = tuple(dict.fromkeys(a.strip() for a in candidates))
        judges = body.get("judges")
        if judges is not None:
            if (
                not isinstance(judges, list)
                or not judges
                or not all(isinstance(a, str) and a.strip() for a in judges)
            ):
                raise BadRequest(
                    "'judges' must be a non-empty list of model aliases, of "
                    "distinct families; leave it out to have the ceiling model "
                    "judge",
                    param="judges",
                )
            if len(judges) > MAX_JUDGES:
                raise BadRequest(f"at most {MAX_JUDGES} judges", param="judges")
            judges = tuple(dict.fromkeys(a.strip() for a in judges))
        orders = body.get("orders", "both")
        if orders not in jury.ORDERS:
            raise BadRequest(
                f"'orders' must be one of {', '.join(jury.ORDERS)}: both judges "
                "each run with the reference first and with it second, random "
                "once in an order drawn per run",
                param="orders",
            )
        try:
            allow = tooldiff.check_allow(body.get("allow_extra_tools"))
        except ValueError as exc:
            raise BadRequest(str(exc), param="allow_extra_tools") from None
        weights = body.get("jury_weights")
        if weights is not None and weights not in checks.WEIGHTS:
            raise BadRequest(
                "'jury_weights' must be \"agreement\" (each judge counts by its "
                "measured agreement with people, from `panelist judge check`), or "
                "left out for equal weights",
                param="jury_weights",
            )
        return cls(
            grade.strip(),
            prompt,
            system,
            rubric,
            runs,
            candidates,
            judges,
            orders,
            inputs,
            margin,
            allow,
            weights,
        )


def _inputs(body: dict) -> tuple[str, ...]:
    """The body's ``inputs``, checked (``()`` when it sends one ``prompt`` instead)."""
    inputs = body.get("inputs")
    if inputs is None:
        return ()
    if "prompt" in body:
        raise BadRequest(
            "send 'prompt' (one input) or 'inputs' (a list of them), not both", param="inputs"
        )
    if not isinstance(inputs, list) or not inputs:
        raise BadRequest(
            "'inputs' must be a non-empty list of texts, one job input each (or "
            "send a single 'prompt')",
            param="inputs",
        )
    if len(inputs) > MAX_INPUTS:
        raise BadRequest(
            f"'inputs' holds {len(inputs)} inputs, over {MAX_INPUTS}; race a sample of them",
            param="inputs",
        )
    for i, text in enumerate(inputs):
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(
                f"inputs[{i}] must be non-empty text: what the job sends the model", param="inputs"
            )
        if len(text) > MAX_PROMPT:
            raise BadRequest(
                f"inputs[{i}] is {len(text)} characters, over {MAX_PROMPT}; race a shorter input",
                param="inputs",
            )
    return tuple(inputs)


def load_inputs(path: str | Path) -> list[str]:
    """A JSONL file's inputs: each line a JSON string (the text the job sends the model) or an
    object ``{"prompt": "..."}``; blank lines are skipped. A bad line is refused by number."""
    path = Path(path).expanduser()
    lines = readfile.read_text(path, what="JSONL file of inputs", param="inputs").splitlines()
    form = 'each line is a JSON string, the job\'s input, or {"prompt": "..."}'
    inputs = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = jsonwire.loads(line, strict=True)
        except ValueError as exc:
            raise BadRequest(
                f"{path} line {n} is not JSON ({exc}); {form}", param="inputs"
            ) from None
        if isinstance(value, dict) and set(value) == {"prompt"}:
            value = value["prompt"]
        if not isinstance(value, str) or not value.strip():
            raise BadRequest(f"{path} line {n} is not an input: {form}, not empty", param="inputs")
        inputs.append(jsonwire.clean(value))
    if not inputs:
        raise BadRequest(f"{path} holds no input; {form}", param="inputs")
    return inputs


def _text(body: dict, key: str, most: int) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"'{key}' must be text", param=key)
    if len(value) > most:
        raise BadRequest(f"'{key}' is {len(value)} characters, over {most}", param=key)
    return value or None


class ChatJob:
    """System text and prompt to one seat, with the tools given; the answer's text is its
    output. ``done(alias, role, succeeded)`` hears each run end (a race's progress)."""

    def __init__(self, spec: ChatSpec, tools=(), done: Done | None = None):
        self.grade = spec.grade
        self._system = spec.system
        self._tools = list(tools)
        self._done = done

    def run(self, prompt, seat) -> str:
        messages = [{"role": "user", "content": prompt}]
        if self._system:
            messages.insert(0, {"role": "system", "content": self._system})
        succeeded = False
        try:
            answer = seat.chat(messages, tools=self._tools or None)
            succeeded = True
            return answer
        finally:
            if self._done is not None:
                self._done(seat.model.alias, seat.role, succeeded)


@dataclass(frozen=True)
class Plan:
    """Who a race will run: the reference, the judge and the candidates."""

    pinned: str
    ceiling: str  # the (first) judge
    candidates: list[str]
    judges: list[str]
    judged: int = 0  # candidates whose runs the jury may judge (the others' family is barred)


def _alias(model) -> str:
    return getattr(model, "alias", model)


def plan(spec: ChatSpec, view: RosterView, grades: GradeBook) -> Plan:
    """Check a spec against the roster and the grades; refusals say what to do."""
    grade = spec.grade
    used = sorted({m.grade for m in view.models.values() if m.grade})
    if grade not in used:
        raise NotFound(
            f"no model on the roster is of grade '{grade}'; the grades in use are "
            f"{', '.join(used) or 'none'} (give a model a grade with `panelist model "
            f"add ALIAS --endpoint NAME --grade {grade}`)",
            param="grade",
        )
    pinned = grades.pinned(grade)
    of_grade = sorted(a for a, m in view.models.items() if m.grade == grade and not m.retired)
    if pinned is None:
        raise NotFound(
            f"no model is pinned for grade '{grade}', so there is no reference run to "
            f"race against; pin one with `panelist grade pin {grade} ALIAS` (models "
            f"of that grade: {', '.join(of_grade) or 'none callable'})",
            param="grade",
        )
    pinned = getattr(pinned, "alias", pinned)
    if pinned not in view.models:
        raise NotFound(
            f"the model pinned for grade '{grade}' is '{pinned}', which is not on the "
            f"roster; pin another with `panelist grade pin {grade} ALIAS`",
            param="grade",
        )
    if spec.judges is not None:
        unknown = [a for a in spec.judges if a not in view.models]
        if unknown:
            raise NotFound(
                f"unknown judge(s) {', '.join(unknown)}; name models of the roster "
                "(`panelist model list`)",
                param="judges",
            )
        judges = list(spec.judges)
    else:
        ceiling = grades.ceiling()
        ceiling = getattr(ceiling, "alias", ceiling)
        if ceiling is None:
            raise NotFound(
                "there is no ceiling model to judge the runs; set one with "
                "`panelist grade ceiling ALIAS`, pin a model for the strongest "
                "grade, or name judges",
                param="grade",
            )
        if ceiling not in view.models:
            raise NotFound(
                f"the ceiling model (the judge) is '{ceiling}', which is not on the "
                "roster; set another with `panelist grade ceiling ALIAS`",
                param="grade",
            )
        judges = [ceiling]
    if spec.candidates is not None:
        unknown = [a for a in spec.candidates if a not in view.models]
        if unknown:
            raise NotFound(
                f"unknown candidate(s) {', '.join(unknown)}; race models of the "
                f"roster (`panelist model list`), e.g. {', '.join(of_grade) or '…'}",
                param="candidates",
            )
        candidates = list(spec.candidates)
    else:
        candidates = list(grades.candidates(grade))
        if not candidates:
            raise BadRequest(
                f"grade '{grade}' has no callable model to race (every one is "
                "retired, or its endpoint is gone); name 'candidates'",
                param="candidates",
            )
    barred: dict = {}
    if spec.judges is not None:  # refused here, before the race is named
        jury.check(
            [view.models[a] for a in judges],
            [view.models[a] for a in (pinned, *candidates)],
            chosen=True,
        )
    else:  # the judge the race will seat: the ceiling gives way when of a raced model's family
        sides = [view.models[a] for a in (pinned, *map(_alias, candidates)) if a in view.models]
        seated, barred, _ = jury.default_judge(
            view.models[judges[0]], sides, strongest(grades, view)
        )
        judges = [seated.alias]
    planned = len(candidates) * len(spec.texts) * spec.runs
    if planned > MAX_PLANNED:
        raise BadRequest(
            f"{len(candidates)} candidates × {len(spec.texts)} input(s) × "
            f"{spec.runs} runs is {planned} runs, over the {MAX_PLANNED} one race "
            "may plan; race fewer candidates, inputs or runs",
            param="runs",
        )
    judged = sum(
        1
        for a in map(_alias, candidates)
        if a not in view.models or view.models[a].family not in barred
    )
    return Plan(pinned, judges[0], candidates, judges, judged)


def benchmark(
    spec: ChatSpec,
    home: Home,
    *,
    grades: GradeBook | None = None,
    tools=(),
    done: Done | None = None,
    judged: Judged | None = None,
    earlier: jobs.Earlier | None = None,
    **kw,
) -> tuple[Benchmark, Plan]:
    """A ``Benchmark`` of ``ChatJob``s for ``spec``, checked and ready to ``run()``, as a look of
    its job (``earlier``: the job's earlier looks, when it is raced again; refused with 409
    when the job changed since); ``kw`` goes to ``Benchmark`` (upstream, admission,
    timeouts)."""
    roster = Roster(home)
    grades = grades or GradeBook.of_home(home, roster)
    chosen = plan(spec, roster.view(), grades)
    job = jobs.key_of(spec, chosen, list(_tools(tools)))
    if earlier is None:
        earlier = jobs.Earlier(job, warnings=jobs.fresh(home.race_jobs, job))
    jobs.check(earlier, job)
    bench = Benchmark(
        lambda: ChatJob(spec, tools, done), runs=spec.runs, home=home, grades=grades, **kw
    )
    if spec.inputs:
        bench.set_inputs(list(spec.inputs))
    else:
        bench.set_input(spec.prompt)
    bench.set_margin(spec.margin)
    bench.set_looks(earlier)
    bench.set_candidates(chosen.candidates)
    bench.set_orders(spec.orders).on_judged(judged)
    if spec.judges is not None:
        bench.set_judges(list(spec.judges))
    if spec.rubric:
        bench.set_rubric(spec.rubric)
    bench.set_allow_extra_tools(spec.allow_extra_tools)
    if spec.jury_weights:  # refused here, before the race is named, when a judge has no check
        checks.weights(home.judge_checks, chosen.judges, checks.RACE_SHAPE)
        bench.set_jury_weights(spec.jury_weights)
    return bench, chosen


def load_tools(path: str | Path) -> list:
    """The ``TOOLS`` list of a Python file (see the module docstring), checked."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BadRequest(
            f"no tools file {path}; give a Python file that ends with a TOOLS list", param="tools"
        )
    name = "panelist_race_tools_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    loaded = importlib.util.spec_from_file_location(name, path)
    if loaded is None or loaded.loader is None:
        raise BadRequest(
            f"{path} is not a Python file; give a .py file with a TOOLS list", param="tools"
        )
    module = importlib.util.module_from_spec(loaded)
    sys.modules[name] = module  # so dataclasses and pickling inside it find their module
    try:
        loaded.loader.exec_module(module)
    except Exception as exc:  # the user's code: its failure is theirs to read, in one line
        sys.modules.pop(name, None)
        raise BadRequest(
            f"{path} failed to load ({type(exc).__name__}: {exc}); run it with "
            "python to see the traceback",
            param="tools",
        ) from None
    tools = getattr(module, "TOOLS", None)
    if not isinstance(tools, (list, tuple)) or not tools:
        raise BadRequest(
            f"{path} has no TOOLS list; end it with TOOLS = [...] of functions "
            "marked @tool(schema) (from panelist.metrics.race.benchmark import tool) or "
            "(function, schema) pairs",
            param="tools",
        )
    try:
        _tools(tools)  # the race's own reading of the convention, so the rules are one
    except (TypeError, ValueError, KeyError) as exc:
        raise BadRequest(f"{path}: {exc}", param="tools") from None
    return list(tools)
