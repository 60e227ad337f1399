"""``GET /ready``: whether this instance can do its work now, beside ``/health`` (it is alive).

A load balancer or an orchestrator sends traffic to an instance only while it is ready, and
keeps it alive while it is healthy: an instance whose database is out of reach stays up
(``/health`` 200, it serves what needs no database and catches up by itself), but is not ready.

Checks, each ``{"ok": bool, ...}`` under ``checks``:

* ``ledger``: the ledger follows its records: what is new is folded (``folded``: how many were
  behind), which with a database also shows the database answers within its bounds.
* ``config`` (with a database): the config mirror completed a sync within ``CONFIG_FRESH``
  seconds, so this instance serves the roster, collections and keys every other one does.

``jobs`` says whether this instance runs the cluster's jobs (``{"leader": bool}``, with a database
the lease's ``term``: ``upkeep.leader``); it is no check, every instance serves alike.

Invariants: 200 with ``"ready": true`` only when every check passed, else 503 with
``Retry-After``; a check's message never names where the database is or who connects to it
(``DatabaseUnreachable``'s message is already so). O(new records): nothing is rescanned.
"""

from __future__ import annotations

import time

from panelist.metrics.errors import PanelistError

CONFIG_FRESH = 5.0   # seconds: the mirror syncs every half second while the database answers
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
        checks["config"] = {"ok": fresh, "seconds_since_sync": None if age is None
                            else round(age, 1)}
        if not fresh:
            checks["config"]["why"] = ("the config files have not been in step with the "
                                       f"database for over {CONFIG_FRESH:g} s")
    ready = all(c["ok"] for c in checks.values())
    # not a check: an instance that does not lead serves as well as the one that does
    body = {"ready": ready, "checks": checks, "jobs": parts.leader.status()}
    return (200 if ready else 503), body, \
        ({} if ready else {"Retry-After": RETRY_AFTER})
