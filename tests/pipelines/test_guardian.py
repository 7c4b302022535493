"""The rollout guardian: its rules on single rows, and thousands of simulated rollouts.

The simulations (``rollout_simulation``) judge rollouts read by read with the package's own
comparisons at the rollout's level; a test below checks their vectorized rule against
``health_row`` and ``judge`` themselves on sampled reads. Seeds are fixed, so a failure is a
change in behaviour. The 2,000-rollout versions behind docs/statistics.md carry the
``simulation`` marker (``make simulations``).
"""

from __future__ import annotations

import numpy as np
import pytest

from api.controlplane.changes import (
    GUARDRAILS,
    Rollout,
    RolloutAction,
    RolloutPlan,
    RolloutState,
)
from pipelines.guardian import MAX_WAIT_SECONDS, judge
from pipelines.health import HEALTH_COLUMNS, ArmFigures, HealthInput, health_row, health_rows
from tests.pipelines.rollout_simulation import (
    A_A_SCENARIOS,
    COMPLETED,
    READ_SECONDS,
    ROLLED_BACK,
    STEPS,
    Scenario,
    judge_step,
    rebuild_histograms,
    run_rollouts,
    wilson,
)
from warehouse.statistics import rollout_confidence
from warehouse.statistics.histogram import LatencyHistogram

ROLLOUT_BUDGET = 0.05
LEVEL = rollout_confidence(STEPS, GUARDRAILS)


def _rollout(step: int = 0, started: float = 0.0, minutes: float = 60.0) -> Rollout:
    plan = RolloutPlan(STEPS, minutes, GUARDRAILS)
    return Rollout("env", "flag", plan, RolloutState.RUNNING, step, started, "")


def _row(
    treatment: ArmFigures,
    control: ArmFigures,
    percentage: float = 1.0,
    level: float | None = LEVEL,
) -> dict:
    values = health_row("org", "env", "flag", percentage, treatment, control, level)
    return {**dict(zip(HEALTH_COLUMNS, values, strict=True)), "computed_at": None}


def _arm(users: int, failed: int, latency_ms: float = 150.0, spread: int = 0) -> ArmFigures:
    rng = np.random.default_rng(users + failed)
    values = latency_ms * rng.lognormal(0.0, 0.5, users) if spread else [latency_ms] * users
    return ArmFigures(users, users, failed, LatencyHistogram.of_values(values))


# The rules on single rows ---------------------------------------------------------------------


def test_a_step_short_of_users_waits_past_its_time_and_says_why() -> None:
    health = _row(_arm(150, 0, spread=1), _arm(15_000, 3, spread=1))
    judgement = judge(_rollout(started=0.0), health, now=3_700.0)
    assert judgement.action is RolloutAction.WAIT and judgement.waiting
    assert "failureRate withheld (150 users with feedback in the smaller arm, 200 needed)" in (
        judgement.reason
    )


def test_before_its_time_a_step_waits_without_being_marked_waiting() -> None:
    health = _row(_arm(150, 0, spread=1), _arm(15_000, 3, spread=1))
    judgement = judge(_rollout(started=0.0), health, now=1_800.0)
    assert judgement.action is RolloutAction.WAIT and not judgement.waiting


def test_a_step_never_judged_is_held_a_day_after_its_time_not_advanced() -> None:
    health = _row(_arm(150, 0, spread=1), _arm(15_000, 3, spread=1))
    judgement = judge(_rollout(started=0.0), health, now=3_600.0 + MAX_WAIT_SECONDS)
    assert judgement.action is RolloutAction.HELD
    assert "not judged 24 h after its time" in judgement.reason


def test_a_judged_step_advances_once_its_time_has_passed() -> None:
    health = _row(_arm(400, 0, spread=1), _arm(40_000, 8, spread=1))
    assert judge(_rollout(started=0.0), health, now=3_600.0).action is RolloutAction.ADVANCED


def test_health_computed_without_the_rollouts_level_is_not_judged() -> None:
    health = _row(_arm(400, 0, spread=1), _arm(40_000, 8, spread=1), level=None)
    judgement = judge(_rollout(started=0.0), health, now=3_700.0)
    assert judgement.action is RolloutAction.WAIT and judgement.waiting
    assert "no release health computed at 1 % yet" in judgement.reason


def test_one_failing_treatment_user_in_a_1_percent_step_is_no_regression() -> None:
    """The case that rolled healthy releases back: 1 of 279 against 4 of 29,721."""
    health = _row(_arm(279, 1, spread=1), _arm(29_721, 4, spread=1))
    judgement = judge(_rollout(started=0.0), health, now=3_600.0)
    assert judgement.action is not RolloutAction.ROLLED_BACK
    assert health["failure_rate_guard_decision"] == "inconclusive"
    assert health["failure_rate_decision"] == "inconclusive"  # at 95 % too


def test_a_treatment_failing_one_user_in_eight_is_rolled_back() -> None:
    health = _row(_arm(300, 38, spread=1), _arm(30_000, 30, spread=1))
    judgement = judge(_rollout(started=0.0), health, now=600.0)
    assert judgement.action is RolloutAction.ROLLED_BACK
    assert judgement.reason.startswith("regression on failureRate (treatment - control +12.6,")
    assert f"{100 * LEVEL:.4g} % confidence sequence" in judgement.reason


# The simulation's rule is the guardian's ----------------------------------------------------


def test_the_simulated_rule_is_what_health_row_and_judge_decide() -> None:
    """On sampled reads of a step with some regressions, the vectorized flags agree with the
    real row and judgement built from the same users (histograms rebuilt from the draws)."""
    scenario = Scenario(200_000, 60, 0.05, 0.058, treatment_slowdown=1.06)
    share, seed = 0.5, (99, 3)
    step = judge_step(np.random.default_rng(5), scenario, share, 40, seed)
    rng = np.random.default_rng(6)
    rows = rng.integers(0, 40, 120)
    columns = rng.integers(step.due, step.regression.shape[1], 120)
    reads, agreed, regressions = step.reads, 0, 0
    for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
        treatment, control, model = rebuild_histograms(
            reads, row, column, scenario.treatment_slowdown, seed
        )
        arms = []
        for counts, users, feedback, failed in (
            (treatment, reads.users_t, reads.feedback_t, reads.failed_t),
            (control, reads.users_c, reads.feedback_c, reads.failed_c),
        ):
            present = counts > 0
            histogram = LatencyHistogram.of_sorted(
                model.buckets[present].tolist(), counts[present].tolist()
            )
            figures = (int(users[row, column]), int(feedback[row, column]))
            arms.append(ArmFigures(*figures, int(failed[row, column]), histogram))
        health = _row(*arms, percentage=100 * share)
        if health["sample_ratio_mismatch"]:
            continue  # the simulation leaves the hold out (it never rolls back)
        now = (column + 1) * READ_SECONDS
        action = judge(_rollout(step=3, started=0.0), health, now).action  # 50 % -> 100 %
        regressed = step.proportion_regression[row, column] or step.p95_regression(row, column)
        if regressed:
            expected = RolloutAction.ROLLED_BACK
        else:
            expected = RolloutAction.COMPLETED if step.judged[row, column] else RolloutAction.WAIT
        assert action is expected, (row, column)
        agreed += 1
        regressions += regressed
    assert agreed >= 100
    assert 5 < regressions < agreed - 5  # the sample exercises both outcomes


# Thousands of rollouts -------------------------------------------------------------------


def _rolled_back(scenario: Scenario, rollouts: int, seed: int) -> tuple[float, float]:
    states = run_rollouts(scenario, rollouts, seed)["state"]
    count = int((states == ROLLED_BACK).sum())
    assert (states == COMPLETED).mean() >= 0.95  # healthy rollouts get to 100 %
    return count / rollouts, wilson(count, rollouts)[1]


@pytest.mark.parametrize("scenario", A_A_SCENARIOS, ids=lambda s: s.describe())
def test_a_a_rollouts_are_rarely_rolled_back(scenario: Scenario) -> None:
    rate, upper = _rolled_back(scenario, rollouts=400, seed=11)
    assert upper <= ROLLOUT_BUDGET, f"rolled back {rate:.2%} (upper bound {upper:.2%})"


@pytest.mark.simulation
@pytest.mark.parametrize("scenario", A_A_SCENARIOS, ids=lambda s: s.describe())
def test_two_thousand_a_a_rollouts_are_rolled_back_at_most_5_percent(scenario: Scenario) -> None:
    rate, upper = _rolled_back(scenario, rollouts=2_000, seed=1)
    assert upper <= ROLLOUT_BUDGET, f"rolled back {rate:.2%} (upper bound {upper:.2%})"


def test_a_treatment_failing_one_user_in_eight_rolls_back_within_the_1_percent_step() -> None:
    result = run_rollouts(Scenario(200_000, 60, 0.001, 0.125), rollouts=300, seed=12)
    assert (result["state"] == ROLLED_BACK).all()
    assert (result["step"] == 0).all()


def test_a_failure_rate_doubling_is_rolled_back() -> None:
    result = run_rollouts(Scenario(200_000, 60, 0.05, 0.10), rollouts=300, seed=13)
    assert (result["state"] == ROLLED_BACK).all()


def test_a_p95_half_as_slow_again_is_rolled_back() -> None:
    result = run_rollouts(Scenario(200_000, 60, 0.01, treatment_slowdown=1.5), 100, seed=14)
    assert (result["state"] == ROLLED_BACK).all()


def test_health_rows_computed_together_are_each_the_row_computed_alone() -> None:
    """flag_health computes every dirty flag's rows in one call (their intervals refined
    together); guard levels differ from flag to flag, some flags have none."""
    levels = [None, 0.999, 0.9975, 0.999, None, 0.9975]
    inputs = [
        HealthInput(
            "org", f"env-{n}", "flag", 10.0 + n,
            _arm(400 + 37 * n, 8 + 5 * n, spread=n % 2),
            _arm(4_000 - 97 * n, 40 + n, latency_ms=140.0, spread=1),
            level,
        )
        for n, level in enumerate(levels)
    ]  # fmt: skip
    assert health_rows(inputs) == [health_row(*i) for i in inputs]
