"""``GET /ready``: whether this instance can do its work now, beside ``/health`` (it is alive).

A load balancer or an orchestrator sends traffic to an instance only while it is ready, and
keeps it alive while it is healthy: an instance whose database is out of reach stays up
(``/health`` 200, it serves what needs no database and catches up by itself), but is not ready.

Checks, each ``{"ok": bool, ...}`` under ``checks``:

* ``ledger``: the ledger follows its records: what is new is folded (``folded``: how many were
  behind), which with a database also shows the database answers within its bounds.
* ``config`` (with a database): the config mirror completed a sync within ``CONFIG_FRESH``
  seconds, so this instance serves the roster, collections and keys every other one does;
  ``conflicts`` names the config edits set aside (``NAME.conflict-TIME.json`` in the config
  folder) for a person to merge by hand.

``jobs`` says whether this instance runs the cluster's jobs (``{"leader": bool}``, with a database
the lease's ``term``: ``upkeep.leader``); it is no check, every instance serves alike.

Invariants: 200 with ``"ready": true`` only when every check passed, else 503 with
``Retry-After``; a check's message never names where the database is or who connects to it
(``DatabaseUnreachable``'s message is already so). O(new records): nothing is rescanned.
"""

from __future__ import annotations

import time

from panelist.metrics.errors import PanelistError
from panelist.metrics.store.jsonl import utc_second
from panelist.metrics.store.pgconfig import conflicts

CONFIG_FRESH = 5.0  # seconds: the mirror syncs every half second while the database answers
RETRY_AFTER = "2"


def readiness(parts) -> tuple[int, dict, dict]:
    """``(status, body, headers)`` of ``GET /ready`` over a server's ``parts``."""
    checks: dict[str, dict] = {}
    try:
        checks["ledger"] = {"ok": True, "folded": parts.panels.ledger.catch_up()}
    except PanelistError as exc:
        checks["ledger"] = {"ok": False, "why": exc.message}
    mirror = parts.config_mirror
    if mirror is not None:
        synced = mirror.synced_at
        age = None if synced is None else time.monotonic() - synced
        fresh = age is not None and age <= CONFIG_FRESH
        checks["config"] = {
            "ok": fresh,
            "seconds_since_sync": None if age is None else round(age, 1),
        }
        if not fresh:
            checks["config"]["why"] = (
                "the config files have not been in step with the "
                f"database for over {CONFIG_FRESH:g} s"
            )
        # edits set aside are named (they do not make the instance unready: it serves what
        # the database holds); each stays listed until someone merges and removes the file
        checks["config"]["conflicts"] = conflicts(mirror.folder)
    ready = all(c["ok"] for c in checks.values())
    # not a check: an instance that does not lead serves as well as the one that does
    body = {"ready": ready, "checks": checks, "jobs": parts.leader.status()}
    return (200 if ready else 503), body, ({} if ready else {"Retry-After": RETRY_AFTER})


def conflict_alerts(folder) -> list[dict]:
    """One alert (as ``alerts.jsonl`` holds them) per conflict file in the config ``folder``,
    dated by the file: it stays listed until someone merges it by hand and removes it."""
    kept = []
    for name in conflicts(folder):
        try:
            made = utc_second((folder / name).stat().st_mtime)
        except FileNotFoundError:
            continue  # removed just now
        kept.append(
            {
                "ts": made,
                "kind": "config_conflict",
                "subject": name,
                "message": f"an edit of the config was set aside in config/{name}: it "
                "changed what another instance changed at the same time, or "
                "was saved from an older copy; merge what you want of it by "
                "hand, then remove the file",
            }
        )
    return kept
