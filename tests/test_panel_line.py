"""Once any seat of a panel was asked, the panel's line is written: whatever the caller's part
does after the seats were started (a fault while the reply is made, say), and even when the line
itself cannot be built whole. A run is a context manager; leaving its block settles it."""

import pytest

from conftest import PATIENCE, TEST_MODELS, logged
from panelist.metrics.errors import PanelistError
from panelist.metrics.panel.panel import Panels

ASK = {"model": "bench/trio", "messages": [{"role": "user", "content": "Review: x"}]}


class ReplyFault(Exception):
    """What a caller's reply code might raise after the seats were asked."""


@pytest.fixture()
def panels(home, sim):
    for alias in TEST_MODELS:  # a panel ends as soon as it is asked
        sim.script(alias, latency=0.0)
    panels = Panels(home)
    try:
        yield panels
    finally:
        panels.close()


def called(sim, prompt: str = "Review: x") -> int:
    return sum(
        1 for r in sim.requests if any(m.get("content") == prompt for m in r["body"]["messages"])
    )


@pytest.mark.parametrize("mode", ["all", "pick", "merged"])
def test_a_fault_right_after_the_seats_were_asked_still_writes_the_line(panels, home, sim, mode):
    req = panels.parse(dict(ASK, model=f"bench/trio:{mode}"))
    with pytest.raises(ReplyFault):
        with panels.start(req, panels.seat(req), key="local") as run:
            raise ReplyFault("the reply could not be made")
    assert run.logged.wait(PATIENCE), "the panel's line was never written"
    (line,) = logged(home)
    assert line["panel"] == run.panel and not line["abandoned"]
    assert sorted(s["call"] for s in line["seats"]) == sorted(r.call for r in run.results)
    assert all(s["status"] == "ok" for s in line["seats"]), line["seats"]
    assert called(sim) == len(run.results)


def test_a_fault_while_seats_still_run_leaves_the_line_to_the_last_seat(panels, home, sim):
    req = panels.parse(ASK)
    with pytest.raises(ReplyFault):
        with panels.start(req, panels.seat(req), key="local") as run:
            next(r for r in run.progress(tick=0.05) if r is not None)  # one seat ended
            raise ReplyFault("the stream broke after the first section")
    assert run.logged.wait(PATIENCE)
    (line,) = logged(home)
    assert {s["call"] for s in line["seats"]} == {r.call for r in run.results}
    assert all(s["status"] == "ok" for s in line["seats"]), line["seats"]


def test_a_settled_run_is_recorded_once(panels, home):
    req = panels.parse(ASK)
    with panels.start(req, panels.seat(req), key="local") as run:
        reply = panels.complete(run)
    run.settle()
    assert reply["bench"]["panel"] == run.panel
    assert [line["panel"] for line in logged(home)] == [run.panel]


def test_a_line_that_cannot_be_built_whole_is_written_bare(panels, home, sim):
    """An in-process caller can hand the panel a request no check saw: the line that would
    quote it is written without the prompt and answers, every seat's call id kept."""
    req = panels.parse(dict(ASK, model="bench/trio:all"))
    req.messages = [dict(req.messages[0], content=[{"type": "text", "text": 5}])]
    with panels.start(req, panels.seat(req), key="local") as run:
        try:
            panels.complete(run)
        except PanelistError:
            pass  # whether the seats could answer it is not the point here
    assert run.logged.wait(PATIENCE)
    (line,) = logged(home)
    assert line["prompt"] == "" and "building it failed (TypeError)" in line["note"]
    assert sorted(s["call"] for s in line["seats"]) == sorted(r.call for r in run.results)
    assert all(s["answer"] is None and s["status"] for s in line["seats"])
