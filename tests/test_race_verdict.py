"""The race's verdict rule, on simulated races: seeded random judge marks fed to the verdict
exactly as a race's report feeds it (rows of runs, and each model's cost). A cheaper model that
is truly worse is almost never named, at any number of runs; a truly equal one is, once the
evidence suffices; too little evidence, a judge that cannot tell models apart, failed or unjudged
runs name no model and say why."""

import math
import random
import statistics

import pytest

from panelist.metrics.race import sequential, verdict
from panelist.metrics.stats import paired_sample_size
from panelist.metrics.race.verdict import STEP, decide

RACES = 2000
REF_MEAN, REF_SD = 5.5, 1.0  # the pinned model's accuracy marks (of 7)


def mark(rng, mean, sd):
    """One judge mark: a whole number from 0 to 7, around ``mean``."""
    return min(7, max(0, round(rng.gauss(mean, sd))))


def rows(model, marks, *, input=1, shown=2, scores=None, capped=None, **row):
    out = []
    for n, accuracy in enumerate(marks, 1):
        out.append(
            {
                "model": model,
                "input": input,
                "run": n,
                "succeeded": True,
                "accuracy": accuracy,
                "shown_work": shown,
                "capped_from": capped,
                "total": None if accuracy is None else accuracy + shown,
                "score": None if scores is None else scores[n - 1],
                "score_error": None,
                "judge_error": None if accuracy is not None else "judge failure",
                **row,
            }
        )
    return out


def priced(**costs):
    return [{"model": m, "cost": c, "currency": "USD"} for m, c in costs.items()]


MODELS = priced(pinned=1.0, cheap=0.1)


def named_rate(n, candidate, seed, races=RACES, mean=REF_MEAN, sd=REF_SD):
    """How often ``cheap`` is named over ``races`` simulated races of ``n`` runs each."""
    rng = random.Random(seed)
    named = 0
    for _ in range(races):
        reference = [mark(rng, mean, sd) for _ in range(n)]
        said = decide(
            rows("pinned", reference) + rows("cheap", candidate(rng, n)), MODELS, "pinned"
        )
        named += said["model"] == "cheap"
    return named / races


@pytest.mark.parametrize("n", [2, 3, 5, 10, 30])
def test_a_truly_worse_cheaper_model_is_named_at_most_5_percent_of_the_time(n):
    three_worse = REF_MEAN - 3 / STEP  # 3 points of 10 below the pinned model
    rate = named_rate(n, lambda rng, k: [mark(rng, three_worse, REF_SD) for _ in range(k)], seed=n)
    assert rate <= 0.05, f"a model 3 points worse was named in {rate:.1%} of races at {n} runs"


@pytest.mark.parametrize("n", [3, 10])
def test_at_the_margin_itself_a_model_is_named_at_most_5_percent_of_the_time(n):
    """Exactly 1 point of 10 worse on average (0.7 of a mark: a mark less 7 times in 10), the
    boundary the test guards; whole marks do not push it past its level."""

    def at_margin(rng, k):
        return [max(0, mark(rng, REF_MEAN, REF_SD) - (rng.random() < 0.7)) for _ in range(k)]

    assert named_rate(n, at_margin, seed=100 + n) <= 0.05


def test_a_truly_equal_cheaper_model_is_found_once_the_evidence_suffices():
    def equal(rng, k):
        return [mark(rng, 6.0, 0.5) for _ in range(k)]

    assert named_rate(30, equal, seed=7, mean=6.0, sd=0.5) >= 0.8


def test_holm_keeps_the_chance_of_naming_any_of_several_at_the_margin_at_5_percent():
    """Four cheaper candidates, each exactly at the margin: tested one by one, some would be
    named far more often than 5% of the time; corrected together, any of them at most 5%."""
    rng = random.Random(44)
    models = priced(pinned=1.0, a=0.1, b=0.2, c=0.3, d=0.4)
    any_named = any_uncorrected = 0
    races, n = 1000, 10
    for _ in range(races):
        race = rows("pinned", [mark(rng, REF_MEAN, REF_SD) for _ in range(n)])
        for alias in "abcd":
            race += rows(
                alias,
                [max(0, mark(rng, REF_MEAN, REF_SD) - (rng.random() < 0.7)) for _ in range(n)],
            )
        said = decide(race, models, "pinned")
        any_named += said["model"] in tuple("abcd")
        any_uncorrected += any(c["p"] is not None and c["p"] <= 0.05 for c in said["candidates"])
        assert all(c["p_holm"] >= c["p"] for c in said["candidates"] if c["p"] is not None)
    assert any_named / races <= 0.05
    assert any_uncorrected / races > 0.05, "the correction had nothing to correct"


def test_holm_can_hold_back_a_model_one_test_alone_would_name():
    reference = [7, 6, 7, 6, 7, 6, 7, 6]
    race = rows("pinned", reference) + rows("cheap", reference) + rows("other", [1] * 8)
    alone = decide(rows("pinned", reference) + rows("cheap", reference), MODELS, "pinned")
    both = decide(race, priced(pinned=1.0, cheap=0.1, other=0.2), "pinned")
    by = {c["model"]: c for c in both["candidates"]}
    assert alone["model"] == "cheap"
    assert by["cheap"]["p_holm"] == pytest.approx(min(1.0, 2 * by["cheap"]["p"])) or by["cheap"][
        "p_holm"
    ] == pytest.approx(by["other"]["p_holm"])
    assert by["other"]["result"] == "worse"


def test_a_judge_that_marks_every_run_alike_cannot_discriminate():
    race = rows("pinned", [7] * 10) + rows("cheap", [7] * 10)
    said = decide(race, MODELS, "pinned")
    assert said["model"] is None and said["state"] == "cannot_discriminate"
    assert "cannot tell the models apart" in said["why"] and "cheap" not in said["why"]
    # what the judge said counts, not what code made of it: a cap is not the judge's doing
    capped = rows("pinned", [7] * 5) + rows("cheap", [4] * 5, capped=7)
    assert decide(capped, MODELS, "pinned")["state"] == "cannot_discriminate"


def test_too_little_evidence_says_how_much_more_as_a_range_on_an_assumed_spread():
    """Two runs measure no spread: the advice is a range planned on an assumed spread, and says
    so in words and in the JSON."""
    race = rows("pinned", [6, 7]) + rows("cheap", [6, 6])
    said = decide(race, MODELS, "pinned")
    assert said["model"] is None and said["state"] == "insufficient"
    needed = said["needed"]
    assert needed["of"] == "runs" and "more" not in needed, "a range, never one number"
    assert 1 <= needed["low"] < needed["high"]
    assert needed["assumed"] == sequential.ASSUMED_SPREAD
    assert f"{needed['low']} to {needed['high']} more run(s)" in said["why"]
    assert "assumes a spread of 2 points, not yet measured" in said["why"]
    assert said["why"].startswith("too little evidence to name a model")
    (cheap,) = said["candidates"]
    assert cheap["result"] == "undecided" and cheap["needed"] == needed
    # the next look's level, split over the candidates, is what the advice plans for
    assert needed["level"] == pytest.approx(sequential.level(2, verdict.ALPHA), abs=1e-6)


def test_a_measured_spread_gives_a_range_from_its_interval_and_its_high_end_settles_it():
    pinned, cheap = [6, 7] * 3, [7, 6] * 3  # as good as the pinned model; differences ±1 mark
    said = decide(rows("pinned", pinned) + rows("cheap", cheap), MODELS, "pinned")
    needed = said["needed"]
    assert needed["assumed"] is None and "not yet measured" not in said["why"]
    low, high = needed["spreads"]
    assert low < said["candidates"][0]["measures"]["accuracy"]["spread"] < high
    assert f"if its spread is between {low:.2f} and {high:.2f} points" in said["why"]
    # racing again up to the high end's total, with the spread it saw, names it at look 2
    total = needed["totals"][1]
    more = decide(
        rows("pinned", ([6, 7] * total)[:total]) + rows("cheap", ([7, 6] * total)[:total]),
        MODELS,
        "pinned",
        look=2,
    )
    assert more["model"] == "cheap" and more["test"]["look"] == 2


def test_after_the_fifth_look_the_verdict_names_no_model_and_says_the_looks_are_spent():
    pinned, cheap = [6, 7] * 4, [7, 6] * 4
    race = rows("pinned", pinned) + rows("cheap", cheap)
    fifth = decide(race, MODELS, "pinned", look=5)
    assert fifth["test"]["level"] == pytest.approx(sequential.levels(verdict.ALPHA)[-1], abs=1e-6)
    assert fifth["model"] is None and fifth["needed"] is None
    assert "the job's 5 planned looks are spent" in fifth["why"]
    first = decide(race, MODELS, "pinned")
    assert first["needed"] is not None and first["test"]["look"] == 1


def test_the_advice_range_holds_the_runs_truly_needed_in_most_reruns():
    """Reruns of one 5-run race of three candidates: each rerun's range is planned from its own
    spread; most ranges hold the runs a known spread needs, and none runs to the hundreds."""
    rng = random.Random(31)
    # the spread the test works with, were it known: of two runs' differences, rounding added
    diffs = [
        (mark(rng, REF_MEAN, REF_SD) - mark(rng, REF_MEAN, REF_SD)) * STEP for _ in range(20_000)
    ]
    truth = math.hypot(statistics.stdev(diffs), verdict.ROUNDING)
    held, highs = 0, []
    reruns = 200
    for _ in range(reruns):
        race = rows("pinned", [mark(rng, REF_MEAN, REF_SD) for _ in range(5)])
        for alias in ("a", "b", "c"):
            race += rows(alias, [mark(rng, REF_MEAN, REF_SD) for _ in range(5)])
        said = decide(race, priced(pinned=1.0, a=0.1, b=0.2, c=0.3), "pinned")
        needed = said["needed"]
        if needed is None:
            continue
        wanted = paired_sample_size(truth, 1.0, alpha=needed["level"], power=verdict.POWER)
        held += needed["totals"][0] <= wanted <= needed["totals"][1]
        highs.append(needed["high"])
    assert held / reruns >= 0.6, f"the range held the runs needed in {held} of {reruns} reruns"
    highs.sort()
    assert highs[len(highs) // 2] < 150 and highs[-1] / highs[len(highs) // 2] < 4


def test_with_several_inputs_an_input_is_the_unit_and_more_inputs_are_asked_for():
    race = []
    for i, level in enumerate([7, 5, 3], 1):
        race += rows("pinned", [level, level], input=i) + rows(
            "cheap", [level, max(0, level - 1)], input=i
        )
    said = decide(race, MODELS, "pinned")
    assert said["test"]["unit"] == "input"
    (cheap,) = said["candidates"]
    assert cheap["measures"]["accuracy"]["n"] == 3, "three inputs: three units, not six runs"
    assert said["state"] == "insufficient" and said["needed"]["of"] == "inputs"
    assert "more input(s)" in said["why"]


def test_shown_work_never_buys_back_accuracy_the_tool_cap_took():
    """The cheap model's tool calls differ: code capped its accuracy at 4; its shown work (3)
    brings its total level with the pinned model's, but the verdict is decided on accuracy."""
    race = rows("pinned", [7, 7, 6, 7, 6, 7, 7, 6], shown=0) + rows(
        "cheap", [4] * 8, shown=3, capped=7
    )
    assert sum(r["total"] for r in race if r["model"] == "cheap") >= sum(
        r["total"] for r in race if r["model"] == "pinned"
    )
    said = decide(race, MODELS, "pinned")
    (cheap,) = said["candidates"]
    assert cheap["result"] == "worse" and said["model"] == "pinned" and said["state"] == "keep"


def test_the_scorer_takes_part_in_the_verdict():
    marks = [7, 6, 7, 6, 7, 6, 7, 6, 7, 6]
    judged_alike = rows("pinned", marks, scores=[1.0] * 10) + rows(
        "cheap", marks, scores=[0.0, 1.0] * 5
    )
    said = decide(judged_alike, MODELS, "pinned", scored=True)
    assert said["test"]["measures"] == ["accuracy", "score"]
    (cheap,) = said["candidates"]
    assert cheap["measures"]["accuracy"]["p"] < 0.05, "the judge alone would name it"
    assert cheap["result"] == "worse" and said["model"] == "pinned"
    # a scorer that compared nothing leaves the verdict to accuracy, and says so
    unscored = rows("pinned", marks, scores=[None] * 10) + rows("cheap", marks, scores=[None] * 10)
    said = decide(unscored, MODELS, "pinned", scored=True)
    assert said["test"]["measures"] == ["accuracy"] and said["model"] == "cheap"
    assert "the scorer compared none of the pinned model's runs" in said["why"]
    # a scorer that compared none of the candidate's runs leaves it open, and says why
    theirs = rows("pinned", marks, scores=[1.0] * 10) + rows("cheap", marks, scores=[None] * 10)
    said = decide(theirs, MODELS, "pinned", scored=True)
    (cheap,) = said["candidates"]
    assert cheap["result"] == "undecided" and said["state"] == "insufficient"
    assert "none of its runs has a score to pair" in cheap["why"]


def test_judge_failures_are_counted_and_keep_the_model_from_being_named():
    marks = [7, 6, 7, 6, 7, 6, 7, 6, 7, 6]
    race = rows("pinned", marks) + rows("cheap", marks[:9] + [None])
    said = decide(race, MODELS, "pinned")
    (cheap,) = said["candidates"]
    assert cheap["result"] == "unjudged" and "1 of its 10 runs were not judged" in cheap["why"]
    assert said["model"] is None and said["state"] == "insufficient"


def test_a_failed_run_is_never_named_and_then_the_pinned_model_is_kept():
    marks = [7, 6, 7, 6, 7, 6, 7, 6]
    race = rows("pinned", marks) + rows("cheap", marks)
    race[-1]["succeeded"] = False
    said = decide(race, MODELS, "pinned")
    (cheap,) = said["candidates"]
    assert cheap["result"] == "failed"
    assert said["model"] == "pinned" and said["state"] == "keep"
    assert said["why"].startswith("keep pinned: no cheaper model is shown good enough")


def test_costs_in_several_currencies_are_never_compared():
    marks = [7, 6, 7, 6, 7, 6, 7, 6]
    race = rows("pinned", marks) + rows("cheap", marks) + rows("euro", marks)
    models = priced(pinned=1.0, cheap=0.1) + [{"model": "euro", "cost": 0.05, "currency": "EUR"}]
    said = decide(race, models, "pinned")
    assert said["model"] is None and said["state"] == "currencies"
    assert said["cheapest_by_currency"] == {"EUR": "euro", "USD": "cheap"}


def test_the_margin_is_configurable_and_checked():
    reference = [7, 6] * 10
    worse = [6, 5] * 10  # a mark (1.4 points of 10) below the pinned model's every run
    race = rows("pinned", reference) + rows("cheap", worse)
    assert decide(race, MODELS, "pinned")["model"] == "pinned"
    wide = decide(race, MODELS, "pinned", margin=3)
    assert wide["model"] == "cheap" and wide["test"]["margin"] == 3
    for bad in (0, -1, 11, "1", True, None):
        with pytest.raises(ValueError, match="points of 10"):
            verdict.check_margin(bad)


def test_no_judged_run_of_the_pinned_model_names_no_model():
    said = decide(rows("cheap", [7, 6, 7]), MODELS, "pinned")
    assert said["model"] is None and said["state"] == "no_reference"
    assert "race it too" in said["why"]


@pytest.mark.parametrize(
    "cost, said",
    [(0.0, "(0 USD a run)"), (0.000123456, "(0.000123 USD a run)"), (0.25, "(0.25 USD a run)")],
)
def test_the_named_models_cost_reads_as_people_write_it(cost, said):
    # the same marks on both: the cheaper one is good enough, and its cost is in the reason
    same = [6, 6, 7, 6, 5, 6, 7, 6, 6, 6] * 3
    out = decide(
        rows("pinned", same) + rows("cheap", same), priced(pinned=1.0, cheap=cost), "pinned"
    )
    assert out["model"] == "cheap", out
    assert said in out["why"] and "0.000000" not in out["why"], out["why"]
