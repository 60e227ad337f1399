"""The sequential rule on its own (no race, no HTTP): the shares of the error each look of a job
tests at, and, on seeded simulated jobs raced again until a model is named, that a model exactly
at the margin is named at most 5% of the time over five looks, where testing every look at 5%
names it more often. ``scripts/bench_race.py --sequential`` runs the same check at 2,000 jobs."""

import random

import pytest

from panelist.metrics.race import sequential, verdict
from panelist.metrics.race.verdict import decide
from test_race_verdict import REF_MEAN, REF_SD, mark, priced, rows

MODELS = priced(pinned=1.0, cheap=0.1)


def test_the_looks_shares_add_up_to_alpha_and_the_first_is_the_largest():
    shares = sequential.levels(0.05)
    assert len(shares) == sequential.LOOKS == 5
    assert sum(shares) == pytest.approx(0.05)
    assert shares == sorted(shares, reverse=True)
    assert shares[0] == pytest.approx(0.0148, abs=1e-4)
    assert sequential.level(6, 0.05) == 0.0, "past the planned looks nothing is left"
    with pytest.raises(ValueError, match="whole number from 1"):
        sequential.level(0, 0.05)


def test_the_spreads_interval_comes_from_the_chi_square_distribution():
    # known quantiles: 0.211 and 4.605 for two degrees of freedom, 29.34 the median of 30
    assert sequential.chi2_quantile(0.1, 2) == pytest.approx(0.2107, abs=1e-3)
    assert sequential.chi2_quantile(0.9, 2) == pytest.approx(4.6052, abs=1e-3)
    assert sequential.chi2_quantile(0.5, 30) == pytest.approx(29.336, abs=1e-2)
    low, high = sequential.spread_interval(2.0, 10)
    assert low < 2.0 < high


def at_margin(rng, k):
    """Exactly 1 point of 10 worse on average: a mark less 7 times in 10."""
    return [max(0, mark(rng, REF_MEAN, REF_SD) - (rng.random() < 0.7)) for _ in range(k)]


def raced_until_named(rng, runs, rule, looks=sequential.LOOKS):
    """One job raced again, ``runs`` runs a look, until ``rule(race, look)`` names ``cheap``:
    the look that named it, or None."""
    race = []
    for look in range(1, looks + 1):
        first = (look - 1) * runs
        for row in rows("pinned", [mark(rng, REF_MEAN, REF_SD) for _ in range(runs)]) + rows(
            "cheap", at_margin(rng, runs)
        ):
            row["run"] += first
            race.append(row)
        if rule(race, look):
            return look
    return None


def sequential_rule(race, look):
    return decide(race, MODELS, "pinned", look=look)["model"] == "cheap"


def every_look_at_5_percent(race, look):
    diffs = verdict.differences(
        [r for r in race if r["model"] == "cheap"],
        [r for r in race if r["model"] == "pinned"],
        "accuracy",
        "run",
    )
    return verdict.measure_test(diffs, verdict.MARGIN, 0.05)["p"] <= 0.05


def test_racing_again_until_a_model_is_named_keeps_a_model_at_the_margin_named_at_most_5_percent():
    jobs, runs = 400, 8
    rng = random.Random(2031)
    named = sum(raced_until_named(rng, runs, sequential_rule) is not None for _ in range(jobs))
    rng = random.Random(2031)
    naive = sum(
        raced_until_named(rng, runs, every_look_at_5_percent) is not None for _ in range(jobs)
    )
    assert named / jobs <= 0.05, f"named at the margin in {named} of {jobs} jobs over 5 looks"
    assert naive / jobs > 0.05, (
        f"testing every look at 5% named it in {naive} of {jobs}: the check had nothing to catch"
    )
