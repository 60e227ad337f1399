"""What the tests of the race's surfaces share (``test_race_surfaces.py`` over HTTP,
``test_race_cli.py`` from the command line and Python): a data folder of simulated models with
their prices, a gateway or dashboard whose race registry races by a plain grade book, and the wait
for a race to end."""

from __future__ import annotations

import pytest

from conftest import Gateway, wait_until
from panelist.gateway import make_gateway
from panelist.metrics.race import registry as race_registry
from panelist.metrics.roster.grades import Grades
from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import GradeBook
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

JUDGE_SAYS = {"accuracy": 6, "shown_work": 2, "reason": "the same facts as the reference"}
PROMPT = "Where is order 1042?"

# alias -> (grade, price in, price out); all served by one simulated endpoint
MODELS = {
    "pinned-gen": ("general", 2.0, 6.0),
    "cheap-gen": ("general", 0.5, 1.0),
    "slow-gen": ("general", 0.1, 0.2),
    "judge-top": ("strong", 5.0, 15.0),
}
CANDIDATES = ["pinned-gen", "cheap-gen"]


@pytest.fixture()
def sim():
    with SimUpstream(
        {
            "pinned-gen": {},
            "cheap-gen": {},
            "slow-gen": {"fail": "hang"},
            "judge-top": {"json": JUDGE_SAYS},
        }
    ) as s:
        yield s


@pytest.fixture()
def home(tmp_path, sim):
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sim", sim.url)
    for alias, (grade, p_in, p_out) in MODELS.items():
        roster.add_model(
            alias, "sim", family=alias, grade=grade, price_in=p_in, price_out=p_out, tools=True
        )
    return home


def book(home) -> GradeBook:
    """The grade book a test races by when it does not use the data folder's grades."""
    return GradeBook.plain(
        {"general": "pinned-gen", "strong": "judge-top"}, "judge-top", Roster(home)
    )


@pytest.fixture()
def pinned(home):
    """The data folder's own grades pin the reference and the judge, as a deployment does."""
    grades = Grades(home)
    grades.pin("general", "pinned-gen")
    grades.pin("strong", "judge-top")
    return home


def serve(make, home, *, env=None, grades=True, **races):
    """A server over ``home`` whose race registry races by ``book(home)`` (or, with
    ``grades=False``, by the data folder's grades)."""
    server = make(home, env=env or {})
    if grades or races:
        server.parts.races = race_registry.Races(
            home,
            upstream=server.panels.upstream,
            grades=book(home) if grades else None,
            admission=None,
            **races,
        )
    return Gateway(server)


def dashboard(home, **kw):
    from panelist.serve import make_dashboard

    return serve(make_dashboard, home, **kw)


def gateway(home, **kw):
    return serve(make_gateway, home, **kw)


def finished(server, race):
    assert wait_until(lambda: server.get(f"/bench/race/{race}")[1]["status"] != "running"), (
        f"race {race} did not end"
    )
    return server.get(f"/bench/race/{race}")[1]


def race_folder(home):
    return home.root / "runs" / "races"
