"""``GET /api/endpoints/{name}/health``: one endpoint's page: its models with their failing marks
and their last day's seats, error rate and answer times, its call limits and how they are used
now (calls running, calls admitted in the last window, a pause), and whether it is failing as a
whole (``upkeep.failing.endpoints_down``).

Invariants (beside ``metrics.server.api``'s): read-only, from the index and the limits' shared
state (no log read, no upstream call: the page's Test is ``POST /api/endpoints/test``); the key
itself is never in the answer, only the variable it is read from and whether it is set.
"""

from __future__ import annotations

from typing import Callable

from panelist.metrics.errors import NotFound
from panelist.metrics.server.api import ApiRequest, list_endpoints
from panelist.metrics.upkeep.failing import describe, describe_endpoint, endpoints_down


def get_health(req: ApiRequest) -> dict:
    name = req.params["name"]
    row = next((r for r in list_endpoints(req)["data"] if r["name"] == name), None)
    if row is None:
        raise NotFound(f"unknown endpoint {name!r}; see GET /api/endpoints for the names")
    panels = req.panels
    view = panels.roster.view()
    aliases = row["models"]
    marks = panels.ledger.failing(*req.parts.failures.rule())
    down = endpoints_down(
        {a: view.models[a] for a in aliases if a in view.models}, marks, panels.ledger.answering()
    ).get(name)
    day = panels.ledger.usage("day")["models"]
    models = []
    for alias in aliases:
        used = day.get(alias) or {}
        mark = marks.get(alias)
        model = view.models.get(alias)
        models.append(
            {
                "alias": alias,
                "retired": bool(model and getattr(model, "retired", False)),
                "failing": None if mark is None else dict(mark, why=describe(alias, mark)),
                "limits": panels.admission.status("model", alias)
                if view.model_limits.get(alias)
                else None,
                **{k: used.get(k, 0) for k in ("seats", "answered", "failed")},
                **{k: used.get(k) for k in ("error_rate", "p50", "p95")},
            }
        )
    return dict(
        row,
        models=models,
        limits=panels.admission.status("endpoint", name),
        failing=None if down is None else dict(down, why=describe_endpoint(name, down)),
    )


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/endpoints/{name}/health", {"GET": get_health}),
]
