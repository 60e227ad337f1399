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
from panelist.metrics.race.costs import call_cost

# the grades a race reads, named here too: jobs import them with Benchmark
from panelist.metrics.race.gradebook import GradeBook, roster_candidates, strongest  # noqa: F401
from panelist.metrics.errors import BadRequest, Cancelled, NotFound
from panelist.metrics.home import Home, open_home
from panelist.metrics.store.jsonl import utc_iso
from panelist.metrics.race import verdict
from panelist.metrics.race.report import BenchmarkReport, judging_of, summarise
from panelist.metrics.roster.known import KnownRoster
from panelist.metrics.roster.learned import LearnedFacts
from panelist.metrics.roster.roster import Model, Roster, RosterView
from panelist.metrics.seats import CallFailed, JobResult, SeatJob, Seats
from panelist.metrics.race.seat import RaceInFlight, Seat, ToolLoopTooLong, tool
from panelist.metrics.race.settings import RaceSettings
from panelist.metrics.race.transcript import as_text

log = logging.getLogger("panelist.race")

CALL_TIMEOUT = 120.0  # seconds one model call may take once admitted
RACE_TIMEOUT = 3600.0  # seconds the whole race (waits for admission included) may take
PARALLEL = 32  # runs in flight at once in this process (admission paces the calls)
JUDGES = 4  # judgements in flight at once


@dataclass
class _Run:
    seat: Seat
    output: object = None
    exception: BaseException | None = None
    wall: float = 0.0
    row: dict = field(default_factory=dict)  # filled by Benchmark._row as the run ends

    @property
    def succeeded(self) -> bool:
        return self.exception is None


class Benchmark(RaceSettings):
    """Races a job across its grade, as its settings say (``RaceSettings``); see the module
    docstring."""

    REPORT = "benchmark.report"

    def __init__(
        self,
        factory: Callable[[], object],
        runs: int = 1,
        parent=None,
        *,
        home: Home | str | None = None,
        grades: GradeBook | None = None,
        upstream: Upstream | None = None,
        admission="home",
        call_timeout: float = CALL_TIMEOUT,
        timeout: float = RACE_TIMEOUT,
        parallel: int = PARALLEL,
    ):
        """``factory()`` builds a fresh job per run; each candidate runs it ``runs`` times.
        ``parent``: an object with a ``metadata`` dict that also receives the report.
        ``admission``: ``"home"`` (the data folder's limits), an admission object, or None."""
        if not callable(factory):
            raise TypeError("Benchmark needs a factory: a callable that builds a fresh job")
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ValueError(f"runs must be a whole number of at least 1, not {runs!r}")
        if parent is not None and not isinstance(getattr(parent, "metadata", None), dict):
            raise TypeError("parent must have a 'metadata' dict the report can be set on")
        super().__init__()
        self.factory, self.runs, self.parent = factory, runs, parent
        self.home = home if isinstance(home, Home) else open_home(home)
        self.roster = Roster(self.home)
        self.grades = grades or GradeBook.of_home(self.home, self.roster)
        self.upstream = upstream
        self.admission = _admission(self.home) if admission == "home" else admission
        self.call_timeout, self.timeout, self.parallel = call_timeout, timeout, parallel
        self.metadata: dict = {}
        self._report: BenchmarkReport | None = None
        self._cancel = CancelFlag()
        self._progress = {"runs": 0, "done": 0, "judged": 0}
        self._progress_lock = threading.Lock()
        self._reserved: tuple[str, Path] | None = None

    @classmethod
    def candidates(
        cls, grade: str, *, home: Home | str | None = None, grades: GradeBook | None = None
    ) -> list[str]:
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
            raise BadRequest(
                "call set_input(x) or set_inputs([x, ...]) before run(): the job needs its input"
            )
        job = self.factory()
        grade = getattr(job, "grade", None)
        if not isinstance(grade, str) or not grade:
            raise BadRequest(
                "the job has no 'grade': give its class a grade such as grade = \"general\""
            )
        view = KnownRoster(self.roster, self.home).view()  # catalog prices count for costs
        pinned = self._model(
            view,
            self.grades.pinned(grade),
            f"the model pinned for grade '{grade}'",
            f"pin one with `panelist grade pin {grade} ALIAS`",
        )
        aliases = (
            self._candidates
            if self._candidates is not None
            else list(self.grades.candidates(grade))
        )
        candidates = [
            self._model(view, a, f"candidate '{a}'", "see `panelist model list`") for a in aliases
        ]
        barred: dict[str, str] = {}
        if self._judges is None:
            ceiling = self._model(
                view,
                self.grades.ceiling(),
                "the ceiling model (the judge)",
                "set one with `panelist grade ceiling ALIAS`, or name judges",
            )
            judge, barred, warnings = jury.default_judge(
                ceiling, [pinned, *candidates], strongest(self.grades, view)
            )
            judges = [judge]
            for w in warnings:
                log.warning("race judge: %s", w)
        else:
            judges = [
                self._model(view, a, f"judge '{a}'", "see `panelist model list`")
                for a in self._judges
            ]
            warnings = jury.check(judges, [pinned, *candidates], chosen=True)
        weights = (
            checks.weights(self.home.judge_checks, [m.alias for m in judges], checks.RACE_SHAPE)
            if self._jury_weights
            else None
        )
        with self._progress_lock:
            self._progress = {"runs": 0, "done": 0, "judged": 0}
            reserved, self._reserved = self._reserved, None
        race_id, folder = reserved or _new_race(self.home.races)
        store = race_reports.of_home(self.home)
        try:
            store.named(race_id)  # other hosts on the database list it from now on
            return self._run_named(
                store,
                race_id,
                folder,
                job,
                grade,
                view,
                pinned,
                judges,
                candidates,
                warnings,
                barred,
                weights,
            )
        finally:
            store.close()

    def _run_named(
        self,
        store,
        race_id,
        folder,
        job,
        grade,
        view,
        pinned,
        judges,
        candidates,
        warnings,
        barred=None,
        weights=None,
    ):
        seats = Seats(
            self.roster,
            self.upstream,
            admission=self.admission,
            learn=LearnedFacts(self.home).heard,
            thread_name=f"race-{race_id}",
        )
        race = RaceInFlight(
            race_id,
            folder,
            seats,
            self.call_timeout,
            self.timeout,
            self._cancel,
            len(self._inputs),
            log=store.call_log(race_id, folder / "calls.jsonl"),
        )
        # the seed is the race's own: a rerun of one race's questions gets the same answers
        race.jury = jury.Jury(
            judges,
            folder,
            race_id,
            seed=int(race_id[-8:], 16) & 0x7FFFFFFF,
            orders=self._orders,
            call_timeout=self.call_timeout,
        )
        race.jury.barred = dict(barred or {})  # family -> why its runs are not judged
        race.weights = weights
        started, t0 = time.time(), time.monotonic()
        try:
            references = self._references(race, pinned, job)
            failed = next((r for r in references if not r.succeeded), None)
            rows: list[dict] = []
            if failed is None:
                rows = self._race(race, references, candidates, judges, view)
            report = self._report_of(
                race,
                grade,
                pinned,
                candidates,
                references,
                rows,
                started,
                time.monotonic() - t0,
                warnings,
            )
        finally:
            race.log.close()
            seats.close()
        self._publish(report, folder, store)
        if failed is not None:
            raise failed.exception
        return [r.output for r in references] if self._listed else references[0].output

    def _references(self, race: RaceInFlight, pinned: Model, job) -> list["_Run"]:
        """The reference run of every input: a set of one runs in this thread."""
        units = [
            SeatJob(
                race.label("reference", pinned.alias, i, 0),
                partial(self._one, race, pinned, "reference", 0, i, job if i == 1 else None),
            )
            for i in range(1, len(self._inputs) + 1)
        ]
        landed = race.seats.run(
            units,
            deadline=race.deadline,
            cancel=race.cancel,
            parallel=self.parallel if len(units) > 1 else None,
        )
        return [
            self._run_of(race, one, pinned, "reference", 0, i) for i, one in enumerate(landed, 1)
        ]

    def _model(self, view: RosterView, alias: str | None, what: str, fix: str) -> Model:
        if alias is None:
            raise NotFound(f"there is no {what}; {fix}")
        if hasattr(alias, "alias"):  # a Grades that hands out models rather than aliases
            alias = alias.alias
        model = view.models.get(alias)
        if model is None:
            raise NotFound(f"{what} is '{alias}', which is not on the roster; {fix}")
        return model

    def _one(
        self, race: RaceInFlight, model: Model, role: str, run: int, input_: int, job=None
    ) -> _Run:
        seat = Seat(race, model, role, run, input_)
        out = _Run(seat)
        try:
            if job is None:
                job = self.factory()
            out.output = job.run(self._inputs[input_ - 1], seat)
            seat.transcript.output = as_text(out.output)
        except Exception as exc:  # the job's own failure: a row for a candidate, raised for
            out.exception = exc  # the reference once the report is written
            seat.transcript.error = f"{type(exc).__name__}: {exc}"
        out.wall = time.monotonic() - seat.started
        out.row = self._row(out, model, run)
        return out

    def _race(
        self,
        race: RaceInFlight,
        references: list[_Run],
        candidates: list[Model],
        judges: list[Model],
        view: RosterView,
    ) -> list[dict]:
        """Every candidate run (each input, ``runs`` times) as a job of one set (``parallel``
        at once), each judged, as it lands, against its input's reference by a job of a second
        set (``JUDGES`` at once)."""
        plan = [
            (m, i, n)
            for i in range(1, len(self._inputs) + 1)
            for n in range(1, self.runs + 1)
            for m in candidates
        ]
        with self._progress_lock:
            self._progress["runs"] = len(plan)
        tasks = [as_text(x) for x in self._inputs]
        # every name the deployment knows a model by, on the roster or in the catalog; what an
        # input's job sent (its task, the rubric) is never masked in the runs of that input
        names = blind.Names.of(
            [*view.models.values(), *candidates, *judges],
            view.endpoints.values(),
            self._served_ids(),
        )
        maskers = [
            blind.Masker(names, [task, self._rubric or "", *ref.seat.transcript.sent()])
            for task, ref in zip(tasks, references)
        ]
        seen = [
            blind.seen(ref.seat.transcript.render, masker, ref.seat.model)
            for ref, masker in zip(references, maskers)
        ]
        rows: list[dict] = []
        of = {race.label("candidate", m.alias, i, n): (m, i, n) for m, i, n in plan}
        runs = race.seats.start(
            [
                SeatJob(label, partial(self._one, race, m, "candidate", n, i))
                for label, (m, i, n) in of.items()
            ],
            deadline=race.deadline,
            cancel=race.cancel,
            parallel=self.parallel,
        )
        judging = race.seats.start([], deadline=race.deadline, cancel=race.cancel, parallel=JUDGES)
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
                judging.add(
                    SeatJob(
                        label,
                        partial(
                            self._judge,
                            race,
                            references[i - 1],
                            seen[i - 1],
                            run,
                            maskers[i - 1],
                            tasks[i - 1],
                        ),
                    )
                )
        for result in judging:
            landed = cast(JobResult, result)  # ``judging`` is only ever given SeatJobs
            if landed.exception is not None:  # a fault of the race's own code
                raise landed.exception
            if landed.status != "ok":
                judged_rows[landed.label]["judge_error"] = (
                    f"the run was not judged: the race {_ended_how(landed)}"
                )
            self._count("judged")
            if self._on_judged is not None:
                self._on_judged(judged_rows[landed.label]["model"])
        order = {(m.alias, i, n): k for k, (m, i, n) in enumerate(plan)}
        return sorted(rows, key=lambda r: order[(r["model"], r["input"], r["run"])])

    def _run_of(
        self, race: RaceInFlight, landed: JobResult, model: Model, role: str, n: int, input_: int
    ) -> _Run:
        """The run a job of the core's ended with; a job given up or never begun is a failed
        row that says why."""
        if landed.status == "ok":
            return cast(_Run, landed.value)  # the value of a job of _one's
        if landed.exception is not None:  # ``_one`` keeps the job's own failure: this is ours
            raise landed.exception
        if landed.error_kind == "cancelled" and not landed.begun:
            exception: BaseException = Cancelled(f"the {role} run was cancelled before it began")
        else:
            exception = TimeoutError(
                f"the run {_ended_how(landed, self.timeout)}; its job is "
                "still working (a tool that never returns?)"
            )
        run = _Run(Seat(race, model, role, n, input_), exception=exception)
        run.wall = time.monotonic() - (race.deadline - self.timeout) if landed.begun else 0.0
        run.row = self._row(run, model, n)
        return run

    def _count(self, what: str) -> None:
        with self._progress_lock:
            self._progress[what] += 1

    def _judge(
        self,
        race: RaceInFlight,
        reference: _Run,
        seen: blind.Seen,
        run: _Run,
        masker: blind.Masker,
        task: str,
    ) -> None:
        row = run.row
        barred = race.jury.barred.get(run.seat.model.family)
        if barred:  # no model of another family can judge it: it is never its own judge's
            row.update(judge_error=barred, reason=barred)
            return
        diff = tooldiff.tool_difference(
            reference.seat.transcript.tool_calls(),
            run.seat.transcript.tool_calls(),
            run.seat.transcript.output,
            task,
            self._allow,
        )
        row["tool_difference"] = diff
        if self._scorer is not None:
            try:
                score = self._scorer(reference.output, run.output)
                if score is not None and (
                    isinstance(score, bool)
                    or not isinstance(score, (int, float))
                    or not 0 <= score <= 1
                ):
                    raise ValueError(
                        f"the scorer returned {score!r}, not a number from 0 to 1 or None"
                    )
                row["score"] = None if score is None else float(score)
            except Exception as exc:  # a scorer's bug is the row's note, not the race's end
                row["score_error"] = f"{type(exc).__name__}: {exc}"
        row.update(
            race.jury.judge(
                race.ask,
                label=row["label"],
                run=run.seat.run,
                input_=run.seat.input,
                task=task,
                rubric=self._rubric,
                reference=seen,
                candidate=blind.seen(run.seat.transcript.render, masker, run.seat.model),
                diff=diff,
                difference=masker(tooldiff.describe(diff, self._allow)),
            )
        )
        if race.weights:  # the jury weighted by measured agreement (race.checks)
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
            "model": model.alias,
            "input": seat.input,
            "run": n,
            "role": seat.role,
            "label": seat.label,
            "succeeded": run.succeeded,
            "error": error,
            "model_calls": len(seat.results),
            "tool_calls": len(seat.transcript.tool_calls()),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "first_answer": None
            if seat.first_answer is None
            else round(seat.first_answer - seat.started, 3),
            "wall": round(run.wall, 3),
            "cost": None if not costs or len(priced) < len(costs) else round(sum(priced), 8),
            "currency": model.currency,
            "score": None,
            "accuracy": None,
            "shown_work": None,
            "total": None,
            "reason": error or "",
            "judge_error": None,
            "tool_difference": None,
            "voided": None,
            "judgements": [],
            "flags": flags.scan(
                seat.transcript,
                [
                    as_text(self._inputs[seat.input - 1]),
                    self._rubric or "",
                    *seat.transcript.sent(),
                ],
            ),
            "output": seat.transcript.output,
            "transcript": seat.transcript.public(),
        }

    def _report_of(
        self,
        race: RaceInFlight,
        grade: str,
        pinned: Model,
        candidates: list[Model],
        references: list[_Run],
        rows: list[dict],
        started: float,
        seconds: float,
        warnings: list[str],
    ) -> BenchmarkReport:
        earlier = self._earlier
        rows = earlier.rows + earlier.number(rows, race.id)  # every look's runs, in order
        jury.even(rows)  # runs missing a judgement, scored as the runs judged in full are
        models = (
            [
                summarise(m.alias, [r for r in rows if r["model"] == m.alias], m.currency)
                for m in candidates
            ]
            if rows
            else []
        )
        failed = next((r for r in references if not r.succeeded), None)
        if failed is not None:
            where = f" on input {failed.seat.input}" if len(references) > 1 else ""
            decided = {
                "model": None,
                "state": "reference_failed",
                "why": f"the reference run failed{where} ({failed.row['error']}): there "
                "is nothing to judge against",
            }
        else:
            decided = verdict.decide(
                rows,
                models,
                pinned.alias,
                scored=self._scorer is not None,
                margin=self._margin,
                look=earlier.look,
            )
        return BenchmarkReport(
            race=race.id,
            grade=grade,
            pinned=pinned.alias,
            ceiling=race.jury.judges[0].alias,
            judges=[m.alias for m in race.jury.judges],
            judging=checks.with_people(
                judging_of(rows, race.jury.public()), self.home.judge_checks, race.weights
            ),
            warnings=warnings + earlier.warnings,
            job=earlier.job
            or jobs.key(
                grade,
                pinned.alias,
                [as_text(x) for x in self._inputs],
                None,
                self._rubric,
                [m.alias for m in candidates],
                [m.alias for m in race.jury.judges],
                self._orders,
                self._margin,
                code=True,
                allow_extra_tools=self._allow,
                jury_weights=self._jury_weights,
            ),
            looks=earlier.looks + [earlier.entry(race.id, self.runs, utc_iso(started), decided)],
            runs=self.runs,
            started=utc_iso(started),
            seconds=round(seconds, 3),
            task=as_text(self._inputs[0]),
            inputs=[as_text(x) for x in self._inputs],
            rubric=self._rubric,
            candidates=[m.alias for m in candidates],
            allow_extra_tools=list(self._allow) if isinstance(self._allow, tuple) else self._allow,
            reference=(failed or references[0]).row,
            references=[r.row for r in references],
            rows=rows,
            models=models,
            verdict=decided,
            costs=race.costs.public(),
            judge_failures=sum(
                1 for r in rows if r["succeeded"] and r["accuracy"] is None and not r.get("voided")
            ),
            voided=sum(1 for r in rows if r.get("voided")),
            calls_log=str(race.log.path),
        )

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
    return (
        f"did not end within the race's {timeout:g} s" if timeout is not None else "ran out of time"
    )


def _admission(home: Home):
    try:
        from panelist.metrics.upstream.admission import Admission
    except ImportError:  # admission not installed in this build: no limits
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


__all__ = [
    "Benchmark",
    "BenchmarkReport",
    "CallFailed",
    "GradeBook",
    "Seat",
    "ToolLoopTooLong",
    "roster_candidates",
    "tool",
]
