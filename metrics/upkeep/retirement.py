"""Whether a model is in service: not retired (the roster) and not resting after a rate limit
(the ledger). Restoring a model ends both at once, each where it is recorded: the roster change
in ``config/changes.jsonl``, the end of the rest as a cooldown line in ``evidence.jsonl``.

Every retirement and every end of one, by hand or by health, is one alert
(``runs/alerts.jsonl``): ``retired`` with the reason, ``restored``; a model already retired (or
already in service) changes nothing and raises nothing.
"""

from __future__ import annotations

import time

from panelist.metrics.alerts import Alerts
from panelist.metrics.ledger.ledger import Ledger
from panelist.metrics.roster.roster import Roster


def retire(
    roster: Roster,
    alerts: Alerts,
    alias: str,
    *,
    by: str,
    reason: str = "",
    message: str | None = None,
    **fields,
) -> bool:
    """Keep ``alias`` out of every panel; False (and no alert) if it was retired already.
    NotFound for an alias the roster does not hold."""
    changed = roster.retire(alias, by=by)
    if changed:
        why = f": {reason}" if reason else ""
        alerts.raise_alert(
            "retired",
            alias,
            message
            or (
                f"{alias} was retired by {by}{why}; Restore on its model page (or `panelist "
                f"model restore {alias}`) puts it back"
            ),
            reason=reason,
            by=by,
            **fields,
        )
    return changed


def restore(
    roster: Roster,
    ledger: Ledger,
    alias: str,
    *,
    by: str,
    alerts: Alerts | None = None,
    message: str | None = None,
    **fields,
) -> tuple[bool, float]:
    """Put ``alias`` back in service; returns (whether it was retired, seconds its rest still
    had, 0 if none), with a ``restored`` alert when it was retired. NotFound for an alias the
    roster does not hold."""
    unretired = roster.restore(alias, by=by)
    if unretired and alerts is not None:
        alerts.raise_alert(
            "restored",
            alias,
            message or f"{alias} was put back in service by {by}",
            by=by,
            **fields,
        )
    until = ledger.states([alias], "general")[alias].cooling_until
    if until:
        ledger.cool_down(alias, 0, f"restored by {by}")
    return unretired, max(0.0, until - time.time()) if until else 0.0
