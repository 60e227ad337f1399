"""A suite run: tasks × models × epochs, each sample one call through the seats core.

Invariants:

* Every call goes through ``metrics.seats`` with the data folder's admission (when the build has
  it), so a run never sends an endpoint more than its limits allow, whatever else runs on the
  data folder; a stated Retry-After pauses the endpoint for everyone.
* Each sample is scored and appended to ``runs/suite/samples.jsonl`` as its call ends (the
  samples file is the run's call log), so Ctrl-C, a crash or a kill loses only calls in flight.
* A rerun skips every sample already done (``results.done_keys``): the same task version,
  model, epoch and parameters. Epochs are numbered from 1, so ``--epochs 5`` after a run of 3
  asks epochs 4 and 5 only.
* The samples are one set of the seats core, asked epoch by epoch, task by task, every model
  in turn, so a run cut short has the same tasks for every model; ``parallel`` per endpoint run
  at once (the core's lanes), so a slow or limited endpoint never holds back another.
* The prompt of a sample depends only on the task, the epoch and its pair's key (see
  ``excerpt``), so a resumed run asks exactly what it would have asked.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import cast

from panelist.metrics.upstream.client import Chats
from panelist.metrics.upstream.transport import CancelFlag
from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.home import Home
from panelist.metrics.ledger import samples as sample_store
from panelist.metrics.roster.learned import LearnedFacts
from panelist.metrics.roster.roster import Endpoint, Model, Roster
from panelist.metrics.seats import SeatCall, SeatResult, Seats
from panelist.suite import prompts, results
from panelist.suite.tasks import Task

PARALLEL = 8  # calls in flight per endpoint in this process (admission paces them)
CALL_TIMEOUT = 180.0  # seconds a model may take once its call is admitted
ADMIT_WAIT = 900.0  # seconds a call may wait for admission before it is left for a rerun
RETRIES = 2  # further attempts after a rate limit, server error or lost connection
TICK = 0.2  # seconds between looks at the progress while calls run
MAX_EPOCHS = 100


@dataclass(frozen=True)
class Sample:
    task: Task
    model: Model
    epoch: int

    @property
    def label(self) -> str:
        return f"{self.task.id}|{self.model.alias}|{self.epoch}"


def admission_of(home: Home):
    """The data folder's admission, or None in a build without it (then nothing is limited
    here, and a rate limit's Retry-After is still honoured call by call)."""
    try:
        from panelist.metrics.upstream.admission import Admission
    except ImportError:
        return None
    return Admission.of_home(home)


def resolve_models(roster: Roster, aliases: list[str] | None) -> list[Model]:
    """The roster's models named by ``aliases``; without any, every model not retired."""
    view = roster.view()
    if not aliases:
        models = [m for m in view.models.values() if not m.retired]
        if not models:
            raise NotFound(
                "the roster has no model to run the suite on; add one with "
                "'panelist model add', or try 'panelist suite run --demo'"
            )
        return sorted(models, key=lambda m: m.alias)
    unknown = [a for a in aliases if a not in view.models]
    if unknown:
        raise NotFound(
            f"model {unknown[0]!r} is not on the roster; use one of: "
            + (", ".join(sorted(view.models)) or "(none: add one with 'panelist model add')")
        )
    return [view.models[a] for a in dict.fromkeys(aliases)]


def check(tasks: list[Task], epochs) -> None:
    """Refuse a run with no task, or epochs out of bounds, before anything is asked."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or not 1 <= epochs <= MAX_EPOCHS:
        raise BadRequest(f"--epochs must be a whole number from 1 to {MAX_EPOCHS}", param="epochs")
    if not tasks:
        raise BadRequest("no task to run; see 'panelist suite list'", param="task")


class SuiteRun:
    """One invocation of the suite over a data folder; ``run()`` it once."""

    def __init__(
        self,
        home: Home,
        tasks: list[Task],
        models: list[Model],
        *,
        epochs: int = 1,
        params: dict | None = None,
        known: dict[str, Task] | None = None,
        upstream: Chats | None = None,
        admission="home",
        parallel: int = PARALLEL,
        call_timeout: float = CALL_TIMEOUT,
        admit_wait: float = ADMIT_WAIT,
        retries: int = RETRIES,
        endpoints: dict[str, Endpoint] | None = None,
    ):
        """``known``: every loaded task by id (a control's excerpt follows its bug's key even
        when only the control runs). ``admission``: ``"home"``, an admission object, or None.
        ``endpoints``: by name, where this run calls instead of the roster's endpoint of that
        name (the demo's scripted answers); never written anywhere."""
        check(tasks, epochs)
        self.home, self.tasks, self.models, self.epochs = home, tasks, models, epochs
        self.params = dict(params or {})
        self.known = dict(known or {}) | {t.id: t for t in tasks}
        self.upstream = upstream
        self.endpoints = dict(endpoints or {})
        self.admission = admission_of(home) if admission == "home" else admission
        self.parallel, self.call_timeout = parallel, call_timeout
        self.admit_wait, self.retries = admit_wait, retries
        self.path = home.suite_samples  # where samples go without a database
        self.run_id = f"s{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(4)}"
        self.cancel = CancelFlag()

    def plan(self) -> tuple[list[Sample], int]:
        """The samples still to ask, in asking order, and how many are already done."""
        with sample_store.of_home(self.home) as store:
            done = results.done_keys(results.read(store))
        pkey = results.params_key(self.params)
        todo, skipped = [], 0
        for epoch in range(1, self.epochs + 1):
            for task in self.tasks:
                for model in self.models:
                    if results.sample_key(task.id, task.hash, model.alias, epoch, pkey) in done:
                        skipped += 1
                    else:
                        todo.append(Sample(task, model, epoch))
        return todo, skipped

    def _calls(self, todo: list[Sample]) -> list[SeatCall]:
        """One call per sample, in asking order; a prompt is made once per task and epoch (every
        model is sent the same)."""
        asked: dict[tuple[str, int], tuple[list, str]] = {}
        pkey = results.params_key(self.params)
        calls = []
        for sample in todo:
            key = (sample.task.id, sample.epoch)
            if key not in asked:
                focus = prompts.focus_of(sample.task, self.known)
                messages = prompts.messages(sample.task, sample.epoch, focus)
                asked[key] = messages, prompts.digest(messages[0]["content"])
            messages, digest = asked[key]
            calls.append(
                SeatCall(
                    label=sample.label,
                    role="suite",
                    model=sample.model,
                    messages=messages,
                    endpoint=self.endpoints.get(sample.model.endpoint),
                    params=self.params,
                    timeout=self.call_timeout,
                    wait=self.admit_wait,
                    retries=self.retries,
                    meta={
                        "run": self.run_id,
                        "task": sample.task.id,
                        "epoch": sample.epoch,
                        "params": self.params,
                        "params_key": pkey,
                        "prompt_hash": digest,
                    },
                )
            )
        return calls

    def run(self, *, progress=None) -> dict:
        """Ask every sample not yet done; returns a summary. ``progress(done, totals)`` (each
        a dict by model alias) is called from this thread while calls run. Ctrl-C (or
        ``stop()``) ends the run early: calls in flight are cut, what finished is kept, and the
        summary says ``interrupted``."""
        todo, skipped = self.plan()
        store = sample_store.of_home(self.home)
        log = results.SampleLog(store, self.known)
        seats = Seats(
            Roster(self.home),
            self.upstream,
            admission=self.admission,
            learn=LearnedFacts(self.home).heard,
            thread_name="suite",
        )
        interrupted = False
        counts: dict[str, int] = {}
        totals: dict[str, int] = {}
        for sample in todo:
            totals[sample.model.alias] = totals.get(sample.model.alias, 0) + 1
        try:
            # each call ends by its own wait and timeout; ``parallel`` per endpoint at once
            asked = seats.start(
                self._calls(todo), cancel=self.cancel, log=log, parallel=self.parallel
            )
            try:
                for result in asked.progress(TICK):
                    if result is not None:
                        # every unit _calls gives is a SeatCall, so every result a SeatResult
                        alias = cast(SeatResult, result).alias
                        counts[alias] = counts.get(alias, 0) + 1
                    if progress is not None:
                        progress(dict(counts), totals)
                    if self.cancel.is_set():
                        raise KeyboardInterrupt
            except KeyboardInterrupt:
                interrupted = True
                self.cancel.set()
                # those in flight are cut and logged; those not begun are neither asked nor logged
                asked.wait()
        finally:
            seats.close()
            log.close()
            store.close()
        written = log.written
        return {
            "run": self.run_id,
            "planned": len(todo),
            "skipped": skipped,
            "asked": len(written),
            "scored": sum(1 for r in written if r["outcome"] == "scored"),
            "failed": sum(1 for r in written if r["outcome"] == "failed"),
            "interrupted": interrupted,
            "samples": store.where,
        }

    def stop(self) -> None:
        """End the run from another thread, as Ctrl-C would."""
        self.cancel.set()


__all__ = ["SuiteRun", "Sample", "check", "resolve_models", "admission_of"]
