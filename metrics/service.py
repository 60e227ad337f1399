"""Whether a model is in service: not retired (the roster) and not resting after a rate limit
(the ledger). Restoring a model ends both at once, each where it is recorded: the roster change
in ``config/changes.jsonl``, the end of the rest as a cooldown line in ``evidence.jsonl``.
"""

from __future__ import annotations

import time

from panelist.metrics.ledger import Ledger
from panelist.metrics.roster import Roster


def restore(roster: Roster, ledger: Ledger, alias: str, *, by: str) -> tuple[bool, float]:
    """Put ``alias`` back in service; returns (whether it was retired, seconds its rest still
    had, 0 if none). NotFound for an alias the roster does not hold."""
    unretired = roster.restore(alias, by=by)
    until = ledger.states([alias], "general")[alias].cooling_until
    if until:
        ledger.cool_down(alias, 0, f"restored by {by}")
    return unretired, max(0.0, until - time.time()) if until else 0.0
