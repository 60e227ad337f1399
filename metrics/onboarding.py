"""Onboarding: take models through register → probe → quick suite run → ready, as a queue.

The queue lives in ``runs/onboarding.jsonl``: an append-only log of step transitions, each line
``{"v", "ts", "entry", "alias", ...}``. A ``queued`` line opens an entry (an alias, the endpoint
it was asked for, the quick run's task cap); every later line names one step of it (``register``,
``probe``, ``suite``, ``ready``) and its status (``started``, ``done``, ``skipped``,
``failed``). The queue is rebuilt by folding the log, following its tail.

Invariants:

* Steps run in order and each is idempotent. A step ``started`` but never finished (a kill -9)
  is run again; a finished step is never repeated. A probe whose line reached the evidence log
  before its process died is found there (after the byte offset its ``started`` line kept) and
  not sent again; the suite step keeps the task ids it chose and resumes through ``SuiteRun``,
  which asks only the samples not yet scored.
* Only one process works the queue: it holds an exclusive non-blocking ``flock`` on
  ``runs/onboarding.lock`` while working (a kill -9 releases it), and after letting it go looks
  at the log once more, so an entry enqueued by a process that found the lock held is never
  left behind. Any process may enqueue (one locked append).
* An entry ends ``ready`` (with what the quick suite found) or ``failed`` (the step, the failure
  kind and what to do). A later onboard of an alias whose entry ended opens a new entry; one of
  an alias still in the queue returns the entry already there.
* A server works the queue on one thread (``Service``), woken by an Event: at start (entries
  queued or cut short while it was down) and by each enqueue through the API. Only while another
  process holds the lock does it look again, every ``RETRY`` seconds, in case that one dies.
* What is registered is checked when it is enqueued: an alias already on the roster, or a model
  an endpoint serves outside it (registered as ``panelist discover --add`` does). Anything else
  is refused before it reaches the queue.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
import time
from pathlib import Path

from panelist.metrics import jsonl, jsonwire
from panelist.metrics.alerts import Alerts
from panelist.metrics.errors import BadRequest, NotFound, PanelistError
from panelist.metrics.home import Home
from panelist.metrics.roster import Roster

STEPS = ("register", "probe", "suite", "ready")
ENDED = ("ready", "failed")
FINISHED = ("done", "skipped")
QUICK_TASKS = 6          # tasks in the quick suite run, spread over the starter pack
MAX_TASKS = 100
PROBE_TIMEOUT = 30.0     # seconds the probe may take once admitted (and may wait for admission)
RETRY = 5.0              # seconds the server's worker waits before looking again while another
                         # process holds the lock (it may die; its entries must not be orphaned)
JOIN = 60.0
HINTS = {
    "auth": "the endpoint refused the key: set the endpoint's key (see `panelist endpoint "
            "list`), then run `panelist model onboard {alias}` again",
    "not_found": "the endpoint does not serve that model: check its served id (`panelist model "
                 "list`) or `panelist discover`, then run `panelist model onboard {alias}` again",
    "register": "register it by hand with `panelist model add {alias} --endpoint E`, or pick a "
                "model `panelist discover` lists, then run `panelist model onboard {alias}` again",
}
HINT = ("the endpoint did not answer the probe ({kind}); check that it is up and run "
        "`panelist model onboard {alias}` again")


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def hint(kind: str, alias: str) -> str:
    return HINTS.get(kind, HINT).format(kind=kind, alias=alias)


def spread(tasks: list, n: int) -> list:
    """``n`` of ``tasks`` spread evenly over the list (all of them when there are no more)."""
    if len(tasks) <= n:
        return list(tasks)
    return [tasks[i * len(tasks) // n] for i in range(n)]


class Queue:
    """The onboarding queue of one data folder, folded from its log (``refresh`` to follow)."""

    def __init__(self, home: Home):
        self.home = home
        self.path = Path(home.root) / "runs" / "onboarding.jsonl"
        self.lock_path = self.path.with_name("onboarding.lock")
        self._tail = jsonl.Tail(self.path)
        self._entries: dict[str, dict] = {}
        self._mu = threading.Lock()
        self._appender: jsonl.Appender | None = None

    # -- reading -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        with self._mu:
            for _, rec in self._tail.read():
                self._fold(rec)

    def _fold(self, rec: dict) -> None:
        eid, ts = rec.get("entry"), rec.get("ts")
        if not isinstance(eid, str):
            return
        if rec.get("event") == "queued":
            self._entries[eid] = {
                "id": eid, "alias": rec.get("alias"), "endpoint": rec.get("endpoint"),
                "tasks": rec.get("tasks", QUICK_TASKS), "step": STEPS[0], "status": "queued",
                "queued": ts, "started": None, "updated": ts, "result": None, "error": None,
                "error_kind": None, "hint": None, "steps": {}, "detail": {}}
            return
        entry, step, status = self._entries.get(eid), rec.get("step"), rec.get("status")
        if entry is None or step not in STEPS or entry["status"] in ENDED:
            return
        entry["step"], entry["updated"] = step, ts
        entry["steps"][step] = status
        detail = {k: v for k, v in rec.items()
                  if k not in ("v", "ts", "entry", "alias", "step", "status", "pid")}
        if status == "started":
            entry["status"] = "running"
            entry["started"] = entry["started"] or ts
            entry["detail"].setdefault(step, detail)   # the first start's choices are kept
            return
        entry["detail"][step] = dict(entry["detail"].get(step, {}), **detail)
        if step == "register" and rec.get("endpoint"):
            entry["endpoint"] = rec["endpoint"]
        if status == "failed":
            entry.update(status="failed", error=rec.get("error"),
                         error_kind=rec.get("error_kind"), hint=rec.get("hint"))
        elif step == "ready" and status == "done":
            entry.update(status="ready", result=rec.get("result"))

    def entries(self) -> list[dict]:
        """Every entry, oldest first (copies: the fold goes on)."""
        self.refresh()
        with self._mu:
            return [public(e) for e in self._entries.values()]

    def entry(self, eid: str) -> dict:
        with self._mu:
            return self._entries[eid]

    def pending(self) -> list[str]:
        """Ids of the entries not ended, in the order they were enqueued."""
        self.refresh()
        with self._mu:
            return [e["id"] for e in self._entries.values() if e["status"] not in ENDED]

    def ended(self, eid: str) -> bool:
        with self._mu:
            return self._entries[eid]["status"] in ENDED

    def holder(self) -> dict | None:
        """Who works the queue now, as its lock file says (a dead holder's note is ignored)."""
        try:
            note = jsonwire.loads(self.lock_path.read_bytes() or b"null")
        except (FileNotFoundError, ValueError):
            return None
        if not isinstance(note, dict) or not isinstance(note.get("pid"), int):
            return None
        try:
            os.kill(note["pid"], 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return note

    # -- writing -----------------------------------------------------------------------------------
    def append(self, *records: dict) -> None:
        with self._mu:
            if self._appender is None:
                self._appender = jsonl.Appender(self.path)
        now = _iso(time.time())
        self._appender.append(*({"v": jsonl.SCHEMA, "ts": now, **r} for r in records))
        self.refresh()

    def enqueue(self, upstream, aliases, endpoint: str | None = None, *,
                tasks: int = QUICK_TASKS) -> list[dict]:
        """Check ``aliases`` and put each in the queue (an alias already there keeps its entry);
        returns their entries, each with ``new`` saying whether this call queued it."""
        plan = check(self.home, upstream, aliases, endpoint)
        if isinstance(tasks, bool) or not isinstance(tasks, int) or not 1 <= tasks <= MAX_TASKS:
            raise BadRequest(f"the quick run's task cap must be a whole number from 1 to "
                             f"{MAX_TASKS}")
        self.refresh()
        with self._mu:
            waiting = {e["alias"]: e["id"] for e in self._entries.values()
                       if e["status"] not in ENDED}
        lines, ids = [], []
        for alias, where in plan:
            if alias in waiting:
                ids.append((waiting[alias], False))
                continue
            eid = f"o{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(4)}"
            lines.append({"entry": eid, "alias": alias, "endpoint": where, "event": "queued",
                          "tasks": tasks})
            ids.append((eid, True))
        if lines:
            self.append(*lines)
        with self._mu:
            return [dict(public(self._entries[eid]), new=new) for eid, new in ids]

    def close(self) -> None:
        if self._appender is not None:
            self._appender.close()
            self._appender = None


def public(entry: dict) -> dict:
    """An entry as the API and the CLI show it (``step_status``: where its step stands)."""
    return {**{k: entry[k] for k in ("id", "alias", "endpoint", "step", "status", "queued",
                                     "started", "updated", "result", "error", "error_kind",
                                     "hint")},
            "step_status": entry["steps"].get(entry["step"], "")}


def check(home: Home, upstream, aliases, endpoint: str | None) -> list[tuple[str, str | None]]:
    """``[(alias, endpoint)]`` for models that can be onboarded, or the error saying why not."""
    if not isinstance(aliases, list) or not aliases or not all(
            isinstance(a, str) and a for a in aliases):
        raise BadRequest("name the models to onboard: a list of one or more aliases",
                         param="aliases")
    if len(set(aliases)) != len(aliases):
        raise BadRequest("each model to onboard must be named once", param="aliases")
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint):
        raise BadRequest("the endpoint must be a non-empty name; see `panelist endpoint list`",
                         param="endpoint")
    view = Roster(home).view()
    if endpoint is not None and endpoint not in view.endpoints:
        raise NotFound(f"unknown endpoint '{endpoint}'; see `panelist endpoint list`")
    plan: dict[str, str | None] = {}
    for alias in aliases:
        model = view.models.get(alias)
        if model is None:
            continue
        if endpoint is not None and model.endpoint != endpoint:
            raise BadRequest(f"'{alias}' is on the roster at endpoint {model.endpoint}, not "
                             f"{endpoint}; onboard it without an endpoint", param="endpoint")
        plan[alias] = model.endpoint
    outside = [a for a in aliases if a not in plan]
    if outside:
        from panelist.metrics import discover
        from panelist.metrics.catalog import Catalog
        found = discover.find(Catalog(home), upstream, endpoint)
        unread = "".join(f"; {f['endpoint']} could not be read ({f['error']})"
                         for f in found["failed"])
        for alias in outside:
            rows = [r for r in found["models"] if r["id"] == alias]
            if not rows:
                where = f"endpoint {endpoint}" if endpoint else "any endpoint"
                raise NotFound(f"'{alias}' is neither on the roster nor a model {where} serves "
                               f"outside it{unread}; register it with `panelist model add "
                               f"{alias} --endpoint E`, or onboard a model `panelist discover` "
                               "lists")
            if len(rows) > 1:
                raise BadRequest(f"'{alias}' is served by "
                                 f"{', '.join(r['endpoint'] for r in rows)}; pick one with "
                                 "--endpoint", param="endpoint")
            plan[alias] = rows[0]["endpoint"]
    return [(a, plan[a]) for a in aliases]


class Worker:
    """Works the queue of one data folder while it holds the lock. In a server, give it the
    server's upstream, seats and admission; alone, it makes (and closes) its own."""

    def __init__(self, home: Home, *, upstream=None, seats=None, admission=None,
                 task_roots: list[Path] | None = None, on_step=None):
        self.home = home
        self.queue = Queue(home)
        self.upstream, self.seats, self.admission = upstream, seats, admission
        self.task_roots = task_roots
        self.on_step = on_step          # called with an entry after each of its transitions
        self._stop = threading.Event()
        self._run = None                # the suite run in progress, to stop it
        self._run_lock = threading.Lock()

    # -- the lock ----------------------------------------------------------------------------------
    def work(self) -> bool:
        """Work every entry not ended, until none is left or ``stop``; False when another
        process holds the lock (it works them)."""
        while not self._stop.is_set():
            if not self.queue.pending():   # looked at again after letting the lock go
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
                os.pwrite(fd, jsonwire.dumps({"pid": os.getpid(),
                                              "since": _iso(time.time())}).encode(), 0)
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
        self.queue.append({"entry": eid, "alias": entry["alias"], "step": step,
                           "status": status, "pid": os.getpid(), **detail})
        if self.on_step is not None:
            self.on_step(public(entry) | {"detail": entry["detail"].get(step, {})})

    def _work(self, eid: str) -> None:
        for step in STEPS:
            if self._stop.is_set():
                return
            entry = self.queue.entry(eid)
            if entry["status"] in ENDED:
                return
            if entry["steps"].get(step) in FINISHED:
                continue
            getattr(self, f"_{step}")(eid, entry)
            if self.queue.entry(eid)["steps"].get(step) not in FINISHED:
                return   # failed, or cut short: it is taken up again later

    def _register(self, eid: str, entry: dict) -> None:
        alias = entry["alias"]
        self._mark(eid, "register", "started")
        model = Roster(self.home).view().models.get(alias)
        if model is not None:
            self._mark(eid, "register", "done", endpoint=model.endpoint, how="on the roster")
            return
        from panelist.metrics import discover
        from panelist.metrics.catalog import Catalog
        upstream, own = self._upstream()
        try:
            added = discover.add(Catalog(self.home), upstream, [alias], entry["endpoint"])
        except PanelistError as exc:
            self._mark(eid, "register", "failed", error=exc.message, error_kind="register",
                       hint=hint("register", alias))
            return
        finally:
            if own:
                upstream.close()
        self._mark(eid, "register", "done", endpoint=added[0]["endpoint"], how="discovered")

    def _upstream(self):
        if self.upstream is not None:
            return self.upstream, False
        from panelist.metrics.client import Upstream
        return Upstream(), True

    def _probe(self, eid: str, entry: dict) -> None:
        from panelist.metrics.health import Health
        alias = entry["alias"]
        health = Health(self.home, seats=self.seats) if self.seats is not None else \
            Health(self.home)
        try:
            evidence = Path(health.ledger.evidence_path)
            kept = entry["detail"].get("probe", {}).get("evidence_offset")
            found = self._probed(evidence, alias, kept) if isinstance(kept, int) else None
            if found is None:
                try:
                    offset = os.path.getsize(evidence)
                except FileNotFoundError:
                    offset = 0
                self._mark(eid, "probe", "started", evidence_offset=offset)
                try:
                    probe = health.probe([alias], timeout=PROBE_TIMEOUT,
                                         wait=PROBE_TIMEOUT)[0]
                except PanelistError as exc:   # removed from the roster meanwhile
                    self._mark(eid, "probe", "failed", error=exc.message, error_kind="not_found",
                               hint=hint("register", alias))
                    return
                found = {"status": probe.status, "seconds": probe.seconds,
                         "error_kind": probe.error_kind, "error": probe.error}
        finally:
            health.close()
        if found["status"] == "ok":
            self._mark(eid, "probe", "done", seconds=found["seconds"])
            return
        kind = found.get("error_kind") or found["status"]
        self._mark(eid, "probe", "failed", error=(found.get("error") or kind)[:500],
                   error_kind=kind, hint=hint(kind, alias))

    @staticmethod
    def _probed(evidence: Path, alias: str, offset: int) -> dict | None:
        """The probe line for ``alias`` a killed worker logged after ``offset``, if any."""
        for _, rec in jsonl.Tail(evidence, offset).read():
            if rec.get("kind") == "probe" and rec.get("alias") == alias:
                return rec
        return None

    def _tasks(self):
        from panelist.suite import tasks
        roots = self.task_roots if self.task_roots is not None else tasks.roots(self.home)
        found, _ = tasks.scan(*roots)   # a broken task folder is `panelist suite list`'s news
        return found

    def _suite(self, eid: str, entry: dict) -> None:
        from panelist.suite.runner import SuiteRun
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
        if isinstance(kept, list):   # cut short before: SuiteRun asks only what is left
            self._mark(eid, "suite", "started", resumed=True)
        else:
            self._mark(eid, "suite", "started", tasks=[t.id for t in chosen])
        model = Roster(self.home).view().models.get(alias)
        if model is None:
            self._mark(eid, "suite", "failed", error=f"'{alias}' left the roster",
                       error_kind="not_found", hint=hint("register", alias))
            return
        admission = self.admission
        if admission is None:
            from panelist.suite.runner import admission_of
            admission = admission_of(self.home)
        try:
            run = SuiteRun(self.home, chosen, [model], epochs=1, known=known,
                           upstream=self.upstream, admission=admission)
            with self._run_lock:
                if self._stop.is_set():
                    return
                self._run = run
            summary = run.run()
        finally:
            with self._run_lock:
                self._run = None
            if self.admission is None and admission is not None:
                admission.close()
        if summary["interrupted"]:
            if not self._stop.is_set():
                raise KeyboardInterrupt   # Ctrl-C reached the run: the step resumes later
            return
        self._mark(eid, "suite", "done", **figures(self.home, alias, chosen))

    def _ready(self, eid: str, entry: dict) -> None:
        alias = entry["alias"]
        suite = entry["detail"].get("suite", {})
        if entry["steps"].get("suite") == "skipped":
            result = {"suite": "skipped", "why": suite.get("why", "")}
            said = f"{alias} is onboarded: it answered a probe (no suite tasks to run)"
        else:
            result = {k: suite.get(k) for k in ("tasks", "scored", "right", "accuracy",
                                                "unparseable", "unfinished")}
            said = f"{alias} is onboarded: it answered a probe; " + describe(result)
        alerts = Alerts(self.home)
        try:
            if not any(a.get("kind") == "onboarded" and a.get("entry") == eid
                       for a in alerts.recent(200)):
                alerts.raise_alert("onboarded", alias, said, entry=eid, **{
                    k: v for k, v in result.items() if k in ("accuracy", "unparseable")})
        finally:
            alerts.close()
        self._mark(eid, "ready", "done", result=result)

    def close(self) -> None:
        self.queue.close()


def figures(home: Home, alias: str, tasks: list) -> dict:
    """What the quick run found for ``alias`` on ``tasks`` (epoch 1, default parameters)."""
    from panelist.suite import results
    ids = {t.id for t in tasks}
    pkey = results.params_key({})
    rows = [s for s in results.latest(
        [s for s in results.read(results.samples_path(home))
         if s.get("model") == alias and s.get("task") in ids and s.get("epoch") == 1
         and s.get("params_key") == pkey])]
    right = sum(1 for s in rows if s.get("right"))
    answered = [s for s in rows if not s.get("failure")]
    unreadable = sum(1 for s in answered if s.get("flag"))
    return {"tasks": len(ids), "scored": len(rows), "right": right,
            "accuracy": round(right / len(rows), 4) if rows else None,
            "unparseable": round(unreadable / len(answered), 4) if answered else None,
            "unfinished": len(ids) - len(rows)}


def describe(result: dict) -> str:
    """One line of what the quick suite found."""
    def pct(x):
        return "n/a" if x is None else f"{x * 100:.0f}%"
    said = (f"suite accuracy {pct(result.get('accuracy'))} ({result.get('right', 0)}/"
            f"{result.get('scored', 0)}), unparseable {pct(result.get('unparseable'))}")
    if result.get("unparseable") == 1:
        said += " (no answer could be read: check the model follows the task's answer form)"
    if result.get("unfinished"):
        said += (f"; {result['unfinished']} task(s) not scored yet: `panelist suite run "
                 "--model ...` asks them")
    return said


class Service:
    """The server's worker: a thread working the queue when woken (at start, and by each
    enqueue through the API); ``close`` stops and joins it."""

    def __init__(self, panels):
        self.worker = Worker(panels.home, upstream=panels.upstream, seats=panels.seats,
                             admission=panels.admission)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def start(self) -> "Service":
        """Start the thread, once; a service already closed stays stopped."""
        with self._starting:
            if self._thread is None and not self._stop.is_set():
                self._wake.set()   # entries queued or cut short before the server started
                self._thread = threading.Thread(target=self._loop, name="onboarding",
                                                daemon=True)
                self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                break
            self._wake.clear()   # before the pass: a wake during it asks for another
            try:
                worked = self.worker.work()
            except Exception:   # noqa: BLE001 - the worker must outlive one bad entry
                import traceback
                traceback.print_exc()
                worked = True   # the next wake tries again; no loop on the same fault
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


def attach(panels) -> Service:
    """The onboarding worker of a server's data folder, kept on ``panels`` so the API can wake
    it; the server starts it when it serves."""
    panels.onboarding = Service(panels)
    return panels.onboarding


def queue_of(panels) -> Queue:
    """The queue the server's worker follows (so a request never refolds the log), or a
    fresh one for a server without a worker."""
    found = getattr(panels, "onboarding", None)
    return found.worker.queue if found is not None else Queue(panels.home)


def wake(panels) -> None:
    found = getattr(panels, "onboarding", None)
    if found is not None:
        found.wake()
