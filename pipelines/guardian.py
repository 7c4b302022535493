"""The rollout guardian's judgement: one running rollout and its flag's release health in,
what to do out. Pure (no I/O, the clock passed in), so the A/A simulations in
``tests/pipelines/test_guardian.py`` run it thousands of times.

The rules, in order (docs/rollouts.md):

1. At the plan's last step (100 %) there is nothing left to compare: completed.
2. A step is judged only on figures computed for its own percentage, at the rollout's own
   level. ``flag_health`` compares the arms of the flag's current split, starting afresh at
   each new percentage, and for a flag in a rollout reads each comparison at the rollout's
   share of its error budget (``warehouse.statistics.rollout_confidence``); until it has such
   a row the guardian waits.
3. A sample-ratio mismatch holds the rollout: the arms are broken, nothing they show can be
   trusted, a person must look.
4. A regression on any watched guardrail rolls the percentage back to 0.
5. A step advances once its time has passed *and* every watched guardrail has been judged
   (inconclusive or improvement, not withheld). Until then the rollout waits at the step and
   says why (``Judgement.waiting``, shown by ``GET .../rollout``); if the step is still not
   judged ``MAX_WAIT_SECONDS`` after its time, the rollout is held for a person: it never
   advances on a step nobody could judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.controlplane.changes import JsonDocument, Rollout, RolloutAction
from api.controlplane.health_document import health_answer
from warehouse.statistics import MIN_USERS_WITH_FEEDBACK, Decision, rollout_confidence

GUARDRAIL_COLUMNS = {
    "failureRate": "failure_rate",
    "latencyP95Ms": "latency_p95",
    "coverage": "coverage",
}
"""Each guardrail's comparison in a ``flag_health`` row (its ``<name>_guard_decision`` column)."""

MAX_WAIT_SECONDS = 24 * 3600.0
"""How long past its time a step may wait to be judged before the rollout is held."""

_JUDGED = (str(Decision.INCONCLUSIVE), str(Decision.IMPROVEMENT))


@dataclass(frozen=True)
class Judgement:
    action: RolloutAction
    reason: str
    statistics: JsonDocument | None = None
    waiting: bool = False
    """A wait past the step's time, for want of a judgement: recorded and shown."""


def judge(rollout: Rollout, health: Mapping[str, Any] | None, now: float) -> Judgement:
    """What the guardian does with ``rollout`` given its flag's ``flag_health`` row."""
    last = len(rollout.plan.steps) - 1
    if rollout.step >= last:
        return Judgement(RolloutAction.COMPLETED, "at the last step, 100 %")
    percentage = rollout.percentage
    level = rollout_confidence(rollout.plan.steps, rollout.plan.guardrails)
    if (
        health is None
        or health["rollout_percentage"] != percentage
        or health.get("guard_confidence") != level
    ):
        return _unjudged(rollout, now, f"no release health computed at {percentage:g} % yet")
    statistics = health_answer(dict(health))
    if health["sample_ratio_mismatch"]:
        return Judgement(
            RolloutAction.HELD,
            f"sample ratio mismatch: {health['sample_ratio_observed']:.4f} of users in treatment"
            f" where {health['sample_ratio_expected']:.4f} were expected"
            f" (p = {health['sample_ratio_p_value']:.2g})",
            statistics,
        )
    regressed = [g for g in rollout.plan.guardrails if _decision(health, g) == Decision.REGRESSION]
    if regressed:
        return Judgement(
            RolloutAction.ROLLED_BACK,
            "regression on " + ", ".join(_describe(health, g) for g in regressed),
            statistics,
        )
    if now < rollout.step_due_at:
        return Judgement(RolloutAction.WAIT, "the step's time has not passed", statistics)
    withheld = [g for g in rollout.plan.guardrails if _decision(health, g) not in _JUDGED]
    if withheld:
        why = ", ".join(f"{g} withheld ({_reason(health, g)})" for g in withheld)
        return _unjudged(rollout, now, why, statistics)
    action = RolloutAction.COMPLETED if rollout.step + 1 == last else RolloutAction.ADVANCED
    watched = ", ".join(f"{g} {_decision(health, g)}" for g in rollout.plan.guardrails)
    return Judgement(
        action,
        f"step time passed with no regression ({watched or 'no guardrails'});"
        f" {percentage:g} % -> {rollout.plan.steps[rollout.step + 1]:g} %",
        statistics,
    )


def _unjudged(
    rollout: Rollout, now: float, why: str, statistics: JsonDocument | None = None
) -> Judgement:
    """Before the step's time: an ordinary wait. After it: a recorded wait to be judged, and
    past ``MAX_WAIT_SECONDS`` a hold."""
    if now < rollout.step_due_at:
        return Judgement(RolloutAction.WAIT, why, statistics)
    if now >= rollout.step_due_at + MAX_WAIT_SECONDS:
        hours = MAX_WAIT_SECONDS / 3600
        return Judgement(
            RolloutAction.HELD,
            f"step at {rollout.percentage:g} % not judged {hours:g} h after its time: {why}",
            statistics,
        )
    return Judgement(RolloutAction.WAIT, why, statistics, waiting=True)


def _decision(health: Mapping[str, Any], guardrail: str) -> str:
    return health[f"{GUARDRAIL_COLUMNS[guardrail]}_guard_decision"]


_SAMPLE = {
    "failureRate": ("users_with_feedback", "users with feedback"),
    "latencyP95Ms": ("latency_users", "users with a latency"),
    "coverage": ("users", "users"),
}
"""What each guardrail's minimum sample counts, per arm (docs/statistics.md)."""


def _reason(health: Mapping[str, Any], guardrail: str) -> str:
    """Why a guardrail is withheld at a step that is not a mismatch: too few users in an arm,
    else (the p95 only) a quantile the data cannot bound yet."""
    column, what = _SAMPLE[guardrail]
    fewest = min(health[f"treatment_{column}"] or 0, health[f"control_{column}"] or 0)
    if fewest < MIN_USERS_WITH_FEEDBACK:
        return f"{fewest} {what} in the smaller arm, {MIN_USERS_WITH_FEEDBACK} needed"
    return "the p95 cannot be bounded yet"


def _describe(health: Mapping[str, Any], guardrail: str) -> str:
    column = GUARDRAIL_COLUMNS[guardrail]
    low, high = health[f"{column}_guard_ci_low"], health[f"{column}_guard_ci_high"]
    level = 100.0 * health["guard_confidence"]
    return (
        f"{guardrail} (treatment - control {health[f'{column}_difference']:+.3g},"
        f" {level:.4g} % confidence sequence [{low:.3g}, {high:.3g}])"
    )
