"""The races a server runs in the background, and every race its data folder holds.

``POST /bench/race`` hands a ``ChatSpec`` to ``Races.start``, which checks it, names the race and
runs it on a thread of its own; ``get`` gives a race's progress and, once it ended, its report;
``listing`` lists races newest first. A race that ended is read from ``runs/races/<id>.json``
(from the ``race_reports`` table when the data folder names a database: ``race.reports``), so
what a server shows survives its restart, and races run by ``panelist race`` or by another host
on the same database show too.

Invariants:

* At most ``max_running`` races run at once in one registry; one more is refused (429) before
  anything is named or asked. A refused spec names no race and leaves no folder.
* One job runs once at a time: a race of the same grade, inputs, system text and rubric as a
  race still running is refused (409 ``race_running``, naming that race when it runs here), so
  a second click or a retried request never doubles the calls. Across processes on one data
  folder (workers) the running race holds an exclusive ``flock`` on
  ``runs/race-jobs/<digest of the job>.lock``, taken once the spec is checked and before the
  race is named, and dropped when its report is written.
* A race that ended may be raced again (``again``): its job's next look, named only when the
  race is its job's latest look (the job's record, read again under the job's lock), holding
  every earlier look's runs (``metrics.race.jobs``).
* ``close`` refuses new races, cancels the running ones (calls waiting or in flight end as
  cancelled, each race still writes its report) and joins their threads; it always returns.
* A race id is only ever looked up on disk once it matches ``RACE_ID``, and a kept judge prompt
  once its name matches ``PROMPT``, so a request cannot name a path outside ``runs/races``. A
  gateway key limited to collections may neither start nor read races (``admit``); any other
  caller sees every race.
* Statuses: ``running``; ``done`` (the reference answered and the race ended); ``failed`` (the
  reference failed, or the race could not start; ``error`` says why); ``cancelled`` (this server
  stopped it); ``unfinished`` (a folder without a report: running in another process, or its
  process stopped first); ``unreadable`` (its report cannot be read).
* A listing entry has the same keys whatever the status; ``get`` adds ``report`` (None until
  the race ended), the report exactly as ``Benchmark.report().public()`` gives it.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass, field

from panelist.metrics.race import callcount, chatjob, jobs
from panelist.metrics.race import reports as race_reports
from panelist.metrics.store import flock, jsonwire
from panelist.metrics.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    TooManyRequests,
    Unavailable,
)
from panelist.metrics.home import Home
from panelist.metrics.store.jsonl import utc_iso
from panelist.metrics.race.benchmark import Benchmark, GradeBook

RACE_ID = re.compile(r"r\d{8}-[0-9a-f]{8}")
PROMPT = re.compile(r"\d{5,9}\.json")  # a judge's question kept in a race's judge/ folder
MAX_RUNNING = 4  # races one server runs at once (each runs up to 32 calls at once)
KEEP = 200  # races that ended in this process whose status is kept in memory
JOIN = 60.0  # seconds ``close`` waits for a cancelled race to write its report
PAGE, MAX_PAGE = 50, 200


# -- progress --------------------------------------------------------------------------------------
def _counts(runs: int) -> dict:
    return {"runs": runs, "done": 0, "failed": 0, "judged": 0}


class Tracker:
    """Per-model progress of one race: runs ended (the job says so as each ends) and runs
    judged (the race says so as each run's judging ends: judged, void or failed)."""

    def __init__(self, runs: int, references: int = 1):
        """``runs``: each model's runs (runs per input × inputs); ``references``: one per
        input, and the reference is ``done`` once every one has ended, ``failed`` once one
        failed."""
        self.runs = runs
        self.reference = "running"
        self._references, self._ended = references, 0
        self.models: dict[str, dict] = {}
        self._lock = threading.Lock()

    def expect(self, candidates: list[str]) -> None:
        with self._lock:
            for alias in candidates:
                self.models.setdefault(alias, _counts(self.runs))

    def done(self, alias: str, role: str, succeeded: bool) -> None:
        with self._lock:
            if role == "reference":
                self._ended += 1
                if not succeeded:
                    self.reference = "failed"
                elif self.reference != "failed" and self._ended >= self._references:
                    self.reference = "done"
                return
            counts = self.models.setdefault(alias, _counts(self.runs))
            counts["done"] += 1
            counts["failed"] += not succeeded

    def judged(self, alias: str) -> None:
        with self._lock:
            self.models.setdefault(alias, _counts(self.runs))["judged"] += 1

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "reference": self.reference,
                "models": {a: dict(c) for a, c in self.models.items()},
            }


def progress_of(report: dict) -> dict:
    """The progress a finished race reached, from its report (its own runs: a race of a job
    raced again also holds the earlier looks' rows)."""
    models = {a: _counts(0) for a in report.get("candidates") or ()}
    mine = [
        r
        for r in report.get("rows") or ()
        if r.get("race", report.get("race")) == report.get("race")
    ]
    for row in mine:
        counts = models.setdefault(row.get("model"), _counts(0))
        counts["runs"] += 1
        counts["done"] += 1
        counts["failed"] += not row.get("succeeded")
        counts["judged"] += (
            row.get("total") is not None or bool(row.get("judge_error")) or bool(row.get("voided"))
        )
    rows = mine
    return {
        "runs": len(rows),
        "done": len(rows),
        "judged": sum(c["judged"] for c in models.values()),
        "reference": "done" if (report.get("reference") or {}).get("succeeded") else "failed",
        "models": models,
    }


# -- the registry ----------------------------------------------------------------------------------
@dataclass
class _Entry:
    race: str
    spec: chatjob.ChatSpec
    plan: chatjob.Plan
    bench: Benchmark | None
    tracker: Tracker
    started: float
    thread: threading.Thread | None = None
    status: str = "running"
    error: str | None = None
    cancelled: bool = False
    job_lock: int | None = None  # the fd whose flock says this job is being raced
    look: int = 1  # which look of its job the race is
    t0: float = field(default_factory=time.monotonic)


class Races:
    """The races of one data folder, as one server runs and reads them."""

    def __init__(
        self,
        home: Home,
        *,
        upstream=None,
        grades: GradeBook | None = None,
        admission="home",
        max_running: int = MAX_RUNNING,
        **bench,
    ):
        """``grades``: the grade book to race by (default: the data folder's, read at each
        start); ``admission`` and ``bench`` (timeouts) go to every ``Benchmark``."""
        self.home, self.upstream, self.grades = home, upstream, grades
        self.admission, self.max_running, self._bench = admission, max_running, bench
        self.folder = home.races
        self.reports = race_reports.of_home(home)  # in the database, when there is one
        self.jobs = home.race_jobs
        self._entries: dict[str, _Entry] = {}
        self._summaries: dict[str, tuple[tuple, dict]] = {}  # race -> (report's stat, summary)
        self._starting = 0
        self._pending: list[tuple] = []  # the jobs of races being prepared
        self._closed = False
        self._lock = threading.Lock()

    # -- starting and stopping -----------------------------------------------------------------
    def start(self, body, admit=None) -> dict:
        """Check ``body`` (a ``ChatSpec``), name the race and run it in the background; the
        race as ``get`` gives it, with ``calls``: the upstream calls it plans and may make at
        most (``callcount``). ``admit(calls)``, when given, judges that count before the race
        is named; what it raises refuses the race."""
        return self._launch(chatjob.ChatSpec.parse(body), admit=admit)

    def again(self, race: str, body=None, admit=None) -> dict:
        """Race ``race``'s job again as its next look (``metrics.race.jobs``): the same job,
        ``body``'s ``runs`` more runs (default: as many as that race ran), judged with every
        earlier look's runs. 404 for an unknown race; 409 while it runs, when it is not its
        job's latest look, when its job's looks are spent or when the job changed."""
        summary = self._summary(race)
        if summary is None:
            raise jobs.missing(race)
        if summary["status"] in ("running", "unfinished"):
            raise Conflict(
                f"race {race} has not ended ({summary['status']}); race it again once it has",
                code="race_running",
            )
        report = self._report(race)
        if report is None:
            raise Conflict(
                f"the report of race {race} cannot be read, so its runs cannot be "
                "carried on; start a new race of the job",
                code="not_a_job",
            )
        earlier = jobs.after(report)
        jobs.latest_check(self.jobs, report)
        assert earlier.job is not None  # after() refuses a report that kept no job
        body = jobs.body_of(earlier.job, body)
        body.setdefault("runs", report.get("runs") or chatjob.DEFAULT_RUNS)
        return self._launch(chatjob.ChatSpec.parse(body), earlier, admit=admit)

    def _launch(
        self, spec: chatjob.ChatSpec, earlier: jobs.Earlier | None = None, admit=None
    ) -> dict:
        with self._lock:
            if self._closed:
                raise Unavailable("the server is stopping; start the race again once it is back")
            running = self._starting + sum(e.status == "running" for e in self._entries.values())
            if running >= self.max_running:
                raise TooManyRequests(
                    f"{running} races are running, the most this server runs at once; start "
                    "this one when one of them has ended (GET /bench/races)",
                    code="too_many_races",
                    headers={"Retry-After": "30"},
                )
            job = _job(spec)
            same = next(
                (
                    e.race
                    for e in self._entries.values()
                    if e.status == "running" and _job(e.spec) == job
                ),
                None,
            )
            if same is not None or job in self._pending:
                raise Conflict(
                    f"this job is already being raced{f' as {same}' if same else ''}"
                    "; watch it there, or start it again once it has ended",
                    code="race_running",
                    param="prompt",
                )
            self._pending.append(job)
            self._starting += 1
        try:
            tracker = Tracker(spec.runs * len(spec.texts), len(spec.texts))
            bench, plan = chatjob.benchmark(
                spec,
                self.home,
                grades=self.grades,
                upstream=self.upstream,
                admission=self.admission,
                done=tracker.done,
                judged=tracker.judged,
                earlier=earlier,
                **self._bench,
            )
            calls = callcount.of_race(spec, plan)
            if admit is not None:
                admit(calls)  # the cap and the key's limit, before the race is named
            held = self._hold_job(job)
            try:
                if earlier is not None:  # under the job's lock: no other look began meanwhile
                    jobs.latest_check(
                        self.jobs, {"race": earlier.looks[-1]["race"], "job": earlier.job}
                    )
                race = bench.reserve()
                jobs.note(self.jobs, bench.earlier, race)
            except BaseException:
                os.close(held)
                raise
            tracker.expect(plan.candidates)
            entry = _Entry(
                race,
                spec,
                plan,
                bench,
                tracker,
                time.time(),
                job_lock=held,
                look=bench.earlier.look,
            )
            entry.thread = threading.Thread(
                target=self._run, args=(entry,), daemon=True, name=f"race-{race}"
            )
            with self._lock:
                self._entries[race] = entry
                if self._closed:  # closed while this one was being prepared: never start it
                    entry.status, entry.cancelled = "cancelled", True
                    entry.error = "the server stopped before the race began"
                    entry.bench = None
                    _let_go(entry)
                else:
                    entry.thread.start()
        finally:
            with self._lock:
                self._starting -= 1
                self._pending.remove(job)
        return dict(self.get(race), calls=calls.public())

    def _run(self, entry: _Entry) -> None:
        status, error = "done", None
        try:
            assert entry.bench is not None  # the thread is started only with its bench
            entry.bench.run()
        except Exception as exc:  # the reference's own failure, or the race could not run
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        with self._lock:
            entry.status = "cancelled" if entry.cancelled else status
            entry.error = (
                error
                if not entry.cancelled
                else "the server stopped; the report holds what had ended"
            )
            entry.bench = None  # the report is on disk now; the runs' memory can go
            _let_go(entry)
            ended = [e for e in self._entries.values() if e.status != "running"]
            for old in ended[: max(0, len(ended) - KEEP)]:
                del self._entries[old.race]

    def _hold_job(self, job: tuple) -> int:
        """Take the data folder's lock of ``job`` without waiting (the fd holding it): another
        process on the data folder (a worker, ``panelist race`` through a server) racing the
        same job holds it, and this race is refused."""
        digest = hashlib.sha256(jsonwire.dumps(list(job)).encode()).hexdigest()[:24]
        fd = flock.try_hold(self.jobs / f"{digest}.lock")
        if fd is None:
            raise Conflict(
                "this job is already being raced by another process on this data "
                "folder; watch it on the Races page, or start it again once it has "
                "ended",
                code="race_running",
                param="prompt",
            )
        return fd

    def close(self, timeout: float = JOIN) -> None:
        """Refuse new races, cancel the running ones and join their threads."""
        with self._lock:
            self._closed = True
            running = [e for e in self._entries.values() if e.status == "running"]
            for entry in running:
                entry.cancelled = True
                if entry.bench is not None:
                    entry.bench.cancel()
        end = time.monotonic() + timeout
        for entry in running:
            if entry.thread is not None and entry.thread.ident is not None:
                entry.thread.join(max(0.0, end - time.monotonic()))
        self.reports.close()

    def running(self) -> int:
        with self._lock:
            return sum(e.status == "running" for e in self._entries.values())

    # -- reading -------------------------------------------------------------------------------
    def get(self, race: str) -> dict:
        """One race: its progress and, once it ended, its report."""
        summary = self._summary(race)
        if summary is None:
            raise NotFound(f"unknown race '{race}'; GET /bench/races lists the races")
        report = None
        if summary["status"] not in ("running", "unfinished", "unreadable"):
            report = self._report(race)
        return dict(summary, report=report)

    def listing(self, limit=None, before: str | None = None) -> dict:
        """Races newest first, ``limit`` of them (after the race ``before``, when given)."""
        limit = _page(limit)
        races = set(self._on_disk())
        with self._lock:
            races |= set(self._entries)
        found = [s for s in map(self._summary, races) if s is not None]
        found.sort(key=lambda s: (s["started"] or "", s["race"]), reverse=True)
        if before:
            ids = [s["race"] for s in found]
            if before not in ids:
                raise BadRequest(
                    f"'before' must be a race id this list gave (such as "
                    f"{ids[0] if ids else 'r20260101-0a1b2c3d'})",
                    param="before",
                )
            found = found[ids.index(before) + 1 :]
        page = found[:limit]
        return {
            "data": page,
            "next": page[-1]["race"] if len(found) > limit else None,
            "running": self.running(),
            "max_running": self.max_running,
        }

    def prompt(self, race: str, name: str) -> dict:
        """One judge question a race kept (``judge/<name>``, as its report links it) with its
        answer."""
        name = name.removeprefix("judge/")
        if not isinstance(race, str) or not RACE_ID.fullmatch(race) or not PROMPT.fullmatch(name):
            raise NotFound(
                f"unknown judge prompt {race}/judge/{name}; a race report's "
                "judgements name their prompts (judge/00001.json)"
            )
        try:
            record = jsonwire.loads((self.folder / race / "judge" / name).read_bytes())
        except FileNotFoundError:
            raise NotFound(
                f"race {race} kept no judge prompt {name} here; its report's "
                "judgements name the ones it kept, and they stay in the data folder "
                "of the host that ran the race"
            ) from None
        except (OSError, ValueError) as exc:
            raise NotFound(f"the judge prompt {race}/judge/{name} cannot be read ({exc})") from None
        return record

    def _on_disk(self) -> list[str]:
        return [n for n in self.reports.ids() if RACE_ID.fullmatch(n)]

    def _summary(self, race: str) -> dict | None:
        if not isinstance(race, str) or not RACE_ID.fullmatch(race):
            return None
        with self._lock:
            entry = self._entries.get(race)
            if entry is not None and entry.status == "running":
                return self._live(entry)
        summary = self._stored(race)
        if entry is not None:  # what only this process knows: cancelled, or never began
            if summary is None or summary["status"] == "unfinished":
                summary = self._live(entry)
            summary = dict(summary, status=entry.status, error=entry.error or summary["error"])
        return summary

    def _live(self, entry: _Entry) -> dict:
        spec, plan = entry.spec, entry.plan
        bench = entry.bench
        counts = bench.progress() if bench is not None else {"done": 0, "judged": 0}
        seen = entry.tracker.snapshot()
        return {
            "race": entry.race,
            "status": entry.status,
            "grade": spec.grade,
            "pinned": plan.pinned,
            "ceiling": plan.ceiling,
            "judges": list(plan.judges),
            "runs": spec.runs,
            "look": entry.look,
            "candidates": list(plan.candidates),
            "started": utc_iso(entry.started),
            "seconds": round(time.monotonic() - entry.t0, 3),
            "progress": {
                "runs": len(plan.candidates) * spec.runs * len(spec.texts),
                "done": counts["done"],
                "judged": counts["judged"],
                **seen,
            },
            "verdict": None,
            "judge_failures": None,
            "voided": None,
            "voids_to_confirm": [],
            "error": entry.error,
        }

    def _stored(self, race: str) -> dict | None:
        """A race's summary from its report (cached while the report is unchanged), from its
        trace alone (unfinished), or None when nothing knows of it."""
        found = self.reports.stored(race)
        if found is None:
            return None
        stamp, doc, started = found
        if doc is None:
            return _blank(
                race,
                "unfinished",
                utc_iso(started),
                "no report yet: the race is running in another process, or its "
                "process stopped before it ended",
            )
        with self._lock:
            hit = self._summaries.get(race)
        if hit is not None and stamp is not None and hit[0] == stamp:
            return hit[1]
        report = _checked(race, doc)
        if report is None:
            return _blank(
                race,
                "unreadable",
                utc_iso(started),
                f"the report of race {race} cannot be read; it may have been edited or cut short",
            )
        summary = summary_of(report)
        with self._lock:
            self._summaries[race] = (stamp, summary)
        return summary

    def _report(self, race: str) -> dict | None:
        found = self.reports.stored(race)
        return _checked(race, found[1]) if found is not None else None


def _checked(race: str, report) -> dict | None:
    return report if isinstance(report, dict) and report.get("race") == race else None


def _let_go(entry: _Entry) -> None:
    """Drop the job's lock (closing the fd drops its flock); called under the registry's lock."""
    if entry.job_lock is not None:
        os.close(entry.job_lock)
        entry.job_lock = None


def _job(spec: chatjob.ChatSpec) -> tuple:
    """What makes two races the same job: the grade and what the model is sent and judged by
    (runs, candidates and judges only say how thoroughly it is raced)."""
    return (spec.grade.strip(), spec.texts, spec.system, spec.rubric)


def summary_of(report: dict) -> dict:
    """A listing entry for a race that ended, from its report."""
    reference = report.get("reference") or {}
    failed = not reference.get("succeeded")
    verdict = report.get("verdict") or {}
    return {
        "race": report["race"],
        "status": "failed" if failed else "done",
        "grade": report.get("grade"),
        "pinned": report.get("pinned"),
        "ceiling": report.get("ceiling"),
        "judges": list(report.get("judges") or [report.get("ceiling")]),
        "runs": report.get("runs"),
        "look": len(report.get("looks") or ()) if report.get("job") else None,
        "candidates": list(report.get("candidates") or ()),
        "started": report.get("started"),
        "seconds": report.get("seconds"),
        "progress": progress_of(report),
        "verdict": {
            "model": verdict.get("model"),
            "state": verdict.get("state"),
            "why": verdict.get("why"),
        },
        "judge_failures": report.get("judge_failures"),
        "voided": report.get("voided"),
        "voids_to_confirm": [
            {"model": v.get("model"), "label": v.get("label"), "voided": v.get("voided")}
            for v in report.get("voids") or ()
        ],
        "error": f"the reference run failed: {reference.get('error')}" if failed else None,
    }


def _blank(race: str, status: str, started: str, error: str) -> dict:
    return {
        "race": race,
        "status": status,
        "grade": None,
        "pinned": None,
        "ceiling": None,
        "judges": [],
        "runs": None,
        "look": None,
        "candidates": [],
        "started": started,
        "seconds": None,
        "progress": None,
        "verdict": None,
        "judge_failures": None,
        "voided": None,
        "voids_to_confirm": [],
        "error": error,
    }


def _page(limit) -> int:
    if limit is None or limit == "":
        return PAGE
    text = str(limit)
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE:
        raise BadRequest(f"'limit' must be a whole number from 1 to {MAX_PAGE}", param="limit")
    return int(text)


# -- one registry per server -----------------------------------------------------------------------
def admit(caller) -> None:
    """403 for a gateway key limited to collections: a race calls any model of a grade, and the
    race reports hold every race's prompts and answers."""
    if getattr(caller, "collections", None) is not None:
        raise Forbidden(
            f"key '{caller.name}' is limited to collections, so it may not start or "
            "read races; use a key made without --collections"
        )
