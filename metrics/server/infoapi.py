"""The dashboard's front page facts: the server's version and counts (``/api/info``), loading
the demo roster, and the grades with their pins.

Invariants (beside ``metrics.server.api``'s): ``info`` counts from the ledger's index and the
roster's view, never a log scan; the demo is served by the data folder's one simulator.
"""

from __future__ import annotations

import platform
from typing import Callable

from panelist import __version__
from panelist.metrics.ledger.ids import panel_seq
from panelist.metrics.roster.collection import PREFIX
from panelist.metrics.server.api import ApiRequest, edits_config
from panelist.metrics.server.bodies import NOTHING, takes


def info(req: ApiRequest) -> dict:
    panels = req.panels
    view = panels.roster.view()
    ledger = panels.ledger
    seq = panel_seq(ledger.latest_panel())  # None while the ledger holds no panel
    return {
        "version": __version__,
        "python": platform.python_version(),
        "data_dir": str(panels.home.root),
        "counts": {
            "endpoints": len(view.endpoints),
            "models": len(view.models),
            "collections": len(panels.collections.all()),
            "panels": seq + 1 if seq is not None else 0,
            "verdicts": ledger.verdict_count(),
            "owed": ledger.owed_count(),
        },
        "first_run": not view.endpoints,
        "auth": {"token_required": req.token_required},
        "gateway": {"base_url": f"{req.base_url}/v1"},
    }


@edits_config
@takes(NOTHING)
def load_demo(req: ApiRequest) -> dict:
    from panelist.metrics.roster import demo

    req.parts.start_demo()  # served by the data folder's one simulator, its roster installed
    return {"loaded": True, "collection": PREFIX + demo.COLLECTION["name"]}


# -- grades ---------------------------------------------------------------------------------------
def list_grades(req: ApiRequest) -> dict:
    """The grades weakest first, each with its pin and models, and the ceiling."""
    from panelist.metrics.roster.grades import Grades

    return Grades(req.panels.home).listing(req.panels.roster.view())


ROUTES: list[tuple[str, dict[str, Callable[[ApiRequest], object]]]] = [
    ("/api/info", {"GET": info}),
    ("/api/demo", {"POST": load_demo}),
    ("/api/grades", {"GET": list_grades}),
]
