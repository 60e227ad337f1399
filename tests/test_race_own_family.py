"""A model never judges its own family's runs: the default judge (the ceiling) raced as a
candidate, or of a candidate's family, gives way to the strongest model of another family the
roster can call, or leaves its own family's runs unjudged, saying why; and a family none typed is
the one the model's id names, so ``gpt-4o`` may not judge ``gpt-4o-mini``."""

import pytest

import racekit
from racekit import Chat

from panelist.metrics.errors import BadRequest
from panelist.metrics.home import open_home
from panelist.metrics.race.benchmark import Benchmark, GradeBook
from panelist.metrics.race.chatjob import ChatSpec, plan
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

TOP = {"accuracy": 7, "shown_work": 3, "reason": "as good as the reference"}


@pytest.fixture()
def sim():
    with SimUpstream({}) as s:
        yield s


def home_of(tmp_path, sim, models: dict[str, tuple[str | None, str]]):
    """``racekit.home_of``, each model answering a judge's question with ``TOP``."""
    return racekit.home_of(tmp_path, sim, models, answer=TOP)


def bench_of(home, ceiling, candidates, judges=None, pinned="pinned-gen"):
    bench = Benchmark(
        Chat,
        runs=2,
        home=home,
        admission=None,
        grades=GradeBook.plain({"general": pinned}, ceiling, Roster(home)),
    )
    bench.set_input("Where is order 42?").set_candidates(candidates)
    if judges:
        bench.set_judges(judges)
    return bench


def judged_by(sim, alias) -> int:
    """The judge's questions ``alias`` was asked (a run's calls ask for no JSON)."""
    return sum(1 for r in sim.requests if r["model"] == alias and "response_format" in r["body"])


def test_the_ceiling_raced_as_a_candidate_never_judges_and_the_next_strongest_does(tmp_path, sim):
    home = home_of(
        tmp_path,
        sim,
        {
            "pinned-gen": ("pfam", "general"),
            "cheap-gen": ("cfam", "general"),
            "top": ("tfam", "strong"),
            "next": ("nfam", "strong"),
            "light-one": ("lfam", "light"),
        },
    )
    bench = bench_of(home, "top", ["pinned-gen", "cheap-gen", "top"])
    bench.run()
    report = bench.report()
    assert report.judges == ["next"]
    assert judged_by(sim, "top") == 0, "the ceiling asked nothing as a judge"
    assert judged_by(sim, "next") == 3 * 2 * 2
    assert all(r["total"] == 10 for r in report.rows)
    (warning,) = report.warnings
    assert warning == (
        "the ceiling model top is of family 'tfam', as top is, so next "
        "(family 'nfam') judges the race in its place"
    )


def test_with_no_model_of_another_family_its_own_runs_are_left_unjudged(tmp_path, sim):
    home = home_of(
        tmp_path,
        sim,
        {
            "pinned-gen": ("pfam", "general"),
            "cheap-gen": ("cfam", "general"),
            "top": ("tfam", "strong"),
            "top-two": ("tfam", "strong"),
        },
    )
    bench = bench_of(home, "top", ["pinned-gen", "cheap-gen", "top-two"])
    bench.run()
    report = bench.report()
    assert report.judges == ["top"]
    for row in report.rows:
        if row["model"] == "top-two":
            assert row["accuracy"] is None and row["judgements"] == []
            assert row["judge_error"].startswith(
                "not judged: the ceiling model top is of family 'tfam', as top-two is"
            )
            assert "name judges of other families with --judges" in row["judge_error"]
        else:
            assert row["total"] == 10 and row["judge_error"] is None
    assert judged_by(sim, "top") == 2 * 2 * 2, "only the other families' runs"
    (entry,) = [c for c in report.verdict["candidates"] if c["model"] == "top-two"]
    assert entry["result"] == "unjudged"
    assert "no model of another family can judge" in report.warnings[0]


@pytest.fixture()
def untyped(tmp_path, sim):
    """Models with no family typed: their families are what their ids name."""
    home = open_home(tmp_path / "data")
    roster = Roster(home)
    roster.add_endpoint("sims", sim.url)
    for alias, served, grade in [
        ("pinned-gen", "pinned-gen", "general"),
        ("mini", "openai/gpt-4o-mini", "general"),
        ("big", "openai/gpt-4o", "strong"),
        ("sonnet", "claude-3-5-sonnet-20241022", "strong"),
    ]:
        roster.add_model(alias, "sims", served=served, grade=grade, price_in=1.0, price_out=2.0)
        sim.script(served, json=TOP)
    return home


def test_a_typed_judge_of_a_candidates_derived_family_is_refused(untyped, sim):
    with pytest.raises(BadRequest, match="the judge big is of family 'gpt', as mini is"):
        bench_of(untyped, None, ["mini"], judges=["big"]).run()
    assert sim.requests == []


def test_the_ceiling_of_a_candidates_derived_family_gives_way(untyped, sim):
    bench = bench_of(untyped, "big", ["pinned-gen", "mini"])
    bench.run()
    report = bench.report()
    assert report.judges == ["sonnet"]
    assert judged_by(sim, "openai/gpt-4o") == 0
    assert all(r["total"] == 10 for r in report.rows)


def test_a_race_asked_for_over_http_plans_the_judge_it_will_seat(tmp_path, sim):
    home = home_of(
        tmp_path,
        sim,
        {
            "pinned-gen": ("pfam", "general"),
            "cheap-gen": ("cfam", "general"),
            "top": ("tfam", "strong"),
            "next": ("nfam", "strong"),
        },
    )
    grades = GradeBook.plain({"general": "pinned-gen"}, "top", Roster(home))
    view = Roster(home).view()
    raced = plan(
        ChatSpec.parse({"grade": "general", "prompt": "x", "candidates": ["cheap-gen", "top"]}),
        view,
        grades,
    )
    assert raced.judges == ["next"] and raced.ceiling == "next"
    kept = plan(
        ChatSpec.parse({"grade": "general", "prompt": "x", "candidates": ["cheap-gen"]}),
        view,
        grades,
    )
    assert kept.judges == ["top"]
