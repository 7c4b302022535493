"""Comparisons of means (``warehouse.statistics.means``) against computations by hand: the
moments, the difference and its plug-in (and delta-method) variance, the regression
adjustment, the interval, the decision, the withholding and the guard. Error rates are
measured in ``test_statistics_means_simulation``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warehouse.statistics import (
    CONFIDENCE,
    MIN_USERS_FOR_MEANS,
    MOMENT_COLUMNS,
    Decision,
    MeanMoments,
    WithheldReason,
    compare_means,
    mean_guard,
)
from warehouse.statistics.boundaries import normal_mixture_radius
from warehouse.statistics.guard import Status
from warehouse.statistics.means import MEAN_MIXING_SD, MIN_CARRYING_USERS, carrying_users

ALPHA = 1.0 - CONFIDENCE


def _users(n: int, seed: int, shift: float = 0.0, rho: float = 0.0):
    """Per-user (y, x): y normal around 10 + shift, x its pre-exposure value at ``rho``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    y = 10.0 + shift + 3.0 * (rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal(n))
    return y, 10.0 + 3.0 * x


def _hand_radius(variance: float, pooled_sd: float) -> float:
    """The normal mixture's half-width written out (docs/statistics.md)."""
    tau2 = (MEAN_MIXING_SD * pooled_sd) ** 2
    return math.sqrt(
        variance * (variance + tau2) / tau2 * math.log((variance + tau2) / (variance * ALPHA**2))
    )


def test_moments_are_the_sums_the_sql_computes_and_add_up() -> None:
    y, d, x = np.array([1.0, 0.0, 5.0]), np.array([1.0, 0.0, 2.0]), np.array([2.0, 0.0, 1.0])
    m = MeanMoments.of(y, d, x)
    assert m == MeanMoments(3, 6.0, 3.0, 3.0, 26.0, 5.0, 5.0, 11.0, 7.0, 4.0)
    assert len(MOMENT_COLUMNS) == 10 and MOMENT_COLUMNS[0] == "count(*)"
    assert MeanMoments.from_row((3, 6, 3, 3, 26, 5, 5, 11, 7, 4)) == m
    assert MeanMoments.from_row((0, *[None] * 9)) == MeanMoments(0)
    first, second = MeanMoments.of(y[:1], d[:1], x[:1]), MeanMoments.of(y[1:], d[1:], x[1:])
    assert first + second == m
    assert MeanMoments.of([2.0, 4.0]) == MeanMoments(
        2, 6.0, 2.0, 0.0, 20.0, 2.0, 0.0, 6.0, 0.0, 0.0
    )


def test_a_sum_per_user_is_welchs_difference_in_a_normal_mixture() -> None:
    y_t, _ = _users(800, 1, shift=1.0)
    y_c, _ = _users(1_200, 2)
    answer = compare_means(
        MeanMoments.of(y_t), MeanMoments.of(y_c), ratio=False, higher_is_better=True
    )
    variance = y_t.var(ddof=1) / 800 + y_c.var(ddof=1) / 1_200
    pooled = math.sqrt(((799 * y_t.var(ddof=1)) + 1_199 * y_c.var(ddof=1)) / 1_998)
    half = _hand_radius(variance, pooled)
    difference = y_t.mean() - y_c.mean()
    assert answer.difference == pytest.approx(difference)
    assert answer.ci == pytest.approx((difference - half, difference + half))
    assert answer.treatment_mean == pytest.approx(y_t.mean())
    assert answer.control_mean == pytest.approx(y_c.mean())
    assert answer.decision is Decision.IMPROVEMENT and answer.reason is None
    assert answer.variance_reduction == 0.0  # nothing to adjust for
    worse = compare_means(
        MeanMoments.of(y_t), MeanMoments.of(y_c), ratio=False, higher_is_better=False
    )
    assert worse.decision is Decision.REGRESSION and worse.ci == answer.ci


def test_a_ratio_of_sums_takes_the_delta_method_variance() -> None:
    rng = np.random.default_rng(3)
    arms = []
    for n, value in ((900, 30.0), (1_100, 27.0)):
        d = rng.poisson(2.0, n).astype(float)
        arms.append((d * value * rng.lognormal(0.0, 0.5, n), d))
    answer = compare_means(
        *(MeanMoments.of(y, d) for y, d in arms), ratio=True, higher_is_better=True
    )
    ratios, variances, centred = [], [], []
    for y, d in arms:
        r = y.sum() / d.sum()
        linear = (y - r * d) / d.mean()  # each user's influence on the arm's ratio
        ratios.append(r)
        variances.append(linear.var(ddof=1) / len(y))
        centred.append(((linear - linear.mean()) ** 2).sum())
    pooled = math.sqrt(sum(centred) / (900 + 1_100 - 2))
    half = _hand_radius(sum(variances), pooled)
    assert answer.treatment_mean == pytest.approx(ratios[0])
    assert answer.difference == pytest.approx(ratios[0] - ratios[1])
    assert answer.ci == pytest.approx((answer.difference - half, answer.difference + half))
    assert answer.decision is Decision.IMPROVEMENT


def test_the_adjustment_is_cuped_with_the_pooled_slope() -> None:
    (y_t, x_t), (y_c, x_c) = _users(1_000, 4, shift=0.4, rho=0.7), _users(1_000, 5, rho=0.7)
    t, c = MeanMoments.of(y_t, x=x_t), MeanMoments.of(y_c, x=x_c)
    answer = compare_means(t, c, ratio=False, higher_is_better=True)
    # Equal arms: the slope of y on x within the arms, pooled (Deng et al. 2013).
    theta = (np.cov(y_t, x_t)[0, 1] + np.cov(y_c, x_c)[0, 1]) / (x_t.var(ddof=1) + x_c.var(ddof=1))
    difference = y_t.mean() - y_c.mean() - theta * (x_t.mean() - x_c.mean())
    residuals = [y - theta * x for y, x in ((y_t, x_t), (y_c, x_c))]
    variance = sum(r.var(ddof=1) / 1_000 for r in residuals)
    pooled = math.sqrt(sum(r.var(ddof=1) for r in residuals) / 2)
    half = _hand_radius(variance, pooled)
    assert answer.difference == pytest.approx(difference)
    assert answer.ci == pytest.approx((difference - half, difference + half))
    plain = compare_means(t, c, ratio=False, higher_is_better=True, adjust=False)
    plain_half = (plain.ci[1] - plain.ci[0]) / 2
    assert answer.variance_reduction == pytest.approx(1.0 - half / plain_half)
    assert answer.variance_reduction == pytest.approx(1.0 - math.sqrt(1.0 - 0.49), abs=0.04)
    assert plain.decision is Decision.INCONCLUSIVE and answer.decision is Decision.IMPROVEMENT


def test_an_independent_pre_exposure_value_narrows_next_to_nothing() -> None:
    (y_t, _), (y_c, _) = _users(2_000, 6), _users(2_000, 7)
    rng = np.random.default_rng(8)
    unrelated = compare_means(
        MeanMoments.of(y_t, x=rng.normal(0, 1, 2_000)), MeanMoments.of(y_c, x=rng.normal(0, 1, 2_000)),
        ratio=False, higher_is_better=True,
    )  # fmt: skip
    assert 0.0 <= unrelated.variance_reduction < 0.01


def test_a_ratio_is_adjusted_on_its_linearised_value() -> None:
    rng = np.random.default_rng(9)
    moments = []
    for n in (1_000, 1_000):
        usual = rng.lognormal(3.0, 1.0, n)
        d = rng.poisson(2.0, n).astype(float)
        moments.append(MeanMoments.of(d * usual * rng.lognormal(0, 0.2, n), d, usual))
    adjusted = compare_means(*moments, ratio=True, higher_is_better=True)
    plain = compare_means(*moments, ratio=True, higher_is_better=True, adjust=False)
    assert adjusted.variance_reduction > 0.2
    assert adjusted.treatment_mean == plain.treatment_mean
    assert adjusted.ci[1] - adjusted.ci[0] < plain.ci[1] - plain.ci[0]


@pytest.mark.parametrize(
    ("treatment", "control", "ratio"),
    [
        (
            MeanMoments.of(np.ones(MIN_USERS_FOR_MEANS - 1)),
            MeanMoments.of(np.arange(2_000.0)),
            False,
        ),
        (MeanMoments.of(np.full(600, 2.0)), MeanMoments.of(np.full(600, 3.0)), False),  # no spread
        (
            MeanMoments.of(np.zeros(600), np.zeros(600)),
            MeanMoments.of(np.ones(600), np.ones(600)),
            True,
        ),
        (
            MeanMoments.of(np.r_[np.zeros(590), np.ones(10)]),
            MeanMoments.of(np.r_[np.zeros(590), np.ones(10)]),
            False,
        ),
    ],
    ids=["too few users", "no spread", "a ratio without events", "too few users carry it"],
)
def test_withheld_where_the_approximation_cannot_be_trusted(treatment, control, ratio) -> None:
    answer = compare_means(treatment, control, ratio=ratio, higher_is_better=True)
    assert answer.decision is Decision.WITHHELD and answer.ci is None
    assert answer.reason == WithheldReason.BELOW_MINIMUM_SAMPLE
    assert answer.variance_reduction is None


def test_the_carrying_users_are_the_expected_events_of_0_1_values() -> None:
    ones = MeanMoments.of(np.r_[np.zeros(900), np.ones(100)])
    assert float(carrying_users(ones, ones)) == pytest.approx(100.0)
    whale = MeanMoments.of(np.r_[np.full(999, 1.0), 1e6])  # one user carries the arm
    assert float(carrying_users(whale, whale)) < MIN_CARRYING_USERS


def test_a_withheld_reason_given_wins_and_the_difference_stays_descriptive() -> None:
    (y_t, _), (y_c, _) = _users(1_000, 10, shift=2.0), _users(1_000, 11)
    answer = compare_means(MeanMoments.of(y_t), MeanMoments.of(y_c), ratio=False, higher_is_better=True,
                           withheld_reason=WithheldReason.SAMPLE_RATIO_MISMATCH)  # fmt: skip
    assert answer.decision is Decision.WITHHELD and answer.reason == "sample_ratio_mismatch"
    assert answer.difference == pytest.approx(y_t.mean() - y_c.mean())


# The guard -------------------------------------------------------------------------------------


def _stratum(n_t: int, n_c: int, seed: int, shift: float = 0.0, level: float = 0.0):
    (y_t, x_t), (y_c, x_c) = _users(n_t, seed, shift, 0.5), _users(n_c, seed + 1, 0.0, 0.5)
    return MeanMoments.of(y_t + level, x=x_t), MeanMoments.of(y_c + level, x=x_c)


def test_the_guard_combines_the_steps_in_information_time() -> None:
    strata = [_stratum(600, 5_400, 20, shift=0.2), _stratum(2_500, 7_500, 22, shift=0.2, level=5.0)]
    bound = mean_guard(strata, 0.5, higher_is_worse=True, ratio=False, rollback_level=0.05 / 3,
                       current_share=0.25)  # fmt: skip
    each = [compare_means(t, c, ratio=False, higher_is_better=False) for t, c in strata]
    variances = [_variance_of(t, c) for t, c in strata]
    weights = [1 / v for v in variances]
    estimate = sum(w * a.difference for w, a in zip(weights, each, strict=True)) / sum(weights)
    information = sum(weights)
    low = estimate - float(normal_mixture_radius(1 / information, 0.25, 2 * 0.05 / 3))
    high = estimate + float(normal_mixture_radius(1 / information, 0.25, 2 * 0.05))
    assert bound.difference == pytest.approx(estimate)
    assert bound.ci == pytest.approx((low, high))
    assert bound.treatment_users == 3_100 and bound.control_users == 12_900
    assert (bound.status is Status.REGRESSION) == (low > 0)


def _variance_of(t: MeanMoments, c: MeanMoments) -> float:
    """The adjusted difference's variance, by hand from the moments (as the test above)."""
    total = 0.0
    arms = []
    for m in (t, c):
        s_yy, s_xx = m.yy - m.y**2 / m.n, m.xx - m.x**2 / m.n
        s_yx = m.yx - m.y * m.x / m.n
        arms.append((m.n, s_yy, s_xx, s_yx))
    weights = [1 / (n * (n - 1)) for n, *_ in arms]
    theta = sum(w * a[3] for w, a in zip(weights, arms, strict=True)) / sum(
        w * a[2] for w, a in zip(weights, arms, strict=True)
    )
    for w, (_, s_yy, s_xx, s_yx) in zip(weights, arms, strict=True):
        total += w * (s_yy - 2 * theta * s_yx + theta**2 * s_xx)
    return total


def test_a_level_drifting_between_steps_is_no_difference_between_the_arms() -> None:
    """Step 1: 10 % treatment at night (level 0); step 2: 50 % by day (level +5), no effect.
    Pooled, treatment looks higher (more of its users came by day); by step, it is not."""
    strata = [_stratum(1_000, 9_000, 30), _stratum(5_000, 5_000, 32, level=5.0)]
    pooled = [(strata[0][0] + strata[1][0], strata[0][1] + strata[1][1])]
    kwargs = {"higher_is_worse": True, "ratio": False, "rollback_level": 0.05, "current_share": 0.5}
    assert mean_guard(pooled, 0.5, **kwargs).status is Status.REGRESSION
    assert mean_guard(strata, 0.5, **kwargs).status is Status.SAFE


def test_lower_is_worse_reads_the_other_side() -> None:
    strata = [_stratum(3_000, 3_000, 40, shift=-1.0)]
    kwargs = {"ratio": False, "rollback_level": 0.05, "current_share": 0.5}
    lower_worse = mean_guard(strata, 0.5, higher_is_worse=False, **kwargs)
    higher_worse = mean_guard(strata, 0.5, higher_is_worse=True, **kwargs)
    assert lower_worse.status is Status.REGRESSION and lower_worse.ci[1] < 0
    assert higher_worse.status is Status.SAFE and higher_worse.difference == lower_worse.difference


def _twins(n: int) -> tuple[MeanMoments, MeanMoments]:
    """A step whose arms hold the same values: an estimate of exactly 0, as the users-needed
    estimate assumes it holds."""
    y, x = _users(n, 60, rho=0.5)
    return MeanMoments.of(y, x=x), MeanMoments.of(y, x=x)


def test_a_step_enters_once_it_has_the_minimum_and_the_wait_is_estimated() -> None:
    small = [_stratum(100, 900, 50)]
    bound = mean_guard(small, 0.5, higher_is_worse=True, ratio=False, rollback_level=0.05,
                       current_share=0.1)  # fmt: skip
    assert bound.status is Status.UNDECIDED and bound.ci == (-math.inf, math.inf)
    assert bound.difference is not None  # the pooled description
    # At least what brings the step's treatment to the minimum at a 10 % split.
    assert bound.users_needed >= (MIN_USERS_FOR_MEANS - 100) / 0.1
    start = mean_guard([_twins(600)], 0.3, higher_is_worse=True, ratio=False,
                       rollback_level=0.05, current_share=0.5)  # fmt: skip
    assert start.status is Status.UNDECIDED and start.users_needed > 0
    for factor, status in ((1.33, Status.SAFE), (0.67, Status.UNDECIDED)):  # about what it takes
        per_arm = 600 + round(0.5 * factor * start.users_needed)
        grown = mean_guard([_twins(per_arm)], 0.3, higher_is_worse=True,
                           ratio=False, rollback_level=0.05, current_share=0.5)  # fmt: skip
        assert grown.status is status, factor
    assert mean_guard([], 0.3, higher_is_worse=True, ratio=False, rollback_level=0.05,
                      current_share=0.5).users_needed is None  # fmt: skip
