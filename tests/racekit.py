"""What the race tests of the jury share: a data folder whose roster is a table of simulated
models (alias -> family and grade), and the plain chat job a race runs on each seat."""

from panelist.metrics.home import open_home
from panelist.metrics.roster.roster import Roster


class Chat:
    """The job: the prompt, sent to the seat as one user message."""

    grade = "general"

    def run(self, prompt, seat):
        return seat.chat([{"role": "user", "content": prompt}])


def home_of(tmp_path, sim, models: dict[str, tuple[str | None, str]], *, answer=None):
    """A data folder whose roster holds ``models`` (alias -> (family or None, grade)), each
    served by ``sim`` under its alias at one price; ``answer``: what each says when asked for
    JSON (a judge's judgement), scripted on ``sim``."""
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sims", sim.url)
    for alias, (family, grade) in models.items():
        roster.add_model(alias, "sims", family=family, grade=grade, price_in=1.0, price_out=2.0)
        if answer is not None:
            sim.script(alias, json=answer)
    return home
