"""The onboarding worker: works the queue of ``onboarding.py`` step by step.

Invariants:

* Steps run in order and each is idempotent. A step ``started`` but never finished (a kill -9,
  a stop) is taken up again; a finished step is never repeated.
* Nothing is sent twice: every probe and quick-run prompt is recorded in the queue log before it
  goes out and after it ends (``onboarding_calls``), and a step taken up again sends none of
  what it sent before. A probe sent before is read back (its evidence line, after the byte
  offset its ``started`` line kept, else its outcome in the queue log); one whose outcome is
  unknown ends the entry ``failed``, kind ``interrupted``: a new probe is the user's call
  (onboard it again). The suite step keeps the task ids it chose, asks through ``SuiteRun``
  only those it never sent a prompt for (and not yet scored), and reports as ``interrupted``
  the tasks whose prompts were sent but never answered (``suite run`` asks them).
* Only one process works the queue: it holds an exclusive non-blocking ``flock`` on
  ``runs/onboarding.lock`` while working (a kill -9 releases it), and after letting it go looks
  at the log once more, so an entry enqueued by a process that found the lock held is never
  left behind.
* A server works the queue on one thread (``Service``), woken by an Event: when it starts
  serving (entries queued or cut short while it was down) and by each enqueue through the API.
  Only while another process holds the lock does it look again, every ``RETRY`` seconds, in case
  that one dies.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING

from panelist.metrics.store import jsonl, jsonwire
from panelist.metrics.alerts import Alerts
from panelist.metrics.errors import PanelistError
from panelist.metrics.home import Home
from panelist.metrics.seats import Seats
from panelist.metrics.upkeep import onboarding_calls
from panelist.metrics.upkeep.onboarding_calls import PROBE, SUITE, Asking
from panelist.metrics.upkeep.onboarding_queue import (
    ENDED,
    FINISHED,
    STEPS,
    Queue,
    describe,
    hint,
    public,
    spread,
)
from panelist.metrics.roster.roster import Roster

if TYPE_CHECKING:  # the suite is imported when a suite step runs
    from panelist.suite.runner import SuiteRun

PROBE_TIMEOUT = 30.0  # seconds the probe may take once admitted (and may wait for admission)
RETRY = 5.0  # seconds the server's worker waits before looking again while another
# process holds the lock (it may die; its entries must not be orphaned)
JOIN = 60.0


class Worker:
    """Works the queue of one data folder while it holds the lock. In a server, give it the
    server's upstream, admission and ledger; alone, it makes (and closes) its own. Its calls go
    through seats of its own, each over an ``Asking`` upstream that records it."""

    def __init__(
        self,
        home: Home,
        *,
        upstream=None,
        admission=None,
        ledger=None,
        task_roots: list[Path] | None = None,
        on_step=None,
    ):
        self.home = home
        self.queue = Queue(home)
        self.upstream, self.admission = upstream, admission
        self.ledger = ledger  # the server's, so a probe does not load the index again
        self.task_roots = task_roots
        self.on_step = on_step  # called with an entry after each of its transitions
        self._stop = threading.Event()
        self._run: SuiteRun | None = None  # the suite run in progress, to stop it
        self._run_lock = threading.Lock()

    # -- the lock ----------------------------------------------------------------------------------
    def work(self) -> bool:
        """Work every entry not ended, until none is left or ``stop``; False when another
        process holds the lock (it works them)."""
        while not self._stop.is_set():
            if not self.queue.pending():  # looked at again after letting the lock go
                return True
            if not self._pass():
                return False
        return True

    def _pass(self) -> bool:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                os.ftruncate(fd, 0)
                os.pwrite(
                    fd,
                    jsonwire.dumps(
                        {"pid": os.getpid(), "since": jsonl.utc_second(time.time())}
                    ).encode(),
                    0,
                )
                while not self._stop.is_set():
                    pending = self.queue.pending()
                    if not pending:
                        break
                    self._work(pending[0])
            finally:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        finally:
            os.close(fd)

    @property
    def lock_path(self) -> Path:
        return self.queue.lock_path

    def stop(self) -> None:
        """End the work soon: a suite run in progress is cut (its step resumes later)."""
        self._stop.set()
        with self._run_lock:
            if self._run is not None:
                self._run.stop()

    # -- one entry ---------------------------------------------------------------------------------
    def _mark(self, eid: str, step: str, status: str, **detail) -> None:
        entry = self.queue.entry(eid)
        self.queue.append(
            {
                "entry": eid,
                "alias": entry["alias"],
                "step": step,
                "status": status,
                "pid": os.getpid(),
                **detail,
            }
        )
        if self.on_step is not None:
            self.on_step(public(entry) | {"detail": entry["detail"].get(step, {})})

    def _steps(self) -> dict:
        """Each step of ``STEPS`` by name, and the method that runs it (a step added there
        without one here fails every entry's work at once, not halfway)."""
        steps = {
            "register": self._register,
            "probe": self._probe,
            "suite": self._suite,
            "ready": self._ready,
        }
        if set(steps) != set(STEPS):
            raise RuntimeError(
                f"the onboarding steps {STEPS} and their methods {tuple(steps)} differ"
            )
        return steps

    def _work(self, eid: str) -> None:
        steps = self._steps()
        for step in STEPS:
            if self._stop.is_set():
                return
            entry = self.queue.entry(eid)
            if entry["status"] in ENDED:
                return
            if entry["steps"].get(step) in FINISHED:
                continue
            steps[step](eid, entry)
            if self.queue.entry(eid)["steps"].get(step) not in FINISHED:
                return  # failed, or cut short: it is taken up again later

    def _register(self, eid: str, entry: dict) -> None:
        alias = entry["alias"]
        self._mark(eid, "register", "started")
        models = Roster(self.home).view().models
        model = models.get(alias) or next(  # registered before a kill -9, under its own alias
            (m for m in models.values() if m.served == alias and m.endpoint == entry["endpoint"]),
            None,
        )
        if model is not None:
            self._mark(
                eid,
                "register",
                "done",
                endpoint=model.endpoint,
                how="on the roster",
                registered_as=model.alias,
            )
            return
        from panelist.metrics.roster import discover
        from panelist.metrics.roster.catalog import Catalog

        upstream, own = self._upstream()
        try:
            added = discover.add(Catalog(self.home), upstream, [alias], entry["endpoint"])
        except PanelistError as exc:
            self._mark(
                eid,
                "register",
                "failed",
                error=exc.message,
                error_kind="register",
                hint=hint("register", alias),
            )
            return
        finally:
            if own:
                upstream.close()
        self._mark(
            eid,
            "register",
            "done",
            endpoint=added[0]["endpoint"],
            how="discovered",
            registered_as=added[0]["alias"],
        )

    def _upstream(self):
        if self.upstream is not None:
            return self.upstream, False
        from panelist.metrics.upstream.client import Upstream

        return Upstream(), True

    def _admission(self):
        """The server's admission, or one of this worker's own (closed by ``_let_go``)."""
        if self.admission is not None:
            return self.admission
        from panelist.suite.runner import admission_of

        return admission_of(self.home)

    def _let_go(self, admission, upstream, own_upstream: bool) -> None:
        if admission is not None and admission is not self.admission:
            admission.close()
        if own_upstream:
            upstream.close()

    def _probe(self, eid: str, entry: dict) -> None:
        from panelist.metrics.upkeep.health import Health

        alias = entry["alias"]
        upstream, own = self._upstream()
        admission = self._admission()
        # the probe leaves only through Asking: its intent is on disk before it is sent
        seats = Seats(
            Roster(self.home),
            Asking(upstream, self.queue, eid, alias, PROBE),
            admission=admission,
            thread_name="probe",
        )
        health = Health(self.home, seats=seats, ledger=self.ledger)
        try:
            found = self._probed(eid, alias, health.ledger)
            if found is None:
                offset = health.ledger.evidence_end()[1]
                self._mark(eid, "probe", "started", evidence_offset=offset)
                try:
                    probes = health.probe(
                        [alias], timeout=PROBE_TIMEOUT, wait=PROBE_TIMEOUT, cancel=self._stop
                    )
                except PanelistError as exc:  # removed from the roster meanwhile
                    self._mark(
                        eid,
                        "probe",
                        "failed",
                        error=exc.message,
                        error_kind="not_found",
                        hint=hint("register", alias),
                    )
                    return
                if not probes:
                    return  # cut by a stop: the step is taken up again at the next start
                probe = probes[0]
                found = {
                    "status": probe.status,
                    "seconds": probe.seconds,
                    "error_kind": probe.error_kind,
                    "error": probe.error,
                }
        finally:
            health.close()
            seats.close()
            self._let_go(admission, upstream, own)
        if found["status"] == "ok":
            self._mark(eid, "probe", "done", seconds=found["seconds"])
            return
        kind = found.get("error_kind") or found["status"]
        self._mark(
            eid,
            "probe",
            "failed",
            error=(found.get("error") or kind)[:500],
            error_kind=kind,
            hint=hint(kind, alias),
        )

    def _probed(self, eid: str, alias: str, ledger) -> dict | None:
        """How the probe a start of this step sent before ended, or None when none was sent.

        Its evidence line (a killed worker's, after the byte offset its ``started`` line kept)
        says it all; else its outcome in the queue log; a probe with no outcome read (in flight
        at a kill -9, or cut by a stop) is never sent again: it reads as ``interrupted``."""
        entry = self.queue.entry(eid)
        kept = entry["detail"].get("probe", {}).get("evidence_offset")
        if isinstance(kept, int):
            for _, rec in ledger.evidence_after(kept).read():
                if rec.get("kind") == "probe" and rec.get("alias") == alias:
                    return rec
        onboarding_calls.settle(self.queue, eid)
        sent = onboarding_calls.of(self.queue.entry(eid), PROBE)
        if not sent:
            return None
        last = sent[-1]
        if onboarding_calls.cut(last):
            return {
                "status": "error",
                "error_kind": "interrupted",
                "error": "the probe was sent as the process working the queue stopped, so "
                "its outcome is unknown, and onboarding never sends a probe twice",
            }
        if last["outcome"] == "answered":
            return {"status": "ok", "seconds": last.get("seconds") or 0.0}
        kind = last.get("error_kind") or "error"
        return {
            "status": "error",
            "error_kind": kind,
            "error": f"the probe failed ({kind}); its process stopped before logging it",
        }

    def _tasks(self):
        from panelist.suite import tasks

        roots = self.task_roots if self.task_roots is not None else tasks.roots(self.home)
        found, _ = tasks.scan(*roots)  # a broken task folder is `panelist suite list`'s news
        return found

    def _suite(self, eid: str, entry: dict) -> None:
        alias = entry["alias"]
        found = self._tasks()
        known = {t.id: t for t in found}
        kept = entry["detail"].get("suite", {}).get("tasks")
        if isinstance(kept, list):
            chosen = [known[i] for i in kept if i in known]
        else:
            chosen = spread([t for t in found if not t.draft], entry["tasks"])
        if not chosen:
            self._mark(eid, "suite", "skipped", why="no suite tasks were found")
            return
        if isinstance(kept, list):
            # cut short before: nothing it sent is sent again, and SuiteRun asks only what is
            # left of the rest (what is not scored yet)
            onboarding_calls.settle(self.queue, eid)
            self._mark(eid, "suite", "started", resumed=True)
        else:
            self._mark(eid, "suite", "started", tasks=[t.id for t in chosen])
        model = Roster(self.home).view().models.get(alias)
        if model is None:
            self._mark(
                eid,
                "suite",
                "failed",
                error=f"'{alias}' left the roster",
                error_kind="not_found",
                hint=hint("register", alias),
            )
            return
        sent = onboarding_calls.sent_tasks(self.queue.entry(eid), [t.id for t in chosen])
        todo = [t for t in chosen if t.id not in sent]
        if todo and not self._run_suite(eid, alias, model, todo, known):
            return  # cut short: the step resumes later
        self._mark(
            eid,
            "suite",
            "done",
            **figures(self.home, alias, chosen, onboarding_calls.cut_tasks(self.queue.entry(eid))),
        )

    def _run_suite(self, eid: str, alias: str, model, todo: list, known: dict) -> bool:
        """Ask ``todo`` of ``model``, each prompt through Asking; False when cut short."""
        from panelist.suite.runner import SuiteRun

        upstream, own = self._upstream()
        admission = self._admission()
        asking = Asking(
            upstream,
            self.queue,
            eid,
            alias,
            SUITE,
            tasks_of=onboarding_calls.prompt_tasks(todo, known),
        )
        try:
            run = SuiteRun(
                self.home,
                todo,
                [model],
                epochs=1,
                known=known,
                upstream=asking,
                admission=admission,
            )
            with self._run_lock:
                if self._stop.is_set():
                    return False
                self._run = run
            summary = run.run()
        finally:
            with self._run_lock:
                self._run = None
            self._let_go(admission, upstream, own)
        if summary["interrupted"]:
            if not self._stop.is_set():
                raise KeyboardInterrupt  # Ctrl-C reached the run: the step resumes later
            return False
        return True

    def _ready(self, eid: str, entry: dict) -> None:
        alias = entry["alias"]
        suite = entry["detail"].get("suite", {})
        if entry["steps"].get("suite") == "skipped":
            result = {"suite": "skipped", "why": suite.get("why", "")}
            said = f"{alias} is onboarded: it answered a probe (no suite tasks to run)"
        else:
            result = {
                k: suite.get(k)
                for k in (
                    "tasks",
                    "scored",
                    "right",
                    "accuracy",
                    "unparseable",
                    "unfinished",
                    "interrupted",
                )
            }
            said = f"{alias} is onboarded: it answered a probe; " + describe(result)
        alerts = Alerts(self.home)
        try:
            if not any(
                a.get("kind") == "onboarded" and a.get("entry") == eid for a in alerts.recent(200)
            ):
                alerts.raise_alert(
                    "onboarded",
                    alias,
                    said,
                    entry=eid,
                    **{k: v for k, v in result.items() if k in ("accuracy", "unparseable")},
                )
        finally:
            alerts.close()
        self._mark(eid, "ready", "done", result=result)

    def close(self) -> None:
        self.queue.close()


def figures(home: Home, alias: str, tasks: list, cut: AbstractSet[str] = frozenset()) -> dict:
    """What the quick run found for ``alias`` on ``tasks`` (epoch 1, default parameters);
    ``interrupted``: of the tasks not scored, those whose prompts ``cut`` names (sent, their
    answer never read)."""
    from panelist.metrics.ledger import samples as sample_store
    from panelist.suite import results

    ids = {t.id for t in tasks}
    pkey = results.params_key({})
    with sample_store.of_home(home) as store:
        found = results.read(store)
    rows = [
        s
        for s in results.latest(
            [
                s
                for s in found
                if s.get("alias") == alias
                and s.get("task") in ids
                and s.get("epoch") == 1
                and s.get("params_key") == pkey
            ]
        )
    ]
    right = sum(1 for s in rows if s.get("right"))
    answered = [s for s in rows if not s.get("failure")]
    unreadable = sum(1 for s in answered if s.get("flag"))
    return {
        "tasks": len(ids),
        "scored": len(rows),
        "right": right,
        "accuracy": round(right / len(rows), 4) if rows else None,
        "unparseable": round(unreadable / len(answered), 4) if answered else None,
        "unfinished": len(ids) - len(rows),
        "interrupted": len((set(cut) & ids) - {s.get("task") for s in rows}),
    }


class Service:
    """The server's worker: a thread working the queue when woken (at start, and by each
    enqueue through the API); ``close`` stops and joins it."""

    def __init__(self, panels):
        self.worker = Worker(
            panels.home, upstream=panels.upstream, admission=panels.admission, ledger=panels.ledger
        )
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def start(self) -> "Service":
        """Start the thread, once; a service already closed stays stopped."""
        with self._starting:
            if self._thread is None and not self._stop.is_set():
                self._wake.set()  # entries queued or cut short before the server started
                self._thread = threading.Thread(target=self._loop, name="onboarding", daemon=True)
                self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                break
            self._wake.clear()  # before the pass: a wake during it asks for another
            try:
                worked = self.worker.work()
            except Exception:  # noqa: BLE001 - the worker must outlive one bad entry
                import traceback

                traceback.print_exc()
                worked = True  # the next wake tries again; no loop on the same fault
            if not worked and not self._stop.is_set():
                # another process works the queue; if it dies, its entries are ours to finish
                self._wake.wait(RETRY)
                self._wake.set()

    def close(self, timeout: float = JOIN) -> None:
        self._stop.set()
        self.worker.stop()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.worker.close()
