"""The long-lived parts of one server, built once per server (``Parts``): the panels (roster,
collections, ledger, upstream, admission, seats), the races it runs, the onboarding worker, the
schedule, the panels' search index, the dashboard's live suite report and the demo's simulated
upstream.

Invariants: nothing runs until ``start`` (a server built and never served runs no job); ``close``
stops the threads first (schedule, onboarding, races, the search index's builder: each joined
before the upstream, seats and logs it uses close), then the panels, then the simulator; it
always returns.
"""

from __future__ import annotations

import threading

from panelist.metrics.home import Home
from panelist.metrics.ledger.search import SearchIndex
from panelist.metrics.panel.panel import Panels
from panelist.metrics.race.registry import Races
from panelist.metrics.upkeep import onboarding_worker, schedule
from panelist.metrics.upstream.client import Upstream
from panelist.metrics.upstream.proxy import environment_proxies


class Parts:
    """One server's domain: what its routes and the API reach through ``h.server.parts``."""

    @classmethod
    def of_home(cls, home: Home, panels: Panels | None = None, env=None) -> "Parts":
        """The parts of a server over ``home``: a broken schedule is refused before the panels
        open; the upstream's proxies come from ``env`` when given (as the server's settings
        do), else from the process environment."""
        jobs = schedule.settings(home)
        if panels is None:
            panels = Panels(home) if env is None else \
                Panels(home, upstream=Upstream(proxies=environment_proxies(env)))
        return cls(panels, jobs=jobs)

    def __init__(self, panels: Panels, *, jobs=None):
        self.panels = panels
        self.home = panels.home
        self.races = Races(panels.home, upstream=panels.upstream)
        self.onboarding = onboarding_worker.Service(panels)
        # the panels' search index: opens nothing until the first filtered request
        self.search = SearchIndex(panels.home.gateway_runs)
        self.schedule = schedule.Scheduler(panels.home, panels, jobs=jobs if jobs is not None
                                           else schedule.settings(panels.home))
        self._lock = threading.Lock()
        self._suite_report = None
        self._sim = None

    def start(self) -> None:
        self.schedule.start()
        self.onboarding.start()

    def suite_report(self):
        """The dashboard's suite report, following the samples file from where it last read."""
        from panelist.suite.livereport import LiveReport
        with self._lock:
            if self._suite_report is None:
                self._suite_report = LiveReport(self.home.suite_samples)
            return self._suite_report

    def start_demo(self) -> str:
        """Start the simulated upstream the demo roster calls (once); its base URL."""
        from panelist.metrics.upstream.sim import SimUpstream
        with self._lock:
            if self._sim is None:
                self._sim = SimUpstream(keep_requests=1000).start()   # a long demo stays small
            return self._sim.url

    def close(self) -> None:
        self.schedule.close()
        self.onboarding.close()   # an entry it cut short resumes at the next start
        self.races.close()   # races cancelled and joined before their upstream closes
        self.search.close()  # its builder joined before the logs' ledger closes
        self.panels.close()
        with self._lock:
            if self._sim is not None:
                self._sim.stop()
                self._sim = None
