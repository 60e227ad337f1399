"""A judge's failures do not compound: a judgement is tried again (the seats core's retries after a
rate limit or a server error, an unusable answer asked again) within three tries in all and the
race's deadline, and a run a judgement is missing from is scored by the judgements that came
back, less the missing judges' offsets, so the verdict still has it."""

import json

import pytest

from conftest import read_jsonl
from racekit import Chat, home_of
from panelist.metrics.race.benchmark import Benchmark, GradeBook
from panelist.metrics.roster.roster import Roster
from panelist.metrics.upstream.sim import SimUpstream

TOP = {"accuracy": 7, "shown_work": 3, "reason": "as good as the reference"}
LOW = {"accuracy": 4, "shown_work": 1, "reason": "weaker than the reference"}
# alias -> (family, grade)
MODELS = {
    "pinned-gen": ("pfam", "general"),
    "cheap-gen": ("cfam", "general"),
    "judge-a": ("afam", "strong"),
    "judge-b": ("bfam", "strong"),
}
UNUSABLE = "this is not a judgement"


@pytest.fixture()
def sim():
    with SimUpstream({alias: {"json": TOP} for alias in MODELS}) as s:
        yield s


@pytest.fixture()
def home(tmp_path, sim):
    return home_of(tmp_path, sim, MODELS)


def bench_of(
    home, *, runs=1, judges=("judge-a",), candidates=("cheap-gen",), orders="both", timeout=3600.0
):
    bench = Benchmark(
        Chat,
        runs=runs,
        home=home,
        admission=None,
        timeout=timeout,
        grades=GradeBook.plain({"general": "pinned-gen"}, "judge-a", Roster(home)),
    )
    bench.set_input("Where is order 42?").set_candidates(list(candidates))
    bench.set_judges(list(judges)).set_orders(orders)
    return bench


def test_a_judge_that_keeps_failing_leaves_the_runs_to_the_judges_that_answered(home, sim):
    # judge-b is rate limited on every call; judge-a marks the cheap model's runs lower
    sim.script("judge-b", fail="rate_limit", retry_after=0.01)
    sim.script("cheap-gen", answer="the cheap answer")
    sim.script("judge-a", json=TOP, json_rules=[{"contains": "the cheap answer", "answer": LOW}])
    bench = bench_of(
        home, runs=3, judges=("judge-a", "judge-b"), candidates=("pinned-gen", "cheap-gen")
    )
    bench.run()
    report = bench.report()
    # three tries of each judgement in all (the core's retries after the stated wait), never more
    assert sim.count("judge-b") == 3 * 2 * 2 * 3
    for row in report.rows:
        assert row["judge_error"] is None
        assert row["accuracy"] == (4 if row["model"] == "cheap-gen" else 7)
        assert [(m["judge"], m["order"]) for m in row["missing"]] == [
            ("judge-b", "reference_first"),
            ("judge-b", "candidate_first"),
        ]
        assert all(
            "after 3 attempt(s)" in m["error"] and "rate_limit" in m["error"]
            for m in row["missing"]
        )
        assert "judged without judge-b" in row["reason"]
    assert report.judge_failures == 0
    assert report.judging["missing"] == {
        "judgements": 12,
        "runs": 6,
        "evened": 0,
        "by_judge": {"judge-b": 12},
    }
    assert "missing judgements: 12 on 6 run(s) (judge-b 12)" in report.table()
    # the verdict has every run: the cheap model is shown worse, not left unjudged
    (cheap,) = [c for c in report.verdict["candidates"] if c["model"] == "cheap-gen"]
    assert cheap["result"] == "worse"
    assert report.verdict["model"] == "pinned-gen" and report.verdict["state"] == "keep"


def test_a_run_missing_its_strict_judge_scores_as_the_runs_judged_in_full(home, sim):
    # judge-b marks lower than judge-a, and cannot judge the one run that answers oddly
    sim.script("cheap-gen", answers=["a plain answer", "an odd answer", "a plain answer"])
    sim.script(
        "judge-b",
        json=LOW,
        json_rules=[
            {"contains": "an odd answer", "answer": UNUSABLE},
            {"contains": "cannot be used", "answer": UNUSABLE},
        ],
    )
    bench = bench_of(home, runs=3, judges=("judge-a", "judge-b"))
    bench.run()
    report = bench.report()
    (odd,) = [r for r in report.rows if r["output"] == "an odd answer"]
    full = [r for r in report.rows if r is not odd]
    assert [(r["accuracy"], r["shown_work"], r["total"]) for r in full] == [(5.5, 2, 7.5)] * 2
    # judge-a alone gave 7 and 3: less its offset from the jury on the full runs (+1.5, +1)
    assert odd["evened_from"] == {"accuracy": 7, "shown_work": 3, "total": 10}
    assert (odd["accuracy"], odd["shown_work"], odd["total"]) == (5.5, 2, 7.5)
    assert [m["judge"] for m in odd["missing"]] == ["judge-b", "judge-b"]
    assert "not a JSON object" in odd["missing"][0]["error"]
    assert sim.count("judge-b") == 2 * 2 + 2 * 3, "the odd run's judgements tried 3 times each"
    assert report.judging["missing"]["evened"] == 1
    (model,) = report.models
    assert model["judged"] == 3 and model["judge_failures"] == 0 and model["accuracy"] == 5.5


def test_an_unusable_judgement_is_asked_again_up_to_three_times(home, sim):
    sim.script("judge-a", json=[UNUSABLE, UNUSABLE, TOP])
    bench = bench_of(home, orders="random")
    bench.run()
    (row,) = bench.report().rows
    assert (row["accuracy"], row["total"], row["judge_asks"]) == (7, 10, 3)
    assert row["judge_error"] is None
    asked = [r["body"] for r in sim.requests if r["model"] == "judge-a"]
    assert len(asked) == 3
    assert asked[2]["messages"][-1]["content"].startswith("That answer cannot be used")


def test_a_rate_limited_judge_is_tried_again_after_its_stated_wait_and_each_try_is_kept(home, sim):
    # every second call to judge-a is refused with a short Retry-After
    sim.script("judge-a", json=TOP, fail="rate_limit", fail_every=2, retry_after=0.01)
    bench = bench_of(home)
    bench.run()
    report = bench.report()
    (row,) = report.rows
    assert row["total"] == 10 and row["judge_error"] is None and not row.get("missing")
    assert sim.count("judge-a") == 3, "one of the two orders needed a second try"
    assert sorted(j["asks"] for j in row["judgements"]) == [1, 2]
    folder = home.root / "runs" / "races" / report.race
    kept = [json.loads(p.read_text()) for p in sorted((folder / "judge").iterdir())]
    assert sorted(k["attempts"] for k in kept) == [1, 2]
    lines = [c for c in read_jsonl(folder / "calls.jsonl") if c["role"] == "judge"]
    assert sorted(c["attempts"] for c in lines) == [1, 2]


@pytest.mark.parametrize(
    "fail, said",
    [
        ("auth", "auth"),  # a refused key fails again: no retry
        ("rate_limit", "rate_limit"),  # a wait past the race's deadline
    ],
    ids=["not-transient", "wait-past-deadline"],
)
def test_a_judge_call_that_cannot_pass_is_not_asked_again(home, sim, fail, said):
    sim.script("judge-a", fail=fail, retry_after=600)
    bench = bench_of(home, timeout=120)
    bench.run()
    (row,) = bench.report().rows
    assert sim.count("judge-a") == 2, "one try per order"
    assert row["accuracy"] is None and "after 1 attempt(s)" in row["judge_error"]
    assert said in row["judge_error"]
    assert bench.report().judge_failures == 1
