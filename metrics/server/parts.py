"""The long-lived parts of one server, built once per server (``Parts``): the panels (roster,
collections, ledger, upstream, admission, seats), the races it runs, the onboarding worker, the
schedule and (with a database) whether this instance leads and so runs it (``upkeep.leader``),
the watch that alerts failing models (``failing``), the sender of alerts to webhooks
(``webhooks``), the panels' search index, with a database the mirror of the config files
(``store.pgconfig``) and the dashboard's logins (``server.sessiontable``), the dashboard's live
suite report, its provider sign-ins (``signin.registry``), the suite run its dashboard starts
(``suite_runs``) and its part in serving the demo
(``demohost``: the data folder's one simulator, run here or found in another process).

Invariants: nothing runs until ``start`` (a server built and never served runs no job) but the
demo when asked for at build (``start_demo``); ``start`` keeps serving a demo the roster uses
(the demo endpoint is the data folder's demo simulator). ``close`` stops the threads first
(the failing watch, the webhook sender, schedule, onboarding, races, the suite run, the
search index's builder: each joined before the ledger, upstream, seats and logs it uses close),
then the panels, then the demo; it always returns.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from panelist.metrics.home import Home
from panelist.metrics.ledger import samples as sample_store
from panelist.metrics.ledger.search import SearchIndex
from panelist.metrics.panel.panel import Panels
from panelist.metrics.race.registry import Races
from panelist.metrics.server.limits import Limits
from panelist.metrics.signin.registry import SignIns
from panelist.metrics.upkeep import failing, onboarding_worker, schedule, webhooks
from panelist.metrics.upkeep.leader import Leader
from panelist.metrics.upkeep.suitejob import SuiteRuns
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.proxy import environment_proxies

if TYPE_CHECKING:  # imported when a demo is first asked for
    from panelist.metrics.upkeep.demohost import DemoHost


class Parts:
    """One server's domain: what its routes and the API reach through ``h.server.parts``.
    A *part* is a long-lived object a server builds once and closes once (a service container,
    in other frameworks' words); nothing hangs attributes on it from outside."""

    @classmethod
    def of_home(cls, home: Home, panels: Panels | None = None, env=None) -> "Parts":
        """The parts of a server over ``home``: a broken schedule is refused before the panels
        open; the upstream's proxies come from ``env`` when given (as the server's settings
        do), else from the process environment."""
        jobs = schedule.settings(home)
        if panels is None:
            panels = (
                Panels(home)
                if env is None
                else Panels(home, upstream=Upstream(proxies=environment_proxies(env)))
            )
        return cls(panels, jobs=jobs, limits=Limits.from_env(env))

    def __init__(self, panels: Panels, *, jobs=None, limits: Limits | None = None):
        self.panels = panels
        self.home = panels.home
        self.limits = limits = limits or Limits()
        self.races = Races(panels.home, upstream=panels.upstream)
        self.suite_runs = SuiteRuns(panels.home)  # starts nothing until asked
        self.onboarding = onboarding_worker.Service(panels)
        # the panels' search index: opens nothing until the first filtered request
        rows, seconds = limits.search_rows, limits.search_seconds
        self.search = (
            SearchIndex(panels.home.gateway_runs, budget_rows=rows, budget_seconds=seconds)
            if not panels.home.database
            else _database_search(panels.home, rows, seconds)
        )
        # with a database, the one instance holding the lease runs the schedule
        self.leader = Leader.of_home(panels.home)
        self.schedule = schedule.Scheduler(
            panels.home,
            panels,
            jobs=jobs if jobs is not None else schedule.settings(panels.home),
            leader=self.leader,
        )
        self.failures = failing.Watch(panels.home, panels.ledger, panels.roster)
        self.webhooks = webhooks.Sender(panels.home)  # every process: alerts are claimed once
        self.config_mirror = _config_mirror(panels.home)
        # with a database, the dashboard's logins, shared by every instance (None: its own)
        self.sessions = _session_table(panels.home)
        self.signins = SignIns(panels.home)  # the dashboard's provider sign-ins; none at first
        self._lock = threading.Lock()
        self._suite_report = None
        self._demo: DemoHost | None = None

    def start(self, *, schedule: bool = True) -> None:
        """Start the background parts. ``schedule`` False (every worker of a group but the
        first): the schedule thread stays off, as one thread per data folder is enough and
        the due times are claimed under a lock anyway. The onboarding worker runs in every
        process: an entry is woken where it was enqueued, and the queue's own lock lets only
        one process work it at a time."""
        if self.config_mirror is not None:
            self.config_mirror.start()
        if schedule:
            self.leader.start()
            self.schedule.start()
        self.onboarding.start()
        self.failures.start()
        self.webhooks.start()
        from panelist.metrics.upkeep.demohost import served_here

        if served_here(self.home):  # its models would be refused once the last owner goes
            self.start_demo(install=False)

    def suite_report(self):
        """The dashboard's suite report, following the samples file from where it last read."""
        from panelist.suite.livereport import LiveReport

        with self._lock:
            if self._suite_report is None:
                self._suite_report = LiveReport(sample_store.of_home(self.home))
            return self._suite_report

    def start_demo(self, install: bool = True) -> str:
        """Serve the demo and (``install``) its roster: the data folder's demo simulator,
        started here only if no process serves it, watched and taken over when its owner goes
        (see ``upkeep.demohost``); the demo endpoint's URL."""
        from panelist.metrics.upkeep.demohost import DemoHost

        with self._lock:
            if self._demo is None:
                self._demo = DemoHost(self.home)
            host = self._demo
        return host.start(install)

    def close(self) -> None:
        if self.config_mirror is not None:
            self.config_mirror.close()
            self.config_mirror.db.close()
        if self.sessions is not None:
            self.sessions.close()
        self.failures.close()
        self.webhooks.close()
        self.schedule.close()
        self.leader.close()  # after its jobs: another instance takes over at once
        self.onboarding.close()  # an entry it cut short resumes at the next start
        self.races.close()  # races cancelled and joined before their upstream closes
        self.suite_runs.close()  # stopped as Ctrl-C would: every finished sample is kept
        self.signins.close()  # a waiting sign-in is cancelled: nothing is stored
        self.search.close()  # its builder joined before the logs' ledger closes
        self.panels.close()
        with self._lock:
            host, self._demo = self._demo, None
            report, self._suite_report = self._suite_report, None
        if report is not None:
            report.close()
        if host is not None:
            host.close()


def _config_mirror(home: Home):
    """With a database, the mirror of the config files, in step with it before the first
    request (``store.pgconfig``); None without one. An unreachable database leaves the files
    serving as they are until the mirror reaches it."""
    if not home.database:
        return None
    from panelist.metrics.errors import DatabaseUnreachable
    from panelist.metrics.store.pg import Database
    from panelist.metrics.store.pgconfig import ConfigMirror
    from panelist.metrics.server import keys

    mirror = ConfigMirror(
        Database(home.database, application="panelist-config"),
        home.config,
        merges={"keys.json": keys.merge},
    )
    try:
        mirror.sync()
    except DatabaseUnreachable:
        pass
    return mirror


def _session_table(home: Home):
    """The dashboard's logins in the database (``server.sessiontable``), or None without one;
    nothing connects until the first login or check."""
    if not home.database:
        return None
    from panelist.metrics.server.session import MAX_SESSIONS
    from panelist.metrics.server.sessiontable import DatabaseTable
    from panelist.metrics.store.pg import Database

    return DatabaseTable(Database(home.database, application="panelist-sessions"), MAX_SESSIONS)


def _database_search(home: Home, rows: int, seconds: float):
    """The search index of a ledger in a database: local, fed from its tables."""
    from panelist.metrics.ledger.pgsearch import DatabaseSearchIndex

    assert home.database is not None  # asked only for a ledger in a database
    return DatabaseSearchIndex(
        home.gateway_runs, home.database, budget_rows=rows, budget_seconds=seconds
    )
