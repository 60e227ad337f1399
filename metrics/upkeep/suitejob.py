"""A suite run as a person asks for one (``SuiteJob``): which tasks, which models, how many
epochs, on the data folder's models or the demo's scripted ones; and the one a server runs in
the background for its dashboard (``SuiteRuns``). ``panelist suite run`` and ``POST
/api/suite/run`` both go through ``SuiteJob``, so they pick, refuse and ask the same way.

Invariants:

* A job is checked whole when it is made (tasks found, models on the roster, epochs in bounds)
  and refuses before anything is asked; a task asked for by name that does not load is refused
  with why, while broken folders are otherwise only listed (``skipped``).
* ``--demo`` answers come from a simulator of the job's own, reached through an endpoint that
  lives in the job only; the data folder's demo endpoint is never rewired (``upkeep.demohost``).
  ``run`` stops that simulator and lets go of the demo, however it ends.
* ``SuiteRuns`` runs one job at a time per server; another is refused (409 ``suite_running``)
  while one runs. Its state (``get``) holds, per model, the samples asked so far out of those
  planned, and once it ended the run's summary (or why it failed). ``close`` stops the running
  job (what finished is kept in the samples file, as after Ctrl-C) and joins its thread.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable

from panelist.metrics.errors import Conflict, Unavailable
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store.jsonl import utc_iso
from panelist.suite import demo as demo_tasks
from panelist.suite import taskfiles, tasks
from panelist.suite.runner import MAX_EPOCHS, SuiteRun, check, resolve_models

JOIN = 60.0   # seconds ``close`` waits for a stopped run to log what was in flight

__all__ = ["SuiteJob", "SuiteRuns", "MAX_EPOCHS"]


def _simulator(models):
    from panelist.metrics.upstream.sim import SimUpstream
    return SimUpstream(models)


class SuiteJob:
    """One suite run, checked and ready; ``run`` it once."""

    def __init__(self, home: Home, *, models: list[str] | None = None,
                 task_ids: list[str] | None = None, epochs: int = 1, demo: bool = False,
                 repos=None, simulator: Callable | None = None):
        """``models``: roster aliases (default: every model not retired; the demo's four with
        ``demo``); ``task_ids``: the tasks to ask (default: every task but drafts); ``repos``:
        folders a task's ``repo`` may lie in; ``simulator(models)``: an unstarted simulated
        upstream for the demo's scripted answers."""
        self.home, self.epochs, self.demo = home, epochs, demo
        self._simulator = simulator or _simulator
        found, problems = tasks.scan(*tasks.roots(home), repos=taskfiles.repositories(repos))
        self.known = {t.id: t for t in found}
        for p in problems:
            if p.folder.name in (task_ids or ()) and p.folder.name not in self.known:
                raise p   # a task asked for by name that cannot run: say why, not "unknown"
        self.skipped = [] if task_ids else [p.message for p in problems]
        self.tasks = tasks.select(found, task_ids)
        check(self.tasks, epochs)
        self.aliases = list(dict.fromkeys(models or ())) or \
            (list(demo_tasks.MODELS) if demo else [])
        if not demo:
            self.models = resolve_models(Roster(home), self.aliases)
        self._run: SuiteRun | None = None
        self._stopped = False
        self._lock = threading.Lock()

    def run(self, progress=None) -> dict:
        """Ask every sample not yet done (``SuiteRun.run``); its summary."""
        host = scripted = None
        endpoints = {}
        aliases = self.aliases
        try:
            if self.demo:
                from panelist.metrics.roster import demo as demo_roster
                from panelist.metrics.upkeep.demohost import DemoHost
                # the demo roster as any demo process finds it (a running demo server's
                # simulator is left serving its URL); the scripted answers come from this
                # job's own simulator, reached through an endpoint of this job only
                host = DemoHost(self.home, watch=False)
                host.start()
                scripted = self._simulator(demo_tasks.behaviours(list(self.known.values()),
                                                                 self.known)).start()
                listed = Roster(self.home).view().endpoints[demo_roster.ENDPOINT]
                endpoints = {listed.name: replace(listed, base_url=scripted.url)}
                self.models = resolve_models(Roster(self.home), aliases)
            with self._lock:
                self._run = SuiteRun(self.home, self.tasks, self.models, epochs=self.epochs,
                                     known=self.known, endpoints=endpoints)
                if self._stopped:
                    self._run.stop()
            return self._run.run(progress=progress)
        finally:
            if scripted is not None:
                scripted.stop()
            if host is not None:
                host.close()

    def stop(self) -> None:
        """End the run from another thread, as Ctrl-C would (also before it began)."""
        with self._lock:
            self._stopped = True
            if self._run is not None:
                self._run.stop()


class SuiteRuns:
    """The suite run a server runs for its dashboard, one at a time, and the last one's state."""

    def __init__(self, home: Home):
        self.home = home
        self._state: dict | None = None
        self._job: SuiteJob | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    def start(self, *, models=None, task_ids=None, epochs: int = 1, demo: bool = False) -> dict:
        """Check the job and run it on a thread of its own; the state ``get`` gives."""
        with self._lock:
            self._refuse_if_busy()
            self._state = {"status": "starting"}   # holds the place while the job is checked
        try:
            job = SuiteJob(self.home, models=models, task_ids=task_ids, epochs=epochs,
                           demo=demo)
        except BaseException:
            with self._lock:
                self._state = None
            raise
        state = {"status": "running", "started": utc_iso(time.time()), "demo": demo,
                 "models": job.aliases if demo else [m.alias for m in job.models],
                 "tasks": [t.id for t in job.tasks], "epochs": epochs,
                 "skipped": job.skipped, "done": {}, "totals": {}, "summary": None,
                 "error": None}
        thread = threading.Thread(target=self._work, args=(job, state), daemon=True,
                                  name="suite-run")
        with self._lock:
            self._state, self._job, self._thread = state, job, thread
            if self._closed:
                state.update(status="cancelled", error="the server stopped before the run began")
                return self.get()
            thread.start()
        return self.get()

    def _refuse_if_busy(self) -> None:
        if self._closed:
            raise Unavailable("the server is stopping; run the suite again once it is back")
        if self._state is not None and self._state["status"] in ("starting", "running"):
            raise Conflict("a suite run is under way; watch it on Evidence, or start another "
                           "once it has ended", code="suite_running")

    def _work(self, job: SuiteJob, state: dict) -> None:
        def progress(done: dict, totals: dict) -> None:
            with self._lock:
                state["done"], state["totals"] = dict(done), dict(totals)

        try:
            summary = job.run(progress=progress)
        except Exception as exc:   # a refusal met once the demo was up, or the run broke
            with self._lock:
                state.update(status="failed", error=str(exc) or type(exc).__name__)
            return
        with self._lock:
            state.update(summary=summary, status="interrupted" if summary["interrupted"]
                         else "done")

    def get(self) -> dict:
        """The running or last run's state; ``status`` ``none`` when none ran here."""
        with self._lock:
            if self._state is None or self._state["status"] == "starting":
                return {"status": "none"}
            state = dict(self._state)
            state["done"], state["totals"] = dict(state["done"]), dict(state["totals"])
        totals = state["totals"]
        state["progress"] = {"done": sum(state["done"].values()),
                             "planned": sum(totals.values()) if totals else None}
        return state

    def close(self, timeout: float = JOIN) -> None:
        with self._lock:
            self._closed = True
            job, thread = self._job, self._thread
        if job is not None:
            job.stop()
        if thread is not None and thread.ident is not None:
            thread.join(timeout)
