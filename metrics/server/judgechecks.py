"""The dashboard's judge checks (``panelist judge check``): the latest figures per judge and
shape for the Evidence page's card, what each figure means, and one check's whole report.

Invariants (beside ``metrics.server.api``'s): a read costs one file, whatever the checks run
(``race.checks.latest`` reads ``latest.json``); nothing here starts a check, which spends
money and is the command line's to start.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.race import checks
from panelist.metrics.server.api import ApiRequest


def list_checks(req: ApiRequest) -> dict:
    """Per judge and shape, its latest check's figures, with what each figure means."""
    return {"data": checks.latest(req.panels.home.judge_checks), "explain": checks.EXPLAIN}


def get_check(req: ApiRequest) -> dict:
    return checks.report(req.panels.home.judge_checks, req.params["check"])


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/judge/checks", {"GET": list_checks}),
    ("/api/judge/checks/{check}", {"GET": get_check}),
]
