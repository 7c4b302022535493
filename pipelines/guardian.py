"""The rollout guardian's judgement: one running rollout and its flag's release health in,
what to do out. Pure (no I/O, the clock passed in), so the A/A simulations in
``tests/pipelines/test_guardian.py`` run it thousands of times.

The rules, in order (docs/rollouts.md):

1. At the plan's last step (100 %) there is nothing left to compare: completed.
2. A step is judged only on figures computed for its own percentage. ``flag_health`` compares
   the arms of the flag's current split and starts afresh at each new percentage, so until the
   pipeline has a row at this step's percentage the guardian waits (a step without any
   traffic never advances).
3. A sample-ratio mismatch holds the rollout: the arms are broken, nothing they show can be
   trusted, a person must look.
4. A regression on any watched guardrail rolls the percentage back to 0.
5. Otherwise the step advances once its time has passed. Decisions withheld below the minimum
   sample do not stop it: the contract advances "when its time has passed and no guardrail
   shows a regression". The next step is a comparison of its own (its percentage's epoch:
   the withheld reads carry no evidence into it), whose larger arms reach the minimum
   sooner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.admin.health import health_answer
from api.controlplane.changes import JsonDocument, Rollout, RolloutAction

GUARDRAIL_COLUMNS = {
    "failureRate": "failure_rate",
    "latencyP95Ms": "latency_p95",
    "coverage": "coverage",
}
"""Each guardrail's comparison in a ``flag_health`` row (its ``<name>_decision`` column)."""


@dataclass(frozen=True)
class Judgement:
    action: RolloutAction
    reason: str
    statistics: JsonDocument | None = None


def judge(rollout: Rollout, health: Mapping[str, Any] | None, now: float) -> Judgement:
    """What the guardian does with ``rollout`` given its flag's ``flag_health`` row."""
    last = len(rollout.plan.steps) - 1
    if rollout.step >= last:
        return Judgement(RolloutAction.COMPLETED, "at the last step, 100 %")
    percentage = rollout.percentage
    if health is None or health["rollout_percentage"] != percentage:
        return Judgement(RolloutAction.WAIT, f"no release health computed at {percentage:g} % yet")
    statistics = health_answer(dict(health))
    if health["sample_ratio_mismatch"]:
        return Judgement(
            RolloutAction.HELD,
            f"sample ratio mismatch: {health['sample_ratio_observed']:.4f} of users in treatment"
            f" where {health['sample_ratio_expected']:.4f} were expected"
            f" (p = {health['sample_ratio_p_value']:.2g})",
            statistics,
        )
    regressed = [g for g in rollout.plan.guardrails if _decision(health, g) == "regression"]
    if regressed:
        return Judgement(
            RolloutAction.ROLLED_BACK,
            "regression on " + ", ".join(_describe(health, g) for g in regressed),
            statistics,
        )
    if now < rollout.step_due_at:
        return Judgement(RolloutAction.WAIT, "the step's time has not passed", statistics)
    action = RolloutAction.COMPLETED if rollout.step + 1 == last else RolloutAction.ADVANCED
    watched = ", ".join(f"{g} {_decision(health, g)}" for g in rollout.plan.guardrails)
    return Judgement(
        action,
        f"step time passed with no regression ({watched or 'no guardrails'});"
        f" {percentage:g} % -> {rollout.plan.steps[rollout.step + 1]:g} %",
        statistics,
    )


def _decision(health: Mapping[str, Any], guardrail: str) -> str:
    return health[f"{GUARDRAIL_COLUMNS[guardrail]}_decision"]


def _describe(health: Mapping[str, Any], guardrail: str) -> str:
    column = GUARDRAIL_COLUMNS[guardrail]
    low, high = health[f"{column}_ci_low"], health[f"{column}_ci_high"]
    return (
        f"{guardrail} (treatment - control {health[f'{column}_difference']:+.3g},"
        f" 95 % confidence sequence [{low:.3g}, {high:.3g}])"
    )
