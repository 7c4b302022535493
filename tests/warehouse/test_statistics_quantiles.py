"""Quantile confidence sequences (p95 latency) and the comparison of two arms' quantiles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warehouse.statistics import (
    CONFIDENCE,
    MIN_USERS_WITH_FEEDBACK,
    Decision,
    QuantileSummary,
    WithheldReason,
    arm_confidence,
    compare_quantiles,
    quantile_ci_ranks,
    quantile_estimate_rank,
    quantile_summary,
)

P95 = 0.95
FIRST_BOUNDED_P95 = 174  # documented in docs/statistics.md


def test_arm_level_splits_the_error_between_the_two_arms() -> None:
    assert arm_confidence(CONFIDENCE) == pytest.approx(0.975)
    assert arm_confidence(0.9) == pytest.approx(0.95)


def test_ranks_take_the_comparison_level_and_split_it_themselves() -> None:
    """Asking for the comparison's 95 % gives each arm its 97.5 %: wider than a lone 95 %."""
    assert quantile_ci_ranks(5_000, P95) == quantile_ci_ranks(5_000, P95, CONFIDENCE)
    lone_lower, lone_upper = quantile_ci_ranks(5_000, P95, confidence=0.9)  # arm at 95 %
    lower, upper = quantile_ci_ranks(5_000, P95, confidence=0.95)  # arm at 97.5 %
    assert lower < lone_lower and lone_upper < upper


@pytest.mark.parametrize("n", [0, 1, 2, 10, 100, FIRST_BOUNDED_P95 - 1])
def test_too_few_users_cannot_bound_a_p95(n: int) -> None:
    assert quantile_ci_ranks(n, P95) is None


def test_every_sample_from_the_first_bounded_one_on_is_bounded() -> None:
    assert all(quantile_ci_ranks(n, P95) is not None for n in range(FIRST_BOUNDED_P95, 3_000))
    assert FIRST_BOUNDED_P95 < MIN_USERS_WITH_FEEDBACK  # every arm past the minimum has bounds


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_ranks_bracket_the_estimate_inside_the_sample(q: float) -> None:
    """So the estimate (nearest rank, or DuckDB's interpolated ``quantile_cont``) lies within
    its bounds, and the difference of two arms' estimates within the comparison's interval."""
    bounded = 0
    for n in [*range(1, 3_000), 12_345, 1_000_000]:
        ranks = quantile_ci_ranks(n, q)
        if ranks is None:
            continue
        bounded += 1
        lower, upper = ranks
        assert 0 <= lower <= quantile_estimate_rank(n, q) <= upper <= n - 1
        interpolated_between = (math.floor((n - 1) * q), math.ceil((n - 1) * q))  # quantile_cont
        assert lower <= interpolated_between[0] <= interpolated_between[1] <= upper
    assert bounded > 2_000


def test_ranks_close_in_on_the_quantile_as_users_accumulate() -> None:
    widths = []
    for n in (1_000, 10_000, 100_000, 1_000_000):
        lower, upper = quantile_ci_ranks(n, P95)
        assert lower / n < P95 < (upper + 1) / n
        widths.append((upper - lower) / n)
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < 0.002


def test_higher_confidence_gives_wider_ranks() -> None:
    lower_95, upper_95 = quantile_ci_ranks(5_000, P95, 0.95)
    lower_99, upper_99 = quantile_ci_ranks(5_000, P95, 0.99)
    assert lower_99 < lower_95 and upper_95 < upper_99


def test_bounds_hold_at_every_n_simultaneously() -> None:
    """The sequence is exact: simulate the count of values below the true p95 (Binomial, one
    user at a time) and check it never leaves the accepted range more often than alpha."""
    rng = np.random.default_rng(3)
    users, paths = 4_000, 2_000
    below_truth = np.cumsum(rng.random((paths, users)) < P95, axis=1)
    n = np.arange(1, users + 1)
    ranks = [quantile_ci_ranks(int(k), P95) for k in n]
    bounded = np.array([r is not None for r in ranks])
    lower = np.array([r[0] if r else -1 for r in ranks])
    upper = np.array([r[1] if r else users for r in ranks])
    # The truth is in [values[lower], values[upper]] iff lower + 1 <= count <= upper.
    missed = bounded & ((below_truth < lower + 1) | (below_truth > upper))
    alpha = 1 - arm_confidence(CONFIDENCE)
    assert missed.any(axis=1).mean() <= alpha + 3 * math.sqrt(alpha / paths)


def test_estimate_rank_is_the_nearest_rank_quantile() -> None:
    assert quantile_estimate_rank(100, P95) == 94
    assert quantile_estimate_rank(20, P95) == 18
    assert quantile_estimate_rank(1, P95) == 0
    assert quantile_estimate_rank(0, P95) is None


@pytest.mark.parametrize("q", [0.0, 1.0, -0.5, 1.5])
def test_a_quantile_outside_the_open_unit_interval_is_rejected(q: float) -> None:
    with pytest.raises(ValueError):
        quantile_ci_ranks(100, q)


def test_summary_of_a_tiny_arm_has_an_estimate_but_no_bounds() -> None:
    summary = quantile_summary([10.0, 20.0, 30.0], P95)
    assert summary == QuantileSummary(3, 30.0, None, None, CONFIDENCE)


def test_summary_refuses_unsorted_values() -> None:
    with pytest.raises(ValueError):
        quantile_summary([3.0, 1.0, 2.0], P95)


def lognormal_arm(n: int, scale: float, seed: int) -> QuantileSummary:
    values = np.sort(scale * np.random.default_rng(seed).lognormal(math.log(150), 0.6, n))
    return quantile_summary(values.tolist(), P95)


def test_slower_treatment_is_a_regression_with_interval_from_the_arm_bounds() -> None:
    treatment, control = lognormal_arm(2_000, 1.5, 1), lognormal_arm(2_000, 1.0, 2)
    comparison = compare_quantiles(treatment, control)
    assert comparison.decision == Decision.REGRESSION
    assert comparison.ci == (treatment.lower - control.upper, treatment.upper - control.lower)
    assert comparison.ci[0] <= comparison.difference <= comparison.ci[1]
    assert comparison.difference == treatment.estimate - control.estimate


def test_faster_treatment_is_an_improvement() -> None:
    comparison = compare_quantiles(lognormal_arm(2_000, 0.6, 3), lognormal_arm(2_000, 1.0, 4))
    assert comparison.decision == Decision.IMPROVEMENT


def test_same_distribution_is_inconclusive() -> None:
    comparison = compare_quantiles(lognormal_arm(3_000, 1.0, 5), lognormal_arm(3_000, 1.0, 6))
    assert comparison.decision == Decision.INCONCLUSIVE


def test_below_minimum_is_withheld() -> None:
    treatment = lognormal_arm(MIN_USERS_WITH_FEEDBACK - 1, 3.0, 7)
    comparison = compare_quantiles(treatment, lognormal_arm(5_000, 1.0, 8))
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == WithheldReason.BELOW_MINIMUM_SAMPLE
    assert comparison.ci is None
    assert comparison.difference is not None


def test_missing_bounds_are_withheld_not_guessed() -> None:
    unbounded = QuantileSummary(5_000, 400.0, None, None)
    comparison = compare_quantiles(unbounded, lognormal_arm(5_000, 1.0, 9))
    assert comparison.decision == Decision.WITHHELD
    assert comparison.reason == WithheldReason.QUANTILE_UNBOUNDED


def test_no_latency_at_all_is_withheld_without_a_difference() -> None:
    empty = QuantileSummary(0, None, None, None)
    comparison = compare_quantiles(empty, empty)
    assert comparison.decision == Decision.WITHHELD
    assert comparison.difference is None


def test_caller_reason_is_passed_through() -> None:
    comparison = compare_quantiles(
        lognormal_arm(2_000, 2.0, 10),
        lognormal_arm(2_000, 1.0, 11),
        withheld_reason=WithheldReason.SAMPLE_RATIO_MISMATCH,
    )
    assert (comparison.decision, comparison.reason) == (Decision.WITHHELD, "sample_ratio_mismatch")


def test_bounds_computed_for_another_level_are_refused() -> None:
    values = np.sort(np.random.default_rng(12).lognormal(5, 0.6, 1_000)).tolist()
    for_90 = quantile_summary(values, P95, confidence=0.9)
    with pytest.raises(ValueError):
        compare_quantiles(for_90, for_90)  # at the default 95 %
