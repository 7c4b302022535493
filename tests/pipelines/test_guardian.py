"""The rollout guardian in simulation (pure, fast): its judgement (``pipelines.guardian``) on
rows built by the pipeline's own ``health_row`` from simulated users, step after step, read
several times per step as the pipeline would. Seeds are fixed, so a failure is a change in
behaviour.

A/A rollouts (both arms alike) must almost never roll back; a healthy rollout reaches 100 %;
a 5 % -> 10 % failure-rate regression is rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pytest

from api.controlplane.changes import (
    GUARDRAILS,
    Rollout,
    RolloutAction,
    RolloutPlan,
    RolloutState,
)
from pipelines.guardian import judge
from pipelines.health import ArmFigures, health_row
from warehouse.migrations import migrate
from warehouse.statistics.histogram import LatencyHistogram

STEPS = (1.0, 5.0, 25.0, 50.0, 100.0)
READS_PER_STEP = 4
USERS_PER_READ = 1_000
STEP_SECONDS = 600.0
ROLLOUTS = 1_000
FALSE_ROLLBACK_LIMIT = 0.05


def _columns() -> list[str]:
    con = duckdb.connect()
    migrate(con)
    names = [row[0] for row in con.execute("DESCRIBE flag_health").fetchall()]
    con.close()
    return names


COLUMNS = _columns()


@dataclass
class Arm:
    users: int = 0
    with_feedback: int = 0
    failed: int = 0
    latency: LatencyHistogram = field(default_factory=lambda: LatencyHistogram(()))

    def add(self, rng: np.random.Generator, n: int, failure: float, coverage: float) -> None:
        reported = rng.binomial(n, coverage)
        self.users += n
        self.with_feedback += reported
        self.failed += rng.binomial(reported, failure)
        self.latency = self.latency.plus(
            LatencyHistogram.of_values(rng.lognormal(5.3, 0.5, reported))
        )

    def figures(self) -> ArmFigures:
        """What the fold keeps for the arm: its counts and its users' latency histogram."""
        return ArmFigures(self.users, self.with_feedback, self.failed, self.latency)


def run_rollout(seed: int, treatment_failure: float, control_failure: float = 0.05) -> Rollout:
    """One rollout from 1 % to 100 %, judged after every read; returns its final state."""
    rng = np.random.default_rng(seed)
    rollout = Rollout(
        "env", "flag", RolloutPlan(STEPS, STEP_SECONDS / 60, GUARDRAILS),
        RolloutState.RUNNING, 0, 0.0, "",
    )  # fmt: skip
    now = 0.0
    while rollout.state is RolloutState.RUNNING:
        treatment, control = Arm(), Arm()  # each step is a fresh comparison (its own epoch)
        for _ in range(READS_PER_STEP):
            now += STEP_SECONDS / READS_PER_STEP
            n_treatment = rng.binomial(USERS_PER_READ, rollout.percentage / 100)
            treatment.add(rng, n_treatment, treatment_failure, 0.95)
            control.add(rng, USERS_PER_READ - n_treatment, control_failure, 0.95)
            t, c = treatment.figures(), control.figures()
            row = health_row("org", "env", "flag", rollout.percentage, t, c)
            health = dict(zip(COLUMNS, [*row, None], strict=True))
            judgement = judge(rollout, health, now)
            if judgement.action is RolloutAction.WAIT:
                continue
            rollout = _apply(rollout, judgement.action, now)
            break
    return rollout


def _apply(rollout: Rollout, action: RolloutAction, now: float) -> Rollout:
    """What ``decide_rollout`` does to the state, without a store."""
    if action in (RolloutAction.ADVANCED, RolloutAction.COMPLETED):
        step = rollout.step + 1
        state = RolloutState.COMPLETED if action is RolloutAction.COMPLETED else rollout.state
        return Rollout("env", "flag", rollout.plan, state, step, now, "")
    state = RolloutState.ROLLED_BACK if action is RolloutAction.ROLLED_BACK else RolloutState.HELD
    return Rollout("env", "flag", rollout.plan, state, rollout.step, rollout.step_started_at, "")


def test_a_a_rollouts_rarely_roll_back_and_mostly_reach_100_percent() -> None:
    finals = [run_rollout(seed, treatment_failure=0.05).state for seed in range(ROLLOUTS)]
    rolled_back = finals.count(RolloutState.ROLLED_BACK) / ROLLOUTS
    held = finals.count(RolloutState.HELD) / ROLLOUTS
    assert rolled_back <= FALSE_ROLLBACK_LIMIT, f"false rollbacks {rolled_back:.1%}"
    assert finals.count(RolloutState.COMPLETED) / ROLLOUTS >= 0.9, (rolled_back, held)


def test_a_healthy_rollout_reaches_100_percent() -> None:
    final = run_rollout(seed=7, treatment_failure=0.04)
    assert final.state is RolloutState.COMPLETED
    assert final.percentage == 100.0


@pytest.mark.parametrize("seed", range(5))
def test_a_failure_rate_doubling_is_rolled_back_to_0(seed: int) -> None:
    final = run_rollout(seed, treatment_failure=0.10)
    assert final.state is RolloutState.ROLLED_BACK
    assert final.percentage == 0.0
