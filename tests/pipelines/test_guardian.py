"""The rollout guardian: its rules on single rollouts, and thousands of simulated rollouts.

The simulations (``rollout_simulation``) judge rollouts read by read with the guard's own
tests; a test below checks their vectorized rule against ``evidence_of`` and ``judge``
themselves on sampled reads. Seeds are fixed, so a failure is a change in behaviour. The
2,000-rollout versions behind docs/statistics.md carry the ``simulation`` marker
(``make simulations``).
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
from api.controlplane.resources.rollouts import NO_SPLIT_TO_MOVE
from pipelines.guard_evidence import evidence_of
from pipelines.guardian import MAX_WAIT_SECONDS, judge
from pipelines.health import ArmFigures, health_row
from tests.pipelines.rollout_simulation import (
    HOURLY,
    PLANS,
    ROLLED_BACK,
    TRAFFIC,
    Rollouts,
    Scenario,
    _arrive,
    latency_model,
    p95_interval_end,
    p95_regression,
    proportion_shown,
    regressions,
    run_rollouts,
    summarize,
    true_p95_difference,
)
from warehouse.read import RolloutArms
from warehouse.statistics.guard import GuardBound, Status
from warehouse.statistics.histogram import LatencyHistogram

BUDGET = 0.05
STEPS = (1.0, 5.0, 25.0, 50.0, 100.0)


def _rollout(step: int = 0, started: float = 0.0, minutes: float = 60.0, **tolerances) -> Rollout:
    plan = RolloutPlan(STEPS, minutes, GUARDRAILS, tuple(sorted(tolerances.items())))
    return Rollout("env", "flag", plan, RolloutState.RUNNING, step, started, "")


def _latencies(users: int, median: float, seed: int) -> list[float]:
    return list(median * np.random.default_rng(seed).lognormal(0.0, 0.5, users))


def _arms(
    steps: list[tuple[int, int, int, int]],
    rollout: Rollout,
    treatment_ms: float = 150.0,
    coverage: float = 1.0,
) -> RolloutArms:
    """A rollout's arms: per step (treatment users, failed, control users, failed), every
    user with feedback at ``coverage`` and a log-normal latency."""
    percentages = rollout.plan.steps[: len(steps)]
    totals = {}
    for percentage, (n_t, f_t, n_c, f_c) in zip(percentages, steps, strict=True):
        totals[(percentage, "treatment")] = (n_t, round(n_t * coverage), f_t)
        totals[(percentage, "control")] = (n_c, round(n_c * coverage), f_c)
    n_t, n_c = sum(s[0] for s in steps), sum(s[2] for s in steps)
    latency = {}
    for arm, n, median in (("treatment", n_t, treatment_ms), ("control", n_c, 150.0)):
        histogram = LatencyHistogram.of_values(_latencies(round(n * coverage), median, n))
        latency[arm] = ([b for b, _ in histogram.buckets], [u for _, u in histogram.buckets])
    return RolloutArms(percentages, totals, latency)


def _health(rollout: Rollout, treatment: int, control: int) -> dict:
    arm = ArmFigures(treatment, treatment, 0, LatencyHistogram(()))
    other = ArmFigures(control, control, 0, LatencyHistogram(()))
    return health_row("org", "env", "flag", rollout.percentage, arm, other)


def _judge(rollout: Rollout, steps, now: float, **arms_options):
    evidence = evidence_of(_arms(steps, rollout, **arms_options), rollout)
    n_t, _, n_c, _ = steps[-1]
    return judge(rollout, _health(rollout, n_t, n_c), evidence, now), evidence


# The rules on single rollouts -----------------------------------------------------------------


def test_a_step_not_yet_shown_safe_waits_past_its_time_and_says_what_it_needs() -> None:
    judgement, evidence = _judge(_rollout(), [(300, 3, 30_000, 300)], now=3_700.0)
    assert judgement.action is RolloutAction.WAIT and judgement.waiting
    assert "Failure rate not yet shown within 1 pp" in judgement.reason
    assert f"about {evidence['failureRate'].users_needed:,} more users at 1 %" in judgement.reason
    assert evidence["failureRate"].users_needed > 10_000
    shown = judgement.guard["guardrails"]["failureRate"]
    assert shown["status"] == "undecided" and shown["usersNeeded"] > 10_000
    assert shown["users"] == {"treatment": 300, "control": 30_000}


def test_one_more_user_needed_is_said_in_the_singular() -> None:
    rollout = _rollout()
    safe = GuardBound(1.0, 0.0, (-0.5, 0.5), Status.SAFE, 300, 30_000, None)
    almost = GuardBound(1.0, 0.2, (-0.9, 1.01), Status.UNDECIDED, 300, 30_000, 1)
    evidence = {g: almost if g == "failureRate" else safe for g in GUARDRAILS}
    judgement = judge(rollout, _health(rollout, 300, 30_000), evidence, now=3_700.0)
    assert judgement.reason.endswith(": about 1 more user at 1 %"), judgement.reason


def test_before_its_time_a_step_waits_without_being_marked_waiting() -> None:
    judgement, _ = _judge(_rollout(), [(300, 3, 30_000, 300)], now=1_800.0)
    assert judgement.action is RolloutAction.WAIT and not judgement.waiting


def test_a_step_never_shown_safe_is_held_four_weeks_after_its_time_not_advanced() -> None:
    judgement, _ = _judge(_rollout(), [(300, 3, 30_000, 300)], now=3_600.0 + MAX_WAIT_SECONDS)
    assert judgement.action is RolloutAction.HELD
    assert "not shown safe 28 days after its time" in judgement.reason


def test_a_step_shown_safe_advances_once_its_time_has_passed() -> None:
    steps = [(6_000, 60, 600_000, 6_000)]
    early, evidence = _judge(_rollout(), steps, now=1_800.0)
    assert {g: b.status for g, b in evidence.items()} == dict.fromkeys(GUARDRAILS, Status.SAFE)
    assert early.action is RolloutAction.WAIT
    judgement, _ = _judge(_rollout(), steps, now=3_600.0)
    assert judgement.action is RolloutAction.ADVANCED
    assert judgement.reason.endswith("1 % -> 5 %")


def test_the_guardian_moves_the_split_only_from_where_the_rollout_set_it() -> None:
    """Shown safe and due, but a person moved the split to 0 % (a kill switch): the rollout
    waits, recorded, and says why. The percentage rule taken away: it is held."""
    rollout, steps = _rollout(), [(6_000, 60, 600_000, 6_000)]
    evidence = evidence_of(_arms(steps, rollout), rollout)
    health = _health(rollout, 6_000, 600_000)
    assert judge(rollout, health, evidence, 3_600.0, split=1.0).action is RolloutAction.ADVANCED
    moved = judge(rollout, health, evidence, 3_600.0, split=0.0)
    assert (moved.action, moved.waiting, moved.paused) == (RolloutAction.WAIT, True, True)
    assert moved.reason.startswith(
        "a person moved the flag's split to 0 %, where the rollout set 1 %"
    )
    alike = judge(rollout, health, evidence, 3_600.0, split=1.000000001)  # served as 1 %
    assert alike.action is RolloutAction.ADVANCED
    gone = judge(rollout, health, evidence, 3_600.0, split=None)
    assert (gone.action, gone.reason) == (RolloutAction.HELD, NO_SPLIT_TO_MOVE)


def test_evidence_is_kept_across_steps() -> None:
    """Neither step alone shows the failure rate within 1 pp; both together do."""
    first, second = (1_500, 15, 150_000, 1_500), (1_000, 10, 19_000, 190)
    for steps in ([first], [second]):
        rollout = _rollout(step=len(steps) - 1) if steps == [first] else _rollout(step=0)
        _, alone = _judge(rollout, steps, now=3_600.0)
        assert alone["failureRate"].status is Status.UNDECIDED
    _, together = _judge(_rollout(step=1), [first, second], now=3_600.0)
    assert together["failureRate"].status is Status.SAFE


def test_a_step_is_judged_only_once_health_is_computed_at_its_percentage() -> None:
    rollout = _rollout()
    evidence = evidence_of(_arms([(6_000, 60, 600_000, 6_000)], rollout), rollout)
    elsewhere = _health(_rollout(step=1), 6_000, 600_000)
    judgement = judge(rollout, elsewhere, evidence, now=3_700.0)
    assert judgement.action is RolloutAction.WAIT and judgement.waiting
    assert "no release health computed at 1 % yet" in judgement.reason


def test_one_failing_treatment_user_in_a_1_percent_step_is_no_regression() -> None:
    """The case that rolled healthy releases back: 1 of 279 against 4 of 29,721."""
    judgement, evidence = _judge(_rollout(), [(279, 1, 29_721, 4)], now=3_600.0)
    assert judgement.action is not RolloutAction.ROLLED_BACK
    assert evidence["failureRate"].status is Status.UNDECIDED


def test_a_treatment_failing_one_user_in_eight_is_rolled_back_before_its_time() -> None:
    judgement, _ = _judge(_rollout(), [(300, 38, 30_000, 30)], now=600.0)
    assert judgement.action is RolloutAction.ROLLED_BACK
    assert judgement.reason.startswith("regression: Failure rate (treatment - control +12.6 pp")


def test_a_release_failing_every_user_is_rolled_back_from_a_handful_of_users() -> None:
    judgement, _ = _judge(_rollout(), [(4, 4, 400, 4)], now=60.0)
    assert judgement.action is RolloutAction.ROLLED_BACK


def test_a_treatment_that_stops_reporting_is_a_coverage_regression() -> None:
    rollout = _rollout()
    arms = _arms([(400, 0, 40_000, 0)], rollout)
    treatment = arms.totals[(1.0, "treatment")]
    arms.totals[(1.0, "treatment")] = (treatment[0], 300, 0)  # 75 % coverage against 100 %
    evidence = evidence_of(arms, rollout)
    assert evidence["coverage"].status is Status.REGRESSION
    assert evidence["coverage"].ci[1] < 0


def test_tolerances_are_the_rollouts() -> None:
    """A +0.5 pp failure rate at 50 % is within a 1 pp tolerance and beyond a 0.25 pp one."""
    steps = [(40_000, 600, 40_000, 400)]
    loose = evidence_of(_arms(steps, _rollout(step=3)), _rollout(step=3))
    strict = _rollout(step=3, failureRate=0.25)
    tight = evidence_of(_arms(steps, strict), strict)
    assert loose["failureRate"].tolerance == 1.0 and tight["failureRate"].tolerance == 0.25
    assert loose["failureRate"].status is Status.REGRESSION  # +0.5 pp is shown, so it acts
    assert tight["failureRate"].users_needed is None  # the estimate is beyond 0.25 pp


# The simulation's rule is the guardian's ----------------------------------------------------


def test_the_simulations_decisions_are_the_guardians_on_sampled_reads() -> None:
    """Rollouts advanced by hand through three steps, read after every read: each read's
    regression and safety tests, as the simulation computes them, against ``evidence_of``."""
    scenario = Scenario(400_000, treatment_slowdown=1.12, treatment_failure=0.0125)
    r = Rollouts(scenario, 24)
    rng = np.random.default_rng(5)
    compared = 0
    for read in range(1, 61):
        rows = np.arange(r.count)
        _arrive(rng, r, rows)
        if read in (20, 40):
            r.step += 1
        if read % 6:
            continue
        regression = proportion_shown(r, rows, "failureRate", regression=True)
        safe = proportion_shown(r, rows, "failureRate", regression=False)
        coverage_regression = proportion_shown(r, rows, "coverage", regression=True)
        coverage_safe = proportion_shown(r, rows, "coverage", regression=False)
        p95_back = p95_regression(r, rows)
        for row in range(0, r.count, 3):
            rollout = Rollout(
                "env", "flag", RolloutPlan(scenario.steps, 10.0, GUARDRAILS),
                RolloutState.RUNNING, int(r.step[row]), 0.0, "",
            )  # fmt: skip
            evidence = evidence_of(_simulated_arms(r, row, rollout), rollout)
            failure, coverage = evidence["failureRate"].status, evidence["coverage"].status
            assert (failure is Status.REGRESSION) == regression[row]
            assert (failure is Status.SAFE) == (safe[row] and not regression[row])
            assert (coverage is Status.REGRESSION) == coverage_regression[row]
            assert (coverage is Status.SAFE) == (
                coverage_safe[row] and not coverage_regression[row]
            )
            p95 = evidence["latencyP95Ms"]
            assert (p95.status is Status.REGRESSION) == p95_back[row]
            upper = p95_interval_end(r, row, regression=False)
            assert p95.ci[1] == pytest.approx(upper)
            compared += 1
    assert compared == 10 * 8


def _simulated_arms(r: Rollouts, row: int, rollout: Rollout) -> RolloutArms:
    model = latency_model()
    percentages = rollout.plan.steps[: rollout.step + 1]
    totals = {
        (percentage, arm): (int(r.users[a, row, k]), int(r.feedback[a, row, k]),
                            int(r.failed[a, row, k]))
        for k, percentage in enumerate(percentages)
        for a, arm in enumerate(("treatment", "control"))
    }  # fmt: skip
    latency = {}
    for a, arm in enumerate(("treatment", "control")):
        present = r.histograms[a, row] > 0
        latency[arm] = (
            [int(b) for b in model.buckets[present]],
            [int(u) for u in r.histograms[a, row][present]],
        )
    return RolloutArms(percentages, totals, latency)


# Error rates ----------------------------------------------------------------------------------


@pytest.mark.parametrize("users", [200_000, 20_000], ids=lambda u: f"{u:,} users a day")
def test_healthy_rollouts_are_rolled_back_at_most_5_percent_and_complete(users: int) -> None:
    summary = summarize(Scenario(users), rollouts=200, seed=21)
    assert summary.rolled_back_upper <= BUDGET, summary
    assert summary.completed >= 0.9 * summary.rollouts, summary


def test_a_regression_at_its_tolerance_reaches_100_percent_at_most_5_percent() -> None:
    scenario = Scenario(200_000, 10.0, 0.01, 0.02, tolerances=(("failureRate", 1.0),))
    summary = summarize(scenario, rollouts=200, seed=22)
    assert summary.completed_upper <= BUDGET, summary


def test_a_p95_regression_at_its_tolerance_reaches_100_percent_at_most_5_percent() -> None:
    gap = true_p95_difference(1.2)
    scenario = Scenario(200_000, HOURLY, treatment_slowdown=1.2,
                        tolerances=(("latencyP95Ms", gap),))  # fmt: skip
    summary = summarize(scenario, rollouts=100, seed=23)
    assert summary.completed == 0, summary


def test_a_release_failing_every_user_is_rolled_back_within_50_treatment_users() -> None:
    r = run_rollouts(Scenario(200_000, 60, 0.01, 1.0, steps=STEPS), rollouts=300, seed=24)
    assert (r.states() == ROLLED_BACK).all()
    assert r.treatment_users_at_end.max() <= 50, r.treatment_users_at_end.max()


@pytest.mark.simulation
@pytest.mark.parametrize(
    "scenario",
    [Scenario(users, minutes, steps=steps) for users in TRAFFIC for minutes, steps in PLANS],
    ids=lambda s: s.describe(),
)
def test_a_thousand_healthy_rollouts_are_rolled_back_at_most_5_percent(scenario) -> None:
    """The healthy rows of docs/statistics.md's table, on draws of their own."""
    summary = summarize(scenario, rollouts=1_000, seed=1)
    assert summary.rolled_back_upper <= BUDGET, summary
    assert summary.completed >= 0.9 * summary.rollouts, summary


@pytest.mark.simulation
@pytest.mark.parametrize(
    "scenario",
    [
        scenario
        for users in TRAFFIC
        for minutes, steps in PLANS
        for scenario in regressions(users, minutes, steps)
    ],
    ids=lambda s: s.describe(),
)
def test_regressions_at_and_beyond_their_tolerance_reach_100_percent_at_most_5_percent(
    scenario,
) -> None:
    """Each regression of the acceptance table at exactly its tolerance and at twice it."""
    summary = summarize(scenario, rollouts=400, seed=2)
    assert summary.completed_upper <= BUDGET, summary
