"""The two-sample confidence sequence for a difference of quantiles (p95 latency)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warehouse.statistics import (
    MIN_USERS_WITH_FEEDBACK,
    ArmCells,
    Decision,
    WithheldReason,
    compare_quantiles,
    quantile_difference_interval,
)
from warehouse.statistics.quantiles import _mixture, quantile_estimate_rank

P95 = 0.95


def lognormal_arm(n: int, scale: float, seed: int) -> ArmCells:
    values = scale * np.random.default_rng(seed).lognormal(math.log(150), 0.6, n)
    return ArmCells.of_values(values, P95)


def test_slower_treatment_is_a_regression_whose_interval_holds_the_difference() -> None:
    treatment, control = lognormal_arm(2_000, 1.5, 1), lognormal_arm(2_000, 1.0, 2)
    comparison = compare_quantiles(treatment, control, P95)
    assert comparison.decision == Decision.REGRESSION
    assert comparison.difference == treatment.estimate - control.estimate
    assert comparison.ci[0] <= comparison.difference <= comparison.ci[1]
    true_difference = 0.5 * 150 * math.exp(1.6449 * 0.6)
    assert comparison.ci[0] <= true_difference <= comparison.ci[1]


def test_faster_treatment_is_an_improvement() -> None:
    comparison = compare_quantiles(lognormal_arm(2_000, 0.6, 3), lognormal_arm(2_000, 1.0, 4), P95)
    assert comparison.decision == Decision.IMPROVEMENT


def test_same_distribution_is_inconclusive() -> None:
    comparison = compare_quantiles(lognormal_arm(3_000, 1.0, 5), lognormal_arm(3_000, 1.0, 6), P95)
    assert comparison.decision == Decision.INCONCLUSIVE


def test_the_interval_is_narrower_than_the_union_of_two_one_arm_intervals() -> None:
    """The point of a two-sample sequence: widths combine in quadrature, not by adding."""
    treatment, control = lognormal_arm(3_000, 1.0, 7), lognormal_arm(3_000, 1.0, 8)
    low, high = quantile_difference_interval(treatment, control, P95)
    n = 3_000
    log_mixture = _mixture(n, P95, 0.025)  # each arm at half the error, as a union needs
    accepted = np.flatnonzero(log_mixture(np.arange(n + 1)) < math.log(1 / 0.025))
    arms = []
    for arm in (treatment, control):
        values = np.repeat(arm.lower, arm.counts)
        arms.append((values[accepted[0] - 1], values[accepted[-1]]))
    (t_low, t_high), (c_low, c_high) = arms
    assert high - low < 0.85 * ((t_high - c_low) - (t_low - c_high))


def test_the_interval_widens_as_confidence_rises() -> None:
    treatment, control = lognormal_arm(2_000, 1.1, 9), lognormal_arm(2_000, 1.0, 10)
    at_95 = quantile_difference_interval(treatment, control, P95, 0.95)
    at_99 = quantile_difference_interval(treatment, control, P95, 0.996)
    assert at_99[0] < at_95[0] and at_95[1] < at_99[1]


def test_below_minimum_is_withheld() -> None:
    treatment = lognormal_arm(MIN_USERS_WITH_FEEDBACK - 1, 3.0, 11)
    comparison = compare_quantiles(treatment, lognormal_arm(5_000, 1.0, 12), P95)
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == WithheldReason.BELOW_MINIMUM_SAMPLE
    assert comparison.ci is None
    assert comparison.difference is not None


def test_an_arm_too_small_to_bound_its_p95_is_withheld_not_guessed() -> None:
    """With 250 users in treatment, a p95 above all of them cannot be ruled out yet."""
    comparison = compare_quantiles(lognormal_arm(250, 1.0, 13), lognormal_arm(30_000, 1.0, 14), P95)
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == WithheldReason.QUANTILE_UNBOUNDED


def test_no_latency_at_all_is_withheld_without_a_difference() -> None:
    empty = ArmCells.of_values([], P95)
    comparison = compare_quantiles(empty, empty, P95)
    assert comparison.decision == Decision.WITHHELD
    assert comparison.difference is None


def test_caller_reason_is_passed_through() -> None:
    comparison = compare_quantiles(
        lognormal_arm(2_000, 2.0, 15),
        lognormal_arm(2_000, 1.0, 16),
        P95,
        withheld_reason=WithheldReason.SAMPLE_RATIO_MISMATCH,
    )
    assert (comparison.decision, comparison.reason) == (Decision.WITHHELD, "sample_ratio_mismatch")


def test_ties_and_cells_keep_the_interval_valid() -> None:
    """Many users on one value (a cell of zero width holding many) still bound the p95."""
    values = np.concatenate([np.full(1_900, 100.0), np.full(100, 500.0)])
    arm = ArmCells.of_values(values, P95)
    low, high = quantile_difference_interval(arm, arm, P95)
    assert low <= 0.0 <= high


def test_estimate_rank_is_the_nearest_rank_quantile() -> None:
    assert quantile_estimate_rank(20, P95) == 18
    assert quantile_estimate_rank(1, P95) == 0
    assert quantile_estimate_rank(0, P95) is None


@pytest.mark.parametrize("q", [0.0, 1.0, -0.5, 1.5])
def test_a_quantile_outside_the_open_unit_interval_is_rejected(q: float) -> None:
    arm = lognormal_arm(300, 1.0, 17)
    with pytest.raises(ValueError):
        quantile_difference_interval(arm, arm, q)


def first_bounded(confidence: float) -> int:
    """Treatment users from which the p95 difference is bounded against 30,000 control users."""
    rng = np.random.default_rng(1)
    control = ArmCells.of_values(rng.lognormal(5.0, 0.6, 30_000), P95)
    treatment = rng.lognormal(5.0, 0.6, 1_000)
    for n in range(MIN_USERS_WITH_FEEDBACK, 1_000):
        interval = quantile_difference_interval(
            ArmCells.of_values(treatment[:n], P95), control, P95, confidence
        )
        if all(math.isfinite(end) for end in interval):
            return n
    raise AssertionError("never bounded")


def test_a_small_arm_against_a_large_control_is_first_bounded_as_documented() -> None:
    """docs/statistics.md: 303 treatment users at 95 %, 314 at a guarded rollout's rollback
    level with three guardrails (98.33 %)."""
    assert first_bounded(0.95) == 303
    assert first_bounded(1 - 0.05 / 3) == 314
