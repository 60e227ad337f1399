"""The embedded demo: a roster of simulated models and a ``demo`` collection.

The ``demo`` endpoint points at the data folder's one demo simulator, which
``upkeep.demohost`` starts, finds and hands over between processes, and installs with the URL
of the simulator that serves, so the endpoint keeps one URL for as long as that simulator (or
the next owner, on the same port) serves it. Models and the
collection are added only if missing, so the user's edits to them stand. Each demo grade gets
its model pinned (``PINS``) unless it has a pin already, so a race runs offline.
"""

from __future__ import annotations

from typing import Any

from panelist.metrics.roster.collection import Collections
from panelist.metrics.roster.grades import Grades
from panelist.metrics.home import Home
from panelist.metrics.roster.roster import Roster

ENDPOINT = "demo"

# alias -> (family, grade, context window, vision)
MODELS = {
    "sim-swift": ("swift", "light", 32_000, False),
    "sim-steady": ("steady", "general", 128_000, False),
    "sim-careful": ("careful", "strong", 200_000, False),
    "sim-flaky": ("flaky", "general", 64_000, False),
    "sim-vision": ("vision", "general", 128_000, True),
}
# grade -> the model the demo deployment serves it with (the strongest's is the ceiling)
PINS = {"light": "sim-swift", "general": "sim-steady", "strong": "sim-careful"}
COLLECTION: dict[str, Any] = {  # Collections.save's arguments
    "name": "demo",
    "members": ["sim-swift", "sim-steady", "sim-careful"],
    "description": "Demo panel of simulated models: try any prompt; answers are canned.",
    "tags": ["demo", "simulated"],
}


def point(home: Home, sim_url: str) -> None:
    """Point the demo endpoint at ``sim_url`` (written only when it differs), nothing else."""
    Roster(home).add_endpoint(ENDPOINT, sim_url, by="demo")


def install(home: Home, sim_url: str) -> None:
    """Point the demo endpoint at ``sim_url`` and add what of the demo roster is missing."""
    point(home, sim_url)
    roster = Roster(home)
    view = roster.view()
    for alias, (family, grade, window, vision) in MODELS.items():
        if alias not in view.models:
            roster.add_model(
                alias,
                ENDPOINT,
                family=family,
                grade=grade,
                context=window,
                vision=vision,
                price_in=0.0,
                price_out=0.0,
                by="demo",
            )
    grades = Grades(home)
    order = grades.order()
    for grade, alias in PINS.items():
        model = roster.view().models.get(alias)
        if (
            grade in order
            and grades.pinned(grade) is None
            and model is not None
            and model.grade == grade
            and not model.retired
        ):
            grades.pin(grade, alias, by="demo")
    collections = Collections(home)
    if COLLECTION["name"] not in collections.all():
        c = dict(COLLECTION)
        collections.save(roster.view(), c.pop("name"), c.pop("members"), by="demo", **c)
