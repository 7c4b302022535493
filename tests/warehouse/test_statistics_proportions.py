"""Failure rate and coverage comparisons: the interval, its decision and its edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from warehouse.statistics import (
    MIN_USERS_WITH_FEEDBACK,
    Decision,
    ProportionComparison,
    WithheldReason,
    compare_all_proportions,
    compare_proportions,
    difference_interval,
    difference_intervals,
    excludes_difference,
)
from warehouse.statistics.proportions import restricted_rates


def brute_force_restricted_rate(x_t: int, n_t: int, x_c: int, n_c: int, delta: float) -> float:
    """Treatment rate maximizing the likelihood given p_T - p_C = delta, on a fine grid."""
    grid = np.linspace(max(0.0, delta), min(1.0, 1.0 + delta), 400_001)[1:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_likelihood = (
            x_t * np.log(grid)
            + (n_t - x_t) * np.log1p(-grid)
            + x_c * np.log(grid - delta)
            + (n_c - x_c) * np.log1p(-(grid - delta))
        )
    return float(grid[np.nanargmax(log_likelihood)])


@pytest.mark.parametrize(
    ("x_t", "n_t", "x_c", "n_c", "delta"),
    [
        (50, 1000, 25, 1000, 0.0),
        (50, 1000, 25, 1000, 0.05),
        (3, 200, 40, 5000, -0.02),
        (0, 300, 0, 300, 0.01),
        (300, 300, 290, 300, 0.2),
        (17, 90, 2, 700, 0.3),
        (1, 10_000, 99, 100_000, -0.0005),
    ],
)
def test_restricted_rates_maximize_the_constrained_likelihood(x_t, n_t, x_c, n_c, delta) -> None:
    rate_t, rate_c = restricted_rates(x_t / n_t, n_t, x_c / n_c, n_c, delta)
    assert rate_t == pytest.approx(brute_force_restricted_rate(x_t, n_t, x_c, n_c, delta), abs=1e-5)
    assert rate_t - rate_c == pytest.approx(delta)


def test_restricted_rates_at_zero_difference_are_the_pooled_rate() -> None:
    rate_t, rate_c = restricted_rates(0.06, 1000, 0.02, 3000, 0.0)
    assert rate_t == pytest.approx((60 + 60) / 4000)
    assert rate_c == pytest.approx(rate_t)


def test_doubled_failure_rate_is_a_regression_with_the_truth_inside() -> None:
    comparison = compare_proportions(100, 1000, 50, 1000)
    assert comparison.decision == Decision.REGRESSION
    assert comparison.difference == 5.0
    lower, upper = comparison.ci
    assert 0 < lower < 5.0 < upper
    assert comparison.reason is None
    assert comparison.confidence == 0.95


def test_halved_failure_rate_is_an_improvement() -> None:
    assert compare_proportions(50, 1000, 100, 1000).decision == Decision.IMPROVEMENT


def test_equal_rates_are_inconclusive() -> None:
    comparison = compare_proportions(500, 10_000, 500, 10_000)
    assert comparison.decision == Decision.INCONCLUSIVE
    lower, upper = comparison.ci
    assert lower < 0 < upper
    assert lower == pytest.approx(-upper)


def test_lower_coverage_in_treatment_is_a_regression() -> None:
    lower_coverage = compare_proportions(700, 1000, 900, 1000, higher_is_worse=False)
    assert lower_coverage.decision == Decision.REGRESSION
    assert lower_coverage.difference == pytest.approx(-20.0)
    higher = compare_proportions(900, 1000, 700, 1000, higher_is_worse=False)
    assert higher.decision == Decision.IMPROVEMENT


def test_a_treatment_that_stops_reporting_is_caught_by_coverage() -> None:
    """Its users send no feedback at all: failure rate is withheld, coverage is not."""
    failure_rate = compare_proportions(0, 0, 50, 1000)
    coverage = compare_proportions(0, 1000, 1000, 1100, higher_is_worse=False)
    assert failure_rate.decision == Decision.WITHHELD
    assert coverage.decision == Decision.REGRESSION


def test_zero_users_is_withheld_without_numbers() -> None:
    comparison = compare_proportions(0, 0, 0, 0)
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == WithheldReason.BELOW_MINIMUM_SAMPLE
    assert comparison.difference is None
    assert comparison.ci is None


@pytest.mark.parametrize("treatment_n", [1, MIN_USERS_WITH_FEEDBACK - 1])
def test_below_minimum_is_withheld_with_reason_and_descriptive_difference(treatment_n) -> None:
    comparison = compare_proportions(treatment_n, treatment_n, 0, 50_000)
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == "below_minimum_sample"
    assert comparison.ci is None
    assert comparison.difference == 100.0


def test_at_the_minimum_the_decision_is_made() -> None:
    n = MIN_USERS_WITH_FEEDBACK
    assert compare_proportions(n, n, 0, n).decision == Decision.REGRESSION


def test_everyone_failing_in_both_arms_is_inconclusive() -> None:
    comparison = compare_proportions(1000, 1000, 1000, 1000)
    assert comparison.decision == Decision.INCONCLUSIVE
    assert comparison.difference == 0.0
    lower, upper = comparison.ci
    assert -100 <= lower < 0 < upper <= 100


def test_everyone_failing_in_treatment_only_is_bounded_by_100_points() -> None:
    comparison = compare_proportions(300, 300, 0, 300)
    assert comparison.decision == Decision.REGRESSION
    assert comparison.ci[1] == 100.0
    assert 90 < comparison.ci[0] < 100


def test_no_failures_anywhere_still_has_an_interval() -> None:
    comparison = compare_proportions(0, 5000, 0, 5000)
    assert comparison.decision == Decision.INCONCLUSIVE
    lower, upper = comparison.ci
    assert -1 < lower < 0 < upper < 1


def test_a_withheld_reason_from_the_caller_wins_over_any_effect() -> None:
    comparison = compare_proportions(
        900, 1000, 10, 1000, withheld_reason=WithheldReason.SAMPLE_RATIO_MISMATCH
    )
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == "sample_ratio_mismatch"
    assert comparison.ci is None
    assert comparison.difference == pytest.approx(89.0)


@pytest.mark.parametrize(
    ("counts", "confidence"),
    [
        ((5, 4, 0, 10), 0.95),
        ((-1, 10, 0, 10), 0.95),
        ((1, 10, 0, -10), 0.95),
        ((1, 10, 1, 10), 1.0),
    ],
)
def test_impossible_inputs_are_rejected(counts, confidence) -> None:
    with pytest.raises(ValueError):
        compare_proportions(*counts, confidence=confidence)


def test_swapping_arms_mirrors_the_interval() -> None:
    forward = compare_proportions(70, 1200, 40, 900)
    backward = compare_proportions(40, 900, 70, 1200)
    assert backward.ci == pytest.approx((-forward.ci[1], -forward.ci[0]))


def test_interval_narrows_with_users_and_widens_with_confidence() -> None:
    small = compare_proportions(60, 1000, 50, 1000).ci
    large = compare_proportions(600, 10_000, 500, 10_000).ci
    stricter = compare_proportions(60, 1000, 50, 1000, confidence=0.99).ci
    assert large[1] - large[0] < small[1] - small[0] < stricter[1] - stricter[0]


def test_always_valid_interval_is_wider_than_a_single_look_interval() -> None:
    """The price of reading at any time: wider than the fixed-horizon Wald interval, boundedly."""
    lower, upper = compare_proportions(100, 1000, 50, 1000).ci
    wald = 2 * 1.96 * 100 * np.sqrt(0.1 * 0.9 / 1000 + 0.05 * 0.95 / 1000)
    assert 1.1 < (upper - lower) / wald < 2.0


def test_interval_ends_are_where_the_sequence_starts_excluding() -> None:
    """On random counts: just inside each end is included, just outside is excluded, and the
    decision agrees with the test of 0 that the simulations count."""
    rng = np.random.default_rng(5)
    for _ in range(60):
        n_t, n_c = rng.integers(MIN_USERS_WITH_FEEDBACK, 20_000, 2)
        x_t, x_c = rng.binomial(n_t, rng.uniform(0, 0.3)), rng.binomial(n_c, rng.uniform(0, 0.3))
        lower, upper = difference_interval(x_t, n_t, x_c, n_c)
        estimate = x_t / n_t - x_c / n_c
        assert lower <= estimate <= upper
        probes = np.array([lower - 1e-6, lower + 1e-6, upper - 1e-6, upper + 1e-6])
        excluded = excludes_difference(x_t, n_t, x_c, n_c, probes)
        assert excluded.tolist() == [lower > -1, False, False, upper < 1]
        decision = compare_proportions(int(x_t), int(n_t), int(x_c), int(n_c)).decision
        zero_excluded = bool(excludes_difference(x_t, n_t, x_c, n_c, 0.0))
        assert (decision != Decision.INCONCLUSIVE) == zero_excluded


def _sampled_counts(count: int, seed: int) -> list[tuple[int, int, int, int]]:
    """Arms of every size from 1 to 5,000 users, rare to common rates, some far apart."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        n_t, n_c = (int(n) for n in rng.integers(1, 5_000, 2))
        rate = float(rng.choice([0.0005, 0.05, 0.5]))
        treatment_rate = min(1.0, rate * float(rng.uniform(0.5, 3.0)))
        cases.append(
            (int(rng.binomial(n_t, treatment_rate)), n_t, int(rng.binomial(n_c, rate)), n_c)
        )
    return [*cases, (0, 1, 0, 1), (1, 1, 0, 1), (0, 100, 100, 100), (3, 10_000, 0, 9_000)]


@pytest.mark.parametrize("confidence", [0.95, 0.9975])
def test_intervals_computed_together_are_each_the_one_computed_alone(confidence):
    """flag_health refines a hundred intervals in one vectorized pass: each must be exactly
    (to the last bit) the interval of its comparison alone, whatever its neighbours."""
    cases = _sampled_counts(300, seed=int(confidence * 10_000))
    together = difference_intervals(*zip(*cases, strict=True), confidence=confidence)
    alone = [difference_interval(*case, confidence=confidence) for case in cases]
    assert together == alone
    shuffled = cases[::-1]
    assert difference_intervals(*zip(*shuffled, strict=True), confidence=confidence) == alone[::-1]


def test_comparisons_made_together_are_each_the_one_made_alone():
    """Withheld ones (sample ratio, minimum sample) among them, both directions of harm."""
    requests = [
        ProportionComparison(*counts, higher_is_worse=bool(n % 3), withheld_reason=reason)
        for n, counts in enumerate(_sampled_counts(120, seed=5))
        for reason in ([WithheldReason.SAMPLE_RATIO_MISMATCH] if n % 7 == 0 else [None])
    ]
    together = compare_all_proportions(requests, confidence=0.99)
    alone = [
        compare_proportions(
            *r[:4], confidence=0.99, higher_is_worse=r.higher_is_worse,
            withheld_reason=r.withheld_reason,
        )
        for r in requests
    ]  # fmt: skip
    assert together == alone
    assert {c.decision for c in together} >= {
        Decision.WITHHELD,
        Decision.INCONCLUSIVE,
        Decision.REGRESSION,
    }
    assert compare_all_proportions([]) == []
