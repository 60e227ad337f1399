"""The statistics a verdict rests on, against published values: Student's t (its distribution
function, tails and quantiles, through the regularized incomplete beta function), t intervals,
Holm's step-down correction and the sample size of a one-sided paired t test.

The expected values are the standard tables' (as R's ``pt``/``qt``/``pbeta`` and scipy give
them to full precision); the sample sizes are the exact ones from the noncentral t distribution.
"""

import math

import pytest

from panelist.metrics import stats


@pytest.mark.parametrize(
    "a, b, x, expected",
    [
        (2, 3, 0.4, 0.5248),  # a whole-number case: a binomial sum
        (0.5, 0.5, 0.3, 0.36901011956554536),  # the arcsine law: 2/pi * asin(sqrt(x))
        (5, 0.5, 0.9, 0.3166429150200122),
        (10, 10, 0.5, 0.5),
        (1.5, 20, 0.05, 0.44342120168569027),
        (3, 4, 0.0, 0.0),
        (3, 4, 1.0, 1.0),
    ],
)
def test_the_regularized_incomplete_beta_function(a, b, x, expected):
    assert stats.betainc(a, b, x) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "t, df, cdf, upper",
    [
        (1.0, 1, 0.75, 0.25),  # Cauchy: 1/2 + atan(t)/pi
        (2.0, 2, 0.908248290463863, 0.09175170953613698),  # 1/2 + t / (2 sqrt(2 + t^2))
        (2.0, 5, 0.9490302605850708, 0.050969739414929174),
        (-1.5, 7, 0.088649243494985, 0.911350756505015),
        (3.0, 29, 0.9972504039330483, 0.002749596066951706),
        (0.0, 3, 0.5, 0.5),
        (10.0, 2, 0.9950737714883372, 0.004926228511662845),
        (40.0, 1, 0.9920439100879742, 0.007956089912025812),
        (2.5, 1000, 0.9937107160994546, 0.0062892839005454036),
        (-4.0, 12, 0.0008808481221975133, 0.9991191518778025),
    ],
)
def test_students_t_distribution_and_its_upper_tail(t, df, cdf, upper):
    assert stats.t_cdf(t, df) == pytest.approx(cdf, abs=1e-12)
    assert stats.t_sf(t, df) == pytest.approx(upper, rel=1e-9)


def test_the_upper_tail_keeps_its_precision_far_out():
    # 1 - cdf would lose every digit here; the tail is computed directly
    assert stats.t_sf(60.0, 30) == pytest.approx(4.155654806766134e-33, rel=1e-6)
    assert stats.t_sf(math.inf, 4) == 0.0 and stats.t_cdf(-math.inf, 4) == 0.0


@pytest.mark.parametrize(
    "p, df, expected",
    [
        (0.975, 1, 12.706204736174694),
        (0.975, 2, 4.302652729749462),
        (0.975, 10, 2.228138851986274),
        (0.975, 30, 2.0422724563012378),
        (0.95, 1, 6.313751514675037),
        (0.95, 5, 2.0150483733330233),
        (0.95, 29, 1.6991270265334972),
        (0.8, 10, 0.8790578285505889),
        (0.99, 3, 4.540702858568132),
        (0.999, 2, 22.327124770119866),
        (0.9, 200, 1.2857987939948012),
        (0.6, 4, 0.2707222947075976),
    ],
)
def test_students_t_quantiles(p, df, expected):
    assert stats.t_quantile(p, df) == pytest.approx(expected, rel=1e-10)
    assert stats.t_quantile(1 - p, df) == pytest.approx(-expected, rel=1e-9)


def test_quantiles_refuse_what_has_none():
    for p in (0.0, 1.0, -0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="between 0 and 1"):
            stats.t_quantile(p, 3)
    with pytest.raises(ValueError, match="degrees of freedom"):
        stats.t_quantile(0.9, 0)
    with pytest.raises(ValueError, match="degrees of freedom"):
        stats.t_cdf(1.0, -2)


def test_the_t_interval_on_a_mean():
    low, high = stats.t_interval([7, 8, 9])
    # mean 8, sd 1, n 3: 8 ± 4.302652729749462 / sqrt(3)
    assert (low, high) == pytest.approx((8 - 2.4841377, 8 + 2.4841377), abs=1e-6)
    assert stats.t_interval([5]) is None and stats.t_interval([]) is None
    assert stats.t_interval([4, 4, 4]) == (4.0, 4.0)
    low90, high90 = stats.t_interval([7, 8, 9], level=0.90)
    assert low < low90 < high90 < high


def test_holm_adjusts_step_down_and_keeps_the_order():
    # Holm (1979): the smallest of k p-values times k, the next times k - 1, ..., never
    # smaller than an adjusted p before it, never above 1
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5]) == [0.5]
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0]
    assert stats.holm([0.04, 0.6]) == pytest.approx([0.08, 0.6])
    assert stats.holm([]) == []
    # four tests at 0.02 each: one alone would pass at 5%, none does after the correction
    assert all(p > 0.05 for p in stats.holm([0.02] * 4))


@pytest.mark.parametrize(
    "effect, alpha, power, exact",
    [
        (0.2, 0.05, 0.8, 156),
        (0.3, 0.05, 0.8, 71),
        (0.5, 0.05, 0.8, 27),
        (0.8, 0.05, 0.8, 12),
        (1.0, 0.05, 0.8, 8),
        (1.5, 0.05, 0.8, 5),
        (2.0, 0.05, 0.8, 4),
        (0.5, 0.025, 0.9, 44),
        (0.8, 0.025, 0.9, 19),
        (2.0, 0.025, 0.9, 5),
    ],
)
def test_the_sample_size_of_a_one_sided_paired_t_test(effect, alpha, power, exact):
    """``effect`` is the distance from the margin in standard deviations of a difference; the
    estimate is within one pair of the exact noncentral-t answer, never below it by more."""
    n = stats.paired_sample_size(1.0, effect, alpha=alpha, power=power)
    assert exact - 1 <= n <= exact + 1
    assert stats.paired_sample_size(2.0, 2 * effect, alpha=alpha, power=power) == n, (
        "only the ratio of distance to spread matters"
    )


def test_a_sample_size_with_no_distance_is_none():
    assert stats.paired_sample_size(1.0, 0.0) is None
    assert stats.paired_sample_size(1.0, -0.5) == stats.paired_sample_size(1.0, 0.5), (
        "a distance below the margin is settled the same way, the other side"
    )
    assert stats.paired_sample_size(1.0, 1e-9) is None, "beyond any race: no figure"
