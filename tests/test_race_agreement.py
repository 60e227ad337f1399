"""The jury's agreement is Krippendorff's α on accuracy: checked against a published example and a
hand computation, then on seeded simulations of judges whose relation to the runs is known
(opposite, without signal, informative), with its bootstrap interval and each judge's offset."""

import random

import pytest

from panelist.metrics.race import agreement
from panelist.metrics.race.report import BenchmarkReport, judging_of

ORDERS = ("reference_first", "candidate_first")


def test_alpha_matches_krippendorffs_published_example():
    # Krippendorff's reliability data with missing values (4 observers, 12 units): the interval
    # α he works through by hand is 0.849
    rows = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    }
    units = [[v for v in unit if v is not None] for unit in zip(*rows.values())]
    assert agreement.alpha(units) == pytest.approx(0.849, abs=0.0005)


def test_alpha_of_a_small_example_worked_by_hand():
    # three units marked by two judges: (1, 2), (3, 3), (5, 4)
    # observed: each unit's ordered pairs give 2·d², over m - 1 = 1: 2 + 0 + 2 = 4; / n = 6
    #   D_o = 4 / 6
    # expected: the six values 1 2 3 3 5 4 have mean 3 and squared deviations summing to 10;
    #   ordered pairs across them sum to 2·n·10 = 120; / n(n - 1) = 30: D_e = 4
    # α = 1 - (4/6) / 4 = 5/6
    assert agreement.alpha([[1, 2], [3, 3], [5, 4]]) == pytest.approx(5 / 6)
    # a unit with one value has no pair and changes nothing
    assert agreement.alpha([[1, 2], [3, 3], [5, 4], [7]]) == pytest.approx(5 / 6)


def test_alpha_is_none_when_there_is_nothing_to_agree_on():
    assert agreement.alpha([[5, 5], [5, 5], [5, 5]]) is None
    assert agreement.alpha([[5, 3]]) is None
    found = agreement.alpha_interval([[[5, 5]], [[5, 5]]])
    assert found["value"] is None and found["interval"] is None
    assert "cannot be computed" in agreement.meaning(None, None)


def rows_of(marks: list[dict[str, int]], orders=ORDERS) -> list[dict]:
    """Race rows whose judgements are ``marks`` (per run, ``{judge: accuracy}``), every judge
    giving the same mark in each order."""
    return [
        {
            "label": f"run{n}",
            "judgements": [
                {
                    "judge": judge,
                    "order": order,
                    "accuracy": mark,
                    "capped_from": None,
                    "error": None,
                }
                for order in orders
                for judge, mark in run.items()
            ],
        }
        for n, run in enumerate(marks)
    ]


def simulate(seed: int, runs: int, mark) -> list[dict]:
    """``runs`` runs of a true quality drawn 0..7, each judge's mark ``mark(rng, quality)``."""
    rng = random.Random(seed)
    marks = []
    for _ in range(runs):
        quality = rng.randint(0, 7)
        marks.append(
            {"judge-a": mark(rng, quality, "judge-a"), "judge-b": mark(rng, quality, "judge-b")}
        )
    return rows_of(marks)


def clip(v: float) -> int:
    return max(0, min(7, round(v)))


def alpha_of(rows: list[dict]) -> dict:
    return agreement.jury_agreement(rows, ["judge-a", "judge-b"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_judges_with_opposite_rankings_show_alpha_below_zero(seed):
    rows = simulate(seed, 200, lambda rng, q, j: q if j == "judge-a" else 7 - q)
    found = alpha_of(rows)
    assert found["value"] < -0.5
    assert found["interval"][1] < 0, "the whole interval says they disagree"
    assert "disagree systematically" in found["meaning"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_judges_without_signal_show_alpha_near_zero(seed):
    # both mark 6 or 7 whatever the run: within one point on every run, yet no shared signal
    flat = alpha_of(simulate(seed, 400, lambda rng, q, j: rng.choice((6, 7))))
    # both mark at random over the whole scale
    noise = alpha_of(simulate(seed, 400, lambda rng, q, j: rng.randint(0, 7)))
    for found in (flat, noise):
        assert abs(found["value"]) < 0.12
        assert found["interval"][0] < 0.05 and found["interval"][1] > -0.05


def test_the_interval_of_judges_without_signal_holds_zero_about_as_often_as_it_says():
    # 40 seeded juries that share no signal: a 95% interval should hold the true α (0) in
    # about 38 of them; fewer than 34 would be an interval far too narrow
    held = 0
    for seed in range(40):
        rows = simulate(100 + seed, 100, lambda rng, q, j: rng.randint(0, 7))
        clusters = [[list(u.values()) for u in c] for c in agreement.race_units(rows)]
        low, high = agreement.alpha_interval(clusters, resamples=400)["interval"]
        held += low <= 0 <= high
    assert held >= 34


def test_the_words_say_what_the_value_and_its_interval_mean():
    assert "no evidence the judges agree beyond chance" in agreement.meaning(0.02, [-0.1, 0.15])
    assert "too few runs to show" in agreement.meaning(0.7, [-0.2, 0.95])
    assert "disagree systematically" in agreement.meaning(-0.4, [-0.6, -0.2])
    assert "agree well beyond chance" in agreement.meaning(0.85, [0.75, 0.92])
    assert "agree beyond chance, but not closely" in agreement.meaning(0.7, [0.6, 0.8])
    assert "only a little beyond chance" in agreement.meaning(0.4, [0.2, 0.6])
    assert agreement.meaning(0.82, [0.71, 0.9]).startswith("α 0.82 [0.71, 0.90]: ")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_informative_judges_show_alpha_high(seed):
    rows = simulate(seed, 200, lambda rng, q, j: clip(q + rng.gauss(0, 0.7)))
    found = alpha_of(rows)
    assert found["value"] > 0.8 and found["interval"][0] > 0.7
    assert "agree well beyond chance" in found["meaning"]


@pytest.mark.parametrize(
    "mark",
    [
        lambda rng, q, j: q if j == "judge-a" else 7 - q,
        lambda rng, q, j: rng.randint(0, 7),
        lambda rng, q, j: clip(q + rng.gauss(0, 1.5)),
    ],
    ids=["opposite", "noise", "informative"],
)
def test_the_interval_is_given_contains_the_value_and_is_the_same_each_time(mark):
    rows = simulate(7, 60, mark)
    found = alpha_of(rows)
    low, high = found["interval"]
    assert low <= found["value"] <= high
    assert found["resamples"] == agreement.RESAMPLES and found["level"] == 0.95
    assert alpha_of(rows) == found, "seeded: the same judgements give the same interval"


def test_each_judge_has_its_mean_offset_from_the_jury():
    # judge-b marks every run two points below judge-a (above 1 and below 6, so no clipping)
    rng = random.Random(4)
    marks = []
    for _ in range(40):
        q = rng.randint(2, 5)
        marks.append({"judge-a": q + 1, "judge-b": q - 1})
    found = alpha_of(rows_of(marks))
    assert found["offsets"] == {
        "judge-a": {"offset": 1.0, "units": 80},
        "judge-b": {"offset": -1.0, "units": 80},
    }
    # the offset is a disagreement α counts: equal ranks, unequal marks
    assert found["value"] < 0.8


def test_a_run_judged_in_both_orders_is_two_units_of_one_run_and_missing_marks_are_left_out():
    rows = rows_of(
        [{"judge-a": 7, "judge-b": 6}, {"judge-a": 2, "judge-b": 3}, {"judge-a": 5, "judge-b": 5}]
    )
    # a judge that failed in one order: that unit has one value and drops out
    rows[2]["judgements"][3].update(accuracy=None, error="judge failure after 3 attempt(s)")
    # code's cap is the same for every judge: α reads what each judge said
    rows[0]["judgements"][0].update(accuracy=4, capped_from=7)
    clusters = agreement.race_units(rows)
    assert clusters == [
        [{"judge-a": 7, "judge-b": 6}, {"judge-a": 7, "judge-b": 6}],
        [{"judge-a": 2, "judge-b": 3}, {"judge-a": 2, "judge-b": 3}],
        [{"judge-a": 5}, {"judge-a": 5, "judge-b": 5}],
    ]
    found = alpha_of(rows)
    assert found["units"] == 5 and found["runs"] == 3
    assert found["value"] == round(agreement.alpha([[7, 6], [7, 6], [2, 3], [2, 3], [5, 5]]), 4)


def test_the_report_carries_alpha_with_its_interval_and_says_what_it_means():
    rows = simulate(5, 30, lambda rng, q, j: clip(q + rng.gauss(0, 0.5)))
    jury = {
        "judges": ["judge-a", "judge-b"],
        "orders": "both",
        "temperature": 0,
        "seed": 1,
        "refused": {},
    }
    judging = judging_of(rows, jury)
    alpha = judging["alpha"]
    assert set(alpha) >= {"value", "interval", "offsets", "meaning", "assumes", "units", "runs"}
    assert alpha["meaning"].startswith(
        f"α {alpha['value']:.2f} [{alpha['interval'][0]:.2f}, "
        f"{alpha['interval'][1]:.2f}]: the judges agree"
    )
    assert (
        "1 is perfect agreement, 0 no better than chance, below 0 systematic "
        "disagreement" in alpha["meaning"]
    )
    assert "agreement, not correctness" in alpha["assumes"]
    report = BenchmarkReport(
        race="r1",
        grade="general",
        pinned="p",
        ceiling="judge-a",
        runs=1,
        started="",
        judges=["judge-a", "judge-b"],
        judging=judging,
    )
    assert f"jury agreement on accuracy: {alpha['meaning']}" in report.table()
    assert f"jury α assumes: {agreement.ASSUMES}" in report.table()
    # a single judge has no jury to agree within
    assert "alpha" not in judging_of(rows, dict(jury, judges=["judge-a"]))
