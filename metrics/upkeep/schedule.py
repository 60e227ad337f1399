"""Scheduled work in the server process: probes and catalog refreshes without cron.

Settings live in ``config/schedule.json`` as ``{"jobs": {job: {"mode", "every"}}}``; a job
missing there is ``off``. Modes: ``off`` (never runs), ``log-only`` (works out what would
change and says it as a ``schedule`` alert, changing nothing), ``run``.

Invariants:
- The next run time of each job is kept in ``runs/schedule.json`` and is claimed under a
  ``flock`` on ``runs/schedule.lock``: the claim moves ``next`` forward before the job runs, so
  two processes on one folder never run the same due time twice, and a restart neither repeats
  a run (the time already moved) nor skips one (a job whose time passed while no server was up
  runs once at start). A job that never ran is due at once.
- Every run is one line in ``runs/schedule.jsonl`` (job, mode, what it did or would do).
- The thread waits on its clock (``Clock``: real time, unless a test gives it one it moves)
  until the nearest due time, or at most ``SETTINGS_EVERY`` seconds, or until ``close``, then
  looks at ``config/schedule.json`` again (one ``os.stat``; parsed only when it
  changed): a ``panelist schedule set`` reaches a running server without a restart. A job whose
  interval was shortened is due at its last run plus the new interval. A file broken while the
  server runs keeps the last good settings and says so once, as a ``schedule`` alert; a server
  refuses to start on one. ``close`` sets the Event and joins the thread.
- A job that fails is logged and waits for its next time: the thread never dies of it.
- With a database, only the instance that leads (``upkeep.leader``) claims and runs jobs, and
  the next run times are the database's ``schedule_book`` (``DatabaseBook``), claimed by one
  statement each: whichever instance leads, or takes over, sees the same due times, so a run is
  neither repeated nor skipped across a change of leader. A claim lands only while the
  claimer's leader lease is live on the database's clock (fenced), so an instance that froze
  after it saw itself lead claims nothing once another took over. The settings and the run log stay
  the leading instance's own (``config/schedule.json``, ``runs/schedule.jsonl``).
"""

from __future__ import annotations

import threading
import time

from panelist.metrics.store import configfile, jsonl, jsonwire
from panelist.metrics.alerts import Alerts
from panelist.metrics.errors import BadRequest, ConfigInvalid, PanelistError
from panelist.metrics.home import Home

JOBS = ("probe", "catalog_refresh")
MODES = ("off", "log-only", "run")
DEFAULT_EVERY = {"probe": 3600, "catalog_refresh": 86400}
MIN_EVERY = 1
JOIN = 60.0
SETTINGS_EVERY = 2.0


def settings(home: Home) -> dict[str, dict]:
    """``{job: {"mode", "every"}}`` for every job, checked; a bad field names itself."""
    return _checked(configfile.read(home.file("schedule.json")))


def _checked(doc: dict) -> dict[str, dict]:
    jobs = doc.get("jobs", {})
    if not isinstance(jobs, dict):
        raise ConfigInvalid(
            "schedule.json: jobs must be an object of job name to "
            "{mode, every}; fix it with `panelist schedule set`"
        )
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        raise ConfigInvalid(
            f"schedule.json: unknown job(s) {', '.join(unknown)}; the jobs are {', '.join(JOBS)}"
        )
    out = {}
    for job in JOBS:
        entry = jobs.get(job, {})
        if not isinstance(entry, dict):
            raise ConfigInvalid(f"schedule.json: jobs.{job} must be an object with mode and every")
        out[job] = {
            "mode": check_mode(entry.get("mode", "off"), f"schedule.json: jobs.{job}.mode"),
            "every": check_every(
                entry.get("every", DEFAULT_EVERY[job]), f"schedule.json: jobs.{job}.every"
            ),
        }
    return out


def check_mode(mode, field: str) -> str:
    if mode not in MODES:
        raise ConfigInvalid(f"{field} must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def check_every(every, field: str) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < MIN_EVERY:
        raise ConfigInvalid(
            f"{field} must be a whole number of seconds of {MIN_EVERY} or more, not {every!r}"
        )
    return every


def set_job(home: Home, job: str, *, mode: str | None = None, every: int | None = None) -> dict:
    """Change one job's mode and/or interval in ``config/schedule.json``."""
    if job not in JOBS:
        raise BadRequest(f"unknown job '{job}'; the jobs are {', '.join(JOBS)}")
    if mode is None and every is None:
        raise BadRequest("say what to change: --mode and/or --every")
    try:
        if mode is not None:
            check_mode(mode, "--mode")
        if every is not None:
            check_every(every, "--every")
    except ConfigInvalid as exc:
        raise BadRequest(exc.message) from None
    settings(home)  # a broken file is reported, not silently rewritten

    def change(doc):
        jobs = doc.setdefault("jobs", {})
        old = dict(jobs.get(job, {}))
        new = jobs.setdefault(job, {})
        if mode is not None:
            new["mode"] = mode
        if every is not None:
            new["every"] = every
        return (f"schedule {job}", old, dict(new)) if new != old else None

    configfile.update(home.file("schedule.json"), change, by="schedule")
    return settings(home)[job]


class Book:
    """The persisted next run times of one data folder (``runs/schedule.json``)."""

    def __init__(self, home: Home):
        self.path = home.schedule_state
        self.log_path = home.schedule_log

    def _locked(self):
        return configfile.flocked(self.path.with_name("schedule.lock"))

    def load(self) -> dict:
        try:
            data = jsonwire.loads(self.path.read_bytes())
        except (FileNotFoundError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            job: e
            for job, e in data.items()
            if job in JOBS and isinstance(e, dict) and isinstance(e.get("next"), (int, float))
        }

    def _save(self, state: dict) -> None:
        configfile.write_atomic(self.path, state)

    def claim(self, job: str, every: int, now: float) -> bool:
        """True if ``job`` is due at ``now``; then its next time is moved on before returning,
        so no other process (nor a restart) claims the same run."""
        with self._locked():
            state = self.load()
            entry = state.get(job)
            if entry is not None and entry["next"] > now and entry.get("last", now) + every > now:
                return False
            state[job] = {"next": now + every, "last": now}
            self._save(state)
            return True

    def next_due(self, job: str, every: int | None = None) -> float:
        """When ``job`` is due; with ``every``, no later than its last run plus that."""
        entry = self.load().get(job)
        if not entry:
            return 0.0
        last = entry.get("last")
        if every is not None and isinstance(last, (int, float)):
            return min(entry["next"], last + every)
        return entry["next"]


class DatabaseBook:
    """The next run times of a cluster's jobs, in the database's ``schedule_book``: the same
    claims as ``Book``, each one statement, so two instances never claim one due time. With
    ``holder`` (the leader lease's), a claim lands only while that holder's lease is live on
    the database's clock: an instance frozen between seeing itself lead and claiming cannot
    claim once another has taken over."""

    def __init__(self, db, holder: str | None = None):
        self.db = db  # a pg.Database whose schema is migrated (the leader's)
        self.holder = holder

    def load(self) -> dict:
        return {
            job: {"next": nxt, "last": last}
            for job, nxt, last in self.db.execute("SELECT job, next, last FROM schedule_book")
            if job in JOBS
        }

    def claim(self, job: str, every: int, now: float) -> bool:
        # retry=False: a claim that landed and whose answer was lost must not be claimed again
        # (the second would find the job not due, and its run would be lost)
        return bool(
            self.db.execute(
                "INSERT INTO schedule_book AS b (job, next, last) "
                "SELECT %s, %s, %s WHERE %s::text IS NULL OR EXISTS (SELECT 1 FROM leases "
                "WHERE name = 'leader' AND holder = %s AND until > clock_timestamp()) "
                "ON CONFLICT (job) DO UPDATE SET next = EXCLUDED.next, last = EXCLUDED.last "
                "WHERE NOT (b.next > %s AND b.last + %s > %s) RETURNING 1",
                (job, now + every, now, self.holder, self.holder, now, every, now),
                retry=False,
            )
        )

    def next_due(self, job: str, every: int | None = None) -> float:
        entry = self.load().get(job)
        if not entry:
            return 0.0
        if every is not None:
            return min(entry["next"], entry["last"] + every)
        return entry["next"]


def book_of(home: Home, db=None, holder: str | None = None):
    """Where ``home``'s next run times are kept: ``db``'s book (a database's data folder; its
    claims fenced by the leader lease of ``holder``), else the folder's own."""
    return DatabaseBook(db, holder) if db is not None else Book(home)


class Clock:
    """Real time, which a server's scheduler runs on. A test gives the scheduler an object with
    the same two methods whose time it moves itself, so no test waits on real time."""

    def now(self) -> float:
        return time.time()

    def wait(self, event: threading.Event, until: float) -> bool:
        """Wait until ``event`` is set or the clock reads ``until`` (epoch seconds: a deadline,
        not a duration, so time that passes before the wait begins is never waited twice);
        True if the event is set."""
        return event.wait(max(0.0, until - time.time()))


class Scheduler:
    """Runs the jobs of one server's data folder on a thread; ``close`` stops and joins it."""

    def __init__(
        self,
        home: Home,
        panels=None,
        *,
        jobs: dict[str, dict] | None = None,
        clock: Clock | None = None,
        leader=None,
    ):
        """``leader``: an ``upkeep.leader.Leader`` (with a database, only the instance that
        leads runs jobs, from the database's book); None runs every due job here."""
        self.home = home
        self.leader = leader
        self.panels = panels
        self._clock = clock if clock is not None else Clock()
        self._settings = configfile.Cached(home.file("schedule.json"), _checked)
        self.jobs = jobs if jobs is not None else self._settings.get()
        self._broken: str | None = None
        self.book = (
            book_of(home, leader.db, leader.lease.holder)
            if leader is not None and leader.db is not None
            else Book(home)
        )
        self._stop = threading.Event()
        self.passes = 0  # loop passes done; a test waits on it instead of on time
        self._pass = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> dict[str, dict]:
        return {j: s for j, s in self.jobs.items() if s["mode"] != "off"}

    def start(self) -> "Scheduler":
        """Start the thread, once; a scheduler already closed stays stopped."""
        with self._pass:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="schedule", daemon=True)
                self._thread.start()
        return self

    def wait_passes(self, n: int, timeout: float) -> bool:
        with self._pass:
            return self._pass.wait_for(lambda: self.passes >= n, timeout)

    def _follow_settings(self) -> None:
        """Take up an edit of the settings; a broken edit keeps the last good ones."""
        try:
            self.jobs = self._settings.get()
            self._broken = None
        except ConfigInvalid as exc:
            if exc.message != self._broken:
                self._broken = exc.message
                self._alert(
                    "settings",
                    f"{exc.message}; the schedule goes on with the "
                    "settings it had until the file is fixed",
                )

    def _alert(self, subject: str, message: str, **fields) -> None:
        alerts = Alerts(self.home)
        try:
            alerts.raise_alert("schedule", subject, message, **fields)
        finally:
            alerts.close()

    def _loop(self) -> None:
        clock = self._clock
        while not self._stop.is_set():
            self._follow_settings()
            leads = self.leader is None or self.leader.leads()
            for job, s in self.active.items():
                # asked again before each claim: a job run may outlast the lease
                if self._stop.is_set() or not (self.leader is None or self.leader.leads()):
                    break
                if self._claim(job, s["every"], clock.now()):
                    self._run(job, s["mode"])
            # the pass's time is read before the pass is counted, so time that moves on after
            # a watcher saw the count is never lost to a wait measured from later
            now = clock.now()
            with self._pass:
                self.passes += 1
                self._pass.notify_all()
            nearest = self._nearest(now) if leads else now + SETTINGS_EVERY
            clock.wait(self._stop, min(now + SETTINGS_EVERY, max(now, nearest)))

    def _claim(self, job: str, every: int, now: float) -> bool:
        try:
            return self.book.claim(job, every, now)
        except PanelistError:  # the database's book out of reach: no run, the next pass asks
            return False

    def _nearest(self, now: float) -> float:
        try:
            return min(
                (self.book.next_due(j, s["every"]) for j, s in self.active.items()),
                default=now + SETTINGS_EVERY,
            )
        except PanelistError:
            return now + SETTINGS_EVERY

    def _run(self, job: str, mode: str) -> None:
        dry = mode == "log-only"
        try:
            summary, said = (self._probe if job == "probe" else self._refresh)(dry)
            outcome = {"status": "ok", **summary}
        except Exception as exc:  # noqa: BLE001 - one failed run must not end the schedule
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            outcome, said = {"status": "failed", "error": message[:500]}, None
        line = {
            "v": jsonl.SCHEMA,
            "ts": jsonl.utc_second(self._clock.now()),
            "job": job,
            "mode": mode,
            **outcome,
        }
        appender = jsonl.Appender(self.home.schedule_log)
        try:
            appender.append(line)
        finally:
            appender.close()
        if dry and said is not None:
            self._alert(job, said, job=job, mode=mode, **summary)

    def _probe(self, dry: bool) -> tuple[dict, str]:
        from panelist.metrics.upkeep.health import Health

        health = Health.of(self.panels) if self.panels is not None else Health(self.home)
        try:
            probes = health.probe(dry_run=dry, cancel=self._stop)  # close cuts it
        finally:
            health.close()
        key = "would" if dry else "did"
        acts = {p.alias: p.action for p in probes if p.action}
        summary = {"probed": len(probes), key: acts}
        if not acts:
            return summary, f"a probe of {len(probes)} model(s) would change nothing"
        said = "; ".join(f"{v.replace('would_', 'would ')} {a}" for a, v in sorted(acts.items()))
        return summary, f"a scheduled probe {said}; set the probe job to run to let it"

    def _refresh(self, dry: bool) -> tuple[dict, str]:
        from panelist.metrics.roster.catalog import Catalog
        from panelist.metrics.upstream.client import Upstream

        upstream = self.panels.upstream if self.panels is not None else Upstream()
        try:
            done = Catalog(self.home).refresh(upstream, dry_run=dry)
        finally:
            if self.panels is None:
                upstream.close()
        if dry:
            fill = done["would_fill"]
            summary = {"would_fill": fill, "failed": done["failed"]}
            names = ", ".join(f"{f['served']} {f['fact']}" for f in fill[:20])
            more = f" and {len(fill) - 20} more" if len(fill) > 20 else ""
            said = (
                f"a catalog refresh would fill {len(fill)} fact(s): {names}{more}; set the "
                "catalog_refresh job to run to store them"
                if fill
                else "a catalog refresh would change nothing"
            )
            return summary, said
        return {
            "refreshed": len(done["refreshed"]),
            "failed": done["failed"],
            "went_paid": len(done["went_paid"]),
        }, ""

    def close(self, timeout: float = JOIN) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
