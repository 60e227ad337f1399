"""The data folder: everything that is the user's (config and logs), outside the checkout.

Resolved from ``--data DIR``, else ``PANELIST_HOME``, else ``$XDG_DATA_HOME/panelist`` (by default
``~/.local/share/panelist``). First use copies the checkout's ``config/`` defaults in; files that
already exist are never overwritten, so the repo's defaults never clobber the user's edits and
running from a checkout never touches tracked files. API keys are never stored here: an endpoint
names the environment variable that holds its key.

Layout::

    DATA/config/roster.json        endpoints and models
    DATA/config/collections.json   collections
    DATA/config/gateway.json       limits
    DATA/config/changes.jsonl      who changed what, when
    DATA/runs/gateway/calls.jsonl  one line per panel
    DATA/runs/gateway/evidence.jsonl  seats, verdicts, cooldowns, learned windows
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


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def gateway_runs(self) -> Path:
        return self.root / "runs" / "gateway"

    def file(self, name: str) -> Path:
        return self.config / name


def open_home(data: str | os.PathLike | None = None) -> Home:
    """The data folder, created and seeded from the checkout's defaults on first use."""
    root = Path(data).expanduser() if data else default_dir()
    home = Home(root.resolve())
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
