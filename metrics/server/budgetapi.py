"""The dashboard's spend caps (``panel.budgets``): every gateway key's and collection's caps
with what was spent against them, and a change of one subject's caps.

Invariants (beside ``metrics.server.api``'s): a read opens one small spend file per capped
subject; a period named in ``remove`` loses its cap, one left out is kept.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.errors import BadRequest, NotFound
from panelist.metrics.panel.budgets import WARN
from panelist.metrics.server.api import ApiRequest
from panelist.metrics.server.bodies import Body, Flag, Number, Strings, takes
from panelist.metrics.server.keys import Keys

KINDS = ("key", "collection")


def _names(req: ApiRequest, kind: str) -> list[str]:
    if kind == "key":
        return [k.name for k in Keys(req.panels.home).all()]
    return sorted(req.panels.collections.all())


def _row(req: ApiRequest, kind: str, name: str) -> dict:
    report = req.panels.budgets.report(kind, name)
    near = bool(report) and any(
        report[p]["spent"] >= WARN * report[p]["cap"] for p in ("day", "month") if p in report
    )
    return {"name": name, "budget": report, "near_cap": near}


def list_budgets(req: ApiRequest) -> dict:
    """Each key and collection with its caps and spend (``budget`` null: no cap);
    ``near_cap``: at 90% of a cap or past it, where explorers are no longer seated."""
    return {kind + "s": [_row(req, kind, n) for n in _names(req, kind)] for kind in KINDS}


@takes(
    Body(
        day=Number(hint="the cap per UTC day"),
        month=Number(hint="the cap per UTC month"),
        remove=Strings(2, 5, comma=True, hint="the periods whose cap goes: day, month"),
        allow_unpriced=Flag(hint="true: models with no price may sit under the cap"),
    )
)
def put_budget(req: ApiRequest) -> dict:
    kind, name = req.params["kind"], req.params["name"]
    if kind not in KINDS:
        raise NotFound(
            f"no budgets for '{kind}'; use /api/budgets/key/NAME or /api/budgets/collection/NAME"
        )
    if name not in _names(req, kind):
        raise NotFound(f"unknown {kind} '{name}'; GET /api/budgets lists them")
    body = req.body
    remove = body.get("remove") or []
    remove = remove.split(",") if isinstance(remove, str) else remove
    wrong = [p for p in remove if p not in ("day", "month")]
    if wrong:
        raise BadRequest(f"'remove' names periods: day, month; got '{wrong[0]}'", param="remove")
    periods = {
        p: "none" if p in remove else body[p] for p in ("day", "month") if p in body or p in remove
    }
    req.panels.budgets.set(
        kind, name, allow_unpriced=body.get("allow_unpriced"), by=req.who, **periods
    )
    return _row(req, kind, name)


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/budgets", {"GET": list_budgets}),
    ("/api/budgets/{kind}/{name}", {"PUT": put_budget}),
]
