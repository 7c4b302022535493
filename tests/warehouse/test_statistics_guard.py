"""The guard of a guarded rollout (``warehouse.statistics.guard``): its one-sided tests, its
strata, its intervals and its estimate of the users still needed. Error rates over whole
rollouts are measured in ``tests/pipelines/test_guardian.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warehouse.statistics import ArmCells
from warehouse.statistics.boundaries import information_for_radius
from warehouse.statistics.guard import (
    GuardBound,
    Status,
    proportion_guard,
    quantile_guard,
    rejects,
    rollback_alpha,
    strata_of,
)

ROLLBACK = rollback_alpha(3)
P95 = 0.95


def failure(strata, tolerance: float = 1.0, share: float = 0.1) -> GuardBound:
    return proportion_guard(
        strata_of(*strata), tolerance, higher_is_worse=True, rollback_level=ROLLBACK,
        current_share=share,
    )  # fmt: skip


def coverage(strata, tolerance: float = 5.0, share: float = 0.1) -> GuardBound:
    return proportion_guard(
        strata_of(*strata), tolerance, higher_is_worse=False, rollback_level=ROLLBACK,
        current_share=share,
    )  # fmt: skip


def test_the_rollback_budget_is_split_over_the_guardrails_only() -> None:
    assert rollback_alpha(3) == pytest.approx(0.05 / 3)
    assert rollback_alpha(1) == 0.05
    assert rollback_alpha(0) == 0.05


@pytest.mark.parametrize(("failing", "status"), [(2, Status.UNDECIDED), (3, Status.REGRESSION)])
def test_three_treatment_users_all_failing_are_a_regression(failing: int, status) -> None:
    """docs/statistics.md: against 100 failures among 10,000 control users."""
    assert failure(([failing], [failing], [100], [10_000])).status is status


def test_a_rare_failure_in_a_small_arm_shows_nothing_either_way() -> None:
    bound = failure(([1], [279], [4], [29_721]), share=0.01)
    assert bound.status is Status.UNDECIDED
    assert bound.ci[0] < 0 < bound.ci[1]
    assert bound.users_needed is not None and bound.users_needed > 10_000


@pytest.mark.parametrize(
    "strata",
    [
        ([30], [3_000], [300], [30_000]),
        ([60], [3_000], [300], [30_000]),
        ([45, 500], [3_000, 20_000], [300, 500], [30_000, 20_000]),
        ([1], [50], [10], [5_000]),
        ([0], [0], [10], [5_000]),
    ],
)
def test_the_interval_ends_say_what_the_status_says(strata) -> None:
    bound = failure(strata)
    low, high = bound.ci
    assert (bound.status is Status.REGRESSION) == (low > 0)
    assert (bound.status is Status.SAFE) == (high < bound.tolerance)
    shown = coverage(strata, tolerance=1.0)  # the same counts as "users with feedback"
    low, high = shown.ci
    assert (shown.status is Status.REGRESSION) == (high < 0)
    assert (shown.status is Status.SAFE) == (low > -shown.tolerance)


def test_a_drifting_rate_between_steps_is_no_difference_between_the_arms() -> None:
    """Step 1: a 10 % split at night, 1 % failing in both arms; step 2: 50 % by day, 5 % in
    both. Pooled, treatment looks worse (more of its users came by day); by step, it is not."""
    strata = ([30, 1_000], [3_000, 20_000], [270, 1_000], [27_000, 20_000])
    pooled = [[sum(column)] for column in strata]
    kwargs = {"alpha": ROLLBACK, "above": True, "mixing_sd": 0.01}
    assert rejects(*pooled, 0.0, **kwargs)
    assert not rejects(*strata, 0.0, **kwargs)
    assert failure(strata).status is not Status.REGRESSION


def test_rejects_is_vectorized_over_experiments() -> None:
    rng = np.random.default_rng(3)
    n_t = rng.integers(1, 3_000, (40, 3))
    n_c = rng.integers(1, 30_000, (40, 3))
    x_t, x_c = rng.binomial(n_t, 0.02), rng.binomial(n_c, 0.015)
    for above, delta in ((True, 0.0), (False, 0.01)):
        together = rejects(x_t, n_t, x_c, n_c, delta, alpha=0.05, above=above, mixing_sd=0.01)
        one_by_one = [
            bool(rejects(x_t[i], n_t[i], x_c[i], n_c[i], delta, alpha=0.05, above=above,
                         mixing_sd=0.01))
            for i in range(40)
        ]  # fmt: skip
        assert together.tolist() == one_by_one


def test_a_mixing_spread_at_the_tolerance_needs_less_information() -> None:
    """docs/statistics.md: at a 1 pp tolerance, 0.76 times what a 5-point spread needs."""
    alpha = 2 * 0.8 * 0.05
    ratio = information_for_radius(0.01, 0.01**2, alpha) / information_for_radius(
        0.01, 0.05**2, alpha
    )
    assert round(ratio, 2) == 0.76


def _healthy(users: int, share: float = 0.1, rate: float = 0.01) -> GuardBound:
    n_t = round(users * share)
    n_c = users - n_t
    return failure(([round(n_t * rate)], [n_t], [round(n_c * rate)], [n_c]), share=share)


def test_the_users_still_needed_are_about_what_it_takes() -> None:
    """At the estimate's own assumptions (both arms at their rate), a third more than the users
    it asks for shows safety and a third fewer does not."""
    start = 5_000
    needed = _healthy(start).users_needed
    assert needed is not None and needed > 0
    assert _healthy(start + round(needed * 1.33)).status is Status.SAFE
    assert _healthy(start + round(needed * 0.67)).status is Status.UNDECIDED
    assert _healthy(start + 2 * needed).users_needed is None  # shown by then


def test_no_estimate_when_the_estimate_is_beyond_the_tolerance() -> None:
    bound = failure(([40], [2_000], [200], [20_000]), tolerance=0.5)  # +1 pp, 0.5 pp accepted
    assert bound.status is not Status.SAFE and bound.users_needed is None


def _latencies(n: int, slowdown: float = 1.0, seed: int = 0) -> ArmCells:
    values = 150.0 * slowdown * np.random.default_rng(seed).lognormal(0.0, 0.5, n)
    return ArmCells.of_values(values, P95)


@pytest.mark.parametrize(("slowdown", "status"), [(1.0, Status.SAFE), (1.5, Status.REGRESSION)])
def test_the_p95_guard_on_large_arms(slowdown: float, status) -> None:
    bound = quantile_guard(
        _latencies(20_000, slowdown, 1), _latencies(20_000, 1.0, 2), P95, 50.0,
        rollback_level=ROLLBACK, current_share=0.5,
    )  # fmt: skip
    assert bound.status is status
    assert (bound.ci[0] > 0) == (status is Status.REGRESSION)
    assert (bound.ci[1] < 50.0) == (status is Status.SAFE)


def test_the_p95_guard_on_small_arms_waits_and_says_how_long() -> None:
    bound = quantile_guard(
        _latencies(400, 1.0, 3), _latencies(20_000, 1.0, 4), P95, 50.0,
        rollback_level=ROLLBACK, current_share=0.1,
    )  # fmt: skip
    assert bound.status is Status.UNDECIDED
    assert math.isfinite(bound.ci[1]) and bound.ci[1] >= 50.0
    assert bound.users_needed is not None and bound.users_needed > 0
    empty = quantile_guard(
        ArmCells.of_values([], P95), _latencies(100), P95, 50.0, rollback_level=ROLLBACK,
        current_share=0.1,
    )  # fmt: skip
    assert empty.status is Status.UNDECIDED and empty.ci == (-math.inf, math.inf)


def test_at_a_steps_start_the_p95_estimate_plans_from_the_control_arm() -> None:
    """With no treatment user yet, the estimate plans both arms like the control seen so far,
    and is about what it takes: fresh arms of twice the users it asks for are shown safe, of
    half of them mostly not."""
    control = _latencies(20_000, 1.0, 4)
    start = quantile_guard(ArmCells.of_values([], P95), control, P95, 50.0,
                           rollback_level=ROLLBACK, current_share=0.1)  # fmt: skip
    assert start.ci == (-math.inf, math.inf) and start.users_needed is not None

    def shown_safe(factor: float, seed: int) -> bool:
        more = round(start.users_needed * factor)
        bound = quantile_guard(
            _latencies(round(more * 0.1), 1.0, 10 + seed),
            _latencies(20_000 + round(more * 0.9), 1.0, 20 + seed), P95, 50.0,
            rollback_level=ROLLBACK, current_share=0.1,
        )  # fmt: skip
        return bound.status is Status.SAFE

    assert all(shown_safe(2.0, seed) for seed in range(4))
    assert sum(shown_safe(0.5, seed) for seed in range(4)) <= 1


def test_with_treatment_users_the_p95_estimate_follows_them() -> None:
    """The next users planned like those the arm has: 1,000 treatment users whose p95 is
    near control's, their upper end just above the tolerance, need a few more; a treatment
    whose own p95 is 30 % slower (beyond the 50 ms) gets no number, as none would do."""
    control = _latencies(20_000, 1.0, 4)
    near = quantile_guard(_latencies(1_000, 1.0, 3), control, P95, 50.0, rollback_level=ROLLBACK,
                          current_share=0.1)  # fmt: skip
    assert near.status is Status.UNDECIDED and near.ci[1] > 50.0
    assert near.users_needed is not None and near.users_needed < 2_000
    slow = quantile_guard(_latencies(300, 1.2, 3), control, P95, 50.0, rollback_level=ROLLBACK,
                          current_share=0.1)  # fmt: skip
    assert slow.status is Status.UNDECIDED and slow.users_needed is None


def test_an_arm_without_users_yet_gets_an_estimate_from_what_was_seen() -> None:
    """A step's first minutes: the control arm has users, the treatment none yet."""
    assert failure(([0], [0], [100], [10_000]), share=0.01).users_needed is not None
    assert failure(([0], [0], [0], [0]), share=0.01).users_needed is None  # nothing to plan on
    p95 = quantile_guard(ArmCells.of_values([], P95), _latencies(5_000), P95, 50.0,
                         rollback_level=ROLLBACK, current_share=0.01)  # fmt: skip
    assert p95.status is Status.UNDECIDED and p95.users_needed is not None
