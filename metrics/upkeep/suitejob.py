"""A suite run as a person asks for one (``SuiteJob``): which tasks, which models, how many
epochs, on the data folder's models or the demo's scripted ones; and the one a server runs in
the background for its dashboard (``SuiteRuns``). ``panelist suite run`` and ``POST
/api/suite/run`` both go through ``SuiteJob``, so they pick, refuse and ask the same way.

Invariants:

* A job is checked whole when it is made (tasks found, models on the roster, epochs in bounds)
  and refuses before anything is asked; a task asked for by name that does not load is refused
  with why, while broken folders are otherwise only listed (``skipped``), and a bug task
  asked without its control is warned about (``notices``).
* ``--demo`` answers come from a simulator of the job's own, reached through an endpoint that
  lives in the job only; the data folder's demo endpoint is never rewired (``upkeep.demohost``).
  ``run`` stops that simulator and lets go of the demo, however it ends.
* A job says before it runs how many upstream calls it makes (``calls``): one a sample
  (tasks × models × epochs; fewer when samples of an earlier run are kept), each tried at most
  ``RETRIES`` times more and corrected once to a stated output cap (``at_most``). ``SuiteRuns``
  hands that count to its caller's ``admit`` before anything runs, and states it (``calls``).
* ``SuiteRuns`` runs one job at a time per data folder: the process running one holds an
  exclusive ``flock`` on ``runs/suite/dashboard-run.lock`` (the kernel drops it however the
  process ends), and another start, in any process, is refused (409 ``suite_running``). The
  state (``get``) is written atomically to ``runs/suite/dashboard-run.json`` as the run goes
  (at most every ``WRITE_EVERY`` seconds, and when it ends), so every worker answers the same:
  per model, the samples asked so far out of those planned, and once it ended the run's summary
  (or why it failed); a run left ``running`` whose owner is gone reads ``interrupted``.
  ``close`` stops the running job (what finished is kept in the samples file, as after Ctrl-C)
  and joins its thread.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

from panelist.metrics.errors import ConfigInvalid, Conflict, Unavailable
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import Roster
from panelist.metrics.store import configfile, flock
from panelist.metrics.store.jsonl import SCHEMA, utc_iso
from panelist.suite import demo as demo_tasks
from panelist.suite import taskfiles, tasks
from panelist.suite.runner import MAX_EPOCHS, RETRIES, SuiteRun, check, resolve_models

JOIN = 60.0  # seconds ``close`` waits for a stopped run to log what was in flight
WRITE_EVERY = 0.5  # seconds between writes of a running run's state

__all__ = ["SuiteJob", "SuiteRuns", "MAX_EPOCHS"]


@dataclass(frozen=True)
class SuiteCalls:
    """The upstream calls a suite run makes: ``planned`` (one a sample, each answered at once)
    and ``at_most`` (every retry and correction used)."""

    planned: int
    at_most: int

    def public(self) -> dict:
        return {"planned": self.planned, "at_most": self.at_most}


def _simulator(models):
    from panelist.metrics.upstream.sim import SimUpstream

    return SimUpstream(models)


class SuiteJob:
    """One suite run, checked and ready; ``run`` it once."""

    def __init__(
        self,
        home: Home,
        *,
        models: list[str] | None = None,
        task_ids: list[str] | None = None,
        epochs: int = 1,
        demo: bool = False,
        repos=None,
        task_roots=None,
        simulator: Callable | None = None,
    ):
        """``models``: roster aliases (default: every model not retired; the demo's five with
        ``demo``); ``task_ids``: the tasks to ask (default: every task but drafts); ``repos``:
        folders a task's ``repo`` may lie in; ``task_roots``: folders of task folders to read
        instead of the starter pack and the data folder's (``tasks.given_roots``);
        ``simulator(models)``: an unstarted simulated upstream for the demo's scripted
        answers."""
        self.home, self.epochs, self.demo = home, epochs, demo
        self._simulator = simulator or _simulator
        roots = tasks.given_roots(task_roots) or tasks.roots(home)
        found, problems = tasks.scan(*roots, repos=taskfiles.repositories(repos))
        self.known = {t.id: t for t in found}
        for p in problems:
            if p.folder.name in (task_ids or ()) and p.folder.name not in self.known:
                raise p  # a task asked for by name that cannot run: say why, not "unknown"
        self.skipped = [] if task_ids else [p.message for p in problems]
        self.tasks = tasks.select(found, task_ids)
        chosen = {t.id for t in self.tasks}
        # a half of a pair left out of this run is not a warning: the report pairs what was asked
        self.notices = [n for n in tasks.notices(found) if n["task"] in chosen]
        check(self.tasks, epochs)
        self.aliases = list(dict.fromkeys(models or ())) or (
            list(demo_tasks.MODELS) if demo else []
        )
        if not demo:
            self.models = resolve_models(Roster(home), self.aliases)
        self._run: SuiteRun | None = None
        self._stopped = False
        self._lock = threading.Lock()

    def calls(self) -> SuiteCalls:
        """The upstream calls this job makes if no sample of it is kept from an earlier run."""
        models = len(self.aliases) if self.demo else len(self.models)
        planned = len(self.tasks) * models * self.epochs
        return SuiteCalls(planned, planned * (1 + RETRIES + 1))

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
                scripted = self._simulator(
                    demo_tasks.behaviours(list(self.known.values()), self.known)
                ).start()
                listed = Roster(self.home).view().endpoints[demo_roster.ENDPOINT]
                endpoints = {listed.name: replace(listed, base_url=scripted.url)}
                self.models = resolve_models(Roster(self.home), aliases)
            with self._lock:
                self._run = SuiteRun(
                    self.home,
                    self.tasks,
                    self.models,
                    epochs=self.epochs,
                    known=self.known,
                    endpoints=endpoints,
                )
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
    """The suite run a server runs for its dashboard, one at a time per data folder, and the
    last one's state, as every process on the data folder reads it."""

    def __init__(self, home: Home):
        self.home = home
        self.path = home.suite_run_state  # the state, for every process on the data folder
        self._owner_path = home.suite_run_state.with_suffix(".lock")
        self._owner_fd: int | None = None  # its flock held while a run of ours is under way
        self._state: dict | None = None
        self._job: SuiteJob | None = None
        self._thread: threading.Thread | None = None
        self._written = 0.0
        self._closed = False
        self._lock = threading.Lock()

    def start(
        self, *, models=None, task_ids=None, epochs: int = 1, demo: bool = False, admit=None
    ) -> dict:
        """Check the job and run it on a thread of its own; the state ``get`` gives, with the
        calls it makes (``calls``). ``admit(calls)``, when given, judges that count before
        anything runs; what it raises refuses the run."""
        with self._lock:
            if self._closed:
                raise Unavailable("the server is stopping; run the suite again once it is back")
            if self._owner_fd is not None or not self._own():
                raise Conflict(
                    "a suite run is under way; watch it on Evidence, or start "
                    "another once it has ended",
                    code="suite_running",
                )
        try:
            job = SuiteJob(self.home, models=models, task_ids=task_ids, epochs=epochs, demo=demo)
            if admit is not None:
                admit(job.calls())
        except BaseException:
            with self._lock:
                self._let_go()
            raise
        state = {
            "status": "running",
            "started": utc_iso(time.time()),
            "demo": demo,
            "models": job.aliases if demo else [m.alias for m in job.models],
            "tasks": [t.id for t in job.tasks],
            "epochs": epochs,
            "skipped": job.skipped,
            "warnings": job.notices,
            "done": {},
            "totals": {},
            "calls": job.calls().public(),
            "summary": None,
            "error": None,
        }
        thread = threading.Thread(
            target=self._work, args=(job, state), daemon=True, name="suite-run"
        )
        with self._lock:
            self._state, self._job, self._thread = state, job, thread
            self._write(state)
            if self._closed:
                state.update(status="cancelled", error="the server stopped before the run began")
                self._write(state)
                self._let_go()
            else:
                thread.start()
        return self.get()

    def _own(self) -> bool:
        """Take the data folder's suite-run lock without waiting; False when another process
        (another worker) runs one."""
        self._owner_fd = flock.try_hold(self._owner_path)
        return self._owner_fd is not None

    def _let_go(self) -> None:
        if self._owner_fd is not None:
            os.close(self._owner_fd)  # closing drops the flock
            self._owner_fd = None

    def _write(self, state: dict) -> None:
        self._written = time.monotonic()
        configfile.write_atomic(self.path, dict(state, v=SCHEMA))

    def _work(self, job: SuiteJob, state: dict) -> None:
        def progress(done: dict, totals: dict) -> None:
            with self._lock:
                state["done"], state["totals"] = dict(done), dict(totals)
                if time.monotonic() - self._written >= WRITE_EVERY:
                    self._write(state)

        try:
            summary = job.run(progress=progress)
        except Exception as exc:  # a refusal met once the demo was up, or the run broke
            with self._lock:
                state.update(status="failed", error=str(exc) or type(exc).__name__)
                self._write(state)
                self._let_go()
            return
        with self._lock:
            state.update(
                summary=summary, status="interrupted" if summary["interrupted"] else "done"
            )
            self._write(state)
            self._let_go()

    def get(self) -> dict:
        """The running or last run's state, whichever process runs it; ``status`` ``none``
        when none ran on this data folder."""
        with self._lock:
            current = self._state
            mine = current is not None and current["status"] == "running"
            state = dict(current) if current is not None and mine else None
        if state is None:
            state = self._stored()
            # its owner writes its last state before letting go of the lock, so a run seen
            # running whose lock is free is read once more: it may have ended in between
            if state and state.get("status") == "running" and self._unowned():
                state = self._stored()
                if state and state.get("status") == "running":
                    state.update(
                        status="interrupted",
                        error="the process running it stopped "
                        "before it ended; every finished sample is kept, and a new "
                        "run asks what is left",
                    )
            if not state or "status" not in state:
                return {"status": "none"}
        state["done"] = dict(state.get("done") or {})
        state["totals"] = totals = dict(state.get("totals") or {})
        state["progress"] = {
            "done": sum(state["done"].values()),
            "planned": sum(totals.values()) if totals else None,
        }
        return state

    def _stored(self) -> dict | None:
        """The run's state as its owner last wrote it, or None."""
        try:
            state = configfile.read(self.path) if self.path.exists() else None
        except ConfigInvalid:
            return None
        if state:
            state.pop("v", None)
        return state

    def _unowned(self) -> bool:
        """Whether no process holds the suite-run lock (its owner is gone)."""
        with self._lock:
            if self._owner_fd is not None:
                return False
            if not self._own():
                return False
            self._let_go()
            return True

    def close(self, timeout: float = JOIN) -> None:
        with self._lock:
            self._closed = True
            job, thread = self._job, self._thread
        if job is not None:
            job.stop()
        if thread is not None and thread.ident is not None:
            thread.join(timeout)
