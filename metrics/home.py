"""The data folder: everything that is the user's (config and logs), outside the checkout.

Resolved from ``--data DIR``, else ``PANELIST_HOME``, else ``$XDG_DATA_HOME/panelist`` (by default
``~/.local/share/panelist``); a server started with ``--demo`` and no ``--data`` uses the folder
beside that one whose name ends in ``-demo`` (``demo_dir``). First use copies the checkout's ``config/`` defaults in; files that
already exist are never overwritten, so the repo's defaults never clobber the user's edits and
running from a checkout never touches tracked files. API keys are never stored here: an endpoint
names the environment variable that holds its key.

Layout (each path is a property of ``Home``, named for what it holds; no other module spells a
path of the data folder)::

    DATA/config/                   config files (``file(name)``): roster.json, collections.json,
                                   gateway.json (limits), schedule.json, keys.json, ...;
                                   changes.jsonl: who changed what, when
    DATA/runs/gateway/             the ledger (``gateway_runs``): calls.jsonl, evidence.jsonl,
                                   panels.idx, index.json; health.json (``health_state``),
                                   rate/ (``rate_counters``)
    DATA/runs/admission/           admission's in-flight counts and pauses (``admission_state``)
    DATA/runs/races/               one folder and one report per race (``races``)
    DATA/runs/race-jobs/           a lock per job being raced, a record of its looks (``race_jobs``)
    DATA/runs/judgecheck/          one report per judge check, and the latest per judge and
                                   shape (``judge_checks``)
    DATA/runs/suite/               suite samples and report (``suite_runs``, ``suite_samples``),
                                   the dashboard's suite run (``suite_run_state``) and its lock
    DATA/runs/alerts.jsonl         alerts (``alerts_log``)
    DATA/runs/demo-sim.json        the demo's simulated upstream: its URL and the pid serving
                                   it (``demo_sim``); demo-sim.lock, demo-sim.owner beside it
    DATA/runs/onboarding.jsonl     the onboarding queue (``onboarding_log``)
    DATA/runs/schedule.json        the schedule's next run times (``schedule_state``), its runs
                                   in schedule.jsonl (``schedule_log``)
    DATA/suite/tasks/              tasks grown from verdicts (``grown_tasks``)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

DEFAULTS = Path(__file__).resolve().parent.parent / "config"


def default_dir() -> Path:
    env = os.environ.get("PANELIST_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "panelist"


def demo_dir() -> Path:
    """The demo's own data folder, beside the default one (``panelist-demo``): ``--demo``
    without ``--data`` keeps its simulated roster and panels out of the user's folder."""
    default = default_dir()
    return default.with_name(default.name + "-demo")


@dataclass(frozen=True)
class Home:
    root: Path
    # where the ledger lives instead of runs/gateway: a PostgreSQL URL shared by several
    # instances (``PANELIST_DATABASE_URL`` or ``--database``), None for the embedded JSONL
    database: str | None = None

    @property
    def config(self) -> Path:
        return self.root / "config"

    def file(self, name: str) -> Path:
        """A config file, by its name (``roster.json``)."""
        return self.config / name

    @property
    def runs(self) -> Path:
        """The logs and state files (everything under it is written by the program)."""
        return self.root / "runs"

    @property
    def gateway_runs(self) -> Path:
        """The ledger's folder: panels, seats, verdicts (``Ledger(home.gateway_runs)``)."""
        return self.runs / "gateway"

    @property
    def health_state(self) -> Path:
        return self.gateway_runs / "health.json"

    @property
    def rate_counters(self) -> Path:
        return self.gateway_runs / "rate"

    @property
    def admission_state(self) -> Path:
        return self.runs / "admission"

    @property
    def races(self) -> Path:
        return self.runs / "races"

    @property
    def judge_checks(self) -> Path:
        """``panelist judge check``'s reports (``race.judgecheck``)."""
        return self.runs / "judgecheck"

    @property
    def suite_runs(self) -> Path:
        return self.runs / "suite"

    @property
    def race_jobs(self) -> Path:
        return self.runs / "race-jobs"

    @property
    def suite_run_state(self) -> Path:
        return self.suite_runs / "dashboard-run.json"

    @property
    def suite_samples(self) -> Path:
        return self.suite_runs / "samples.jsonl"

    @property
    def alerts_log(self) -> Path:
        return self.runs / "alerts.jsonl"

    @property
    def demo_sim(self) -> Path:
        """Where the data folder's one demo simulator is recorded (``upkeep.demohost``)."""
        return self.runs / "demo-sim.json"

    @property
    def onboarding_log(self) -> Path:
        return self.runs / "onboarding.jsonl"

    @property
    def schedule_state(self) -> Path:
        return self.runs / "schedule.json"

    @property
    def schedule_log(self) -> Path:
        return self.runs / "schedule.jsonl"

    @property
    def grown_tasks(self) -> Path:
        """Tasks grown from verdicts (``panelist suite mine``); the suite loads them too."""
        return self.root / "suite" / "tasks"


def open_home(data: str | os.PathLike | None = None, *, database: str | None = None) -> Home:
    """The data folder, created and seeded from the checkout's defaults on first use;
    ``database`` (else ``PANELIST_DATABASE_URL``, if set) is where its ledger lives."""
    root = Path(data).expanduser() if data else default_dir()
    home = Home(root.resolve(), database or os.environ.get("PANELIST_DATABASE_URL") or None)
    home.config.mkdir(parents=True, exist_ok=True)
    home.gateway_runs.mkdir(parents=True, exist_ok=True)
    for src in DEFAULTS.glob("*.json"):
        dst = home.config / src.name
        if not dst.exists():
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.seed")
            shutil.copyfile(src, tmp)
            try:
                os.link(tmp, dst)  # fails if another process seeded first; theirs stands
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
    return home
