"""The rollout guardian's judgement: one running rollout, its flag's release health and the
guard's evidence in, what to do out. Pure (no I/O, the clock passed in), so the simulations
of ``tests/pipelines/rollout_simulation.py`` follow the same rules.

The evidence is one one-sided sequence per guardrail over the whole rollout
(``warehouse.statistics.guard``): it is kept across the steps, so a later step starts with all
the earlier ones showed. The rules, in order (docs/rollouts.md):

0. The guardian moves the flag's split only from where the rollout set it: a flag whose
   percentage rule a person took away holds the rollout, and one whose split a person moved
   makes it wait (recorded), deciding nothing, until the split is the rollout's again.
1. At the plan's last step (100 %) there is nothing left to compare: completed.
2. A step is judged only once release health has been computed at its own percentage (the
   pipeline has seen its split); until then the rollout waits.
3. A sample-ratio mismatch holds the rollout: the arms are broken, nothing they show can be
   trusted, a person must look.
4. A guardrail whose evidence shows a regression rolls the percentage back to 0, at any read.
5. A step advances once its time has passed *and* every guardrail's evidence shows its
   regression below its tolerance ("safe"). Until then the rollout waits at the step and says
   why, with the users each guardrail still needs; a step still waiting ``MAX_WAIT_SECONDS``
   after its time is held for a person: it never advances on evidence it does not have.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from flagsight_core.words import counted

from api.controlplane.catalogue import Measure, measures
from api.controlplane.changes import JsonDocument, Rollout, RolloutAction
from api.controlplane.health_document import health_answer
from api.controlplane.resources.rollouts import NO_SPLIT_TO_MOVE, same_split
from warehouse.statistics.guard import SAFETY_ALPHA, GuardBound, Status, rollback_alpha

MAX_WAIT_SECONDS = 28 * 24 * 3600.0
"""How long past its time a step may wait for its evidence before the rollout is held: long
enough for nearly every healthy rollout at 2,000 users a day to show its safety with the default
plan (docs/rollouts.md); a hold is for a rollout that is stuck, not one that is slow."""

Evidence = Mapping[str, GuardBound]
"""Each watched guardrail's evidence over the rollout so far."""


@dataclass(frozen=True)
class Judgement:
    action: RolloutAction
    reason: str
    statistics: JsonDocument | None = None
    waiting: bool = False
    """A wait past the step's time, for want of evidence, or while a person holds the split:
    recorded and shown."""
    guard: JsonDocument | None = None
    """The evidence as ``GET .../rollout`` shows it (``guard_document``)."""
    paused: bool = False
    """The step is on hold for a person (its split moved): its time starts again from now,
    so the step is judged as any other once the split is back, and four weeks of a person's
    kill switch do not count as four weeks of waiting for evidence."""


def judge(
    rollout: Rollout,
    health: Mapping[str, Any] | None,
    evidence: Evidence,
    now: float,
    catalogue: Mapping[str, Measure] | None = None,
    split: float | None | EllipsisType = ...,
) -> Judgement:
    """What the guardian does with ``rollout`` given its flag's ``flag_health`` row (the
    current split's health, with its comparisons) and the guard's ``evidence``; ``catalogue``
    names each guardrail's label and unit in the reasons (the built-in ones' when not
    given); ``split`` is where the flag's percentage rule is now (None without one; left out,
    where the rollout set it)."""
    entries = catalogue or measures()
    last = len(rollout.plan.steps) - 1
    guard = guard_document(rollout, evidence)
    if split is None:
        return Judgement(RolloutAction.HELD, NO_SPLIT_TO_MOVE, guard=guard)
    if split is not ... and not same_split(split, rollout.percentage):
        return Judgement(
            RolloutAction.WAIT,
            f"a person moved the flag's split to {split:g} %, where the rollout set"
            f" {rollout.percentage:g} %: nothing is decided until it is back (or the rollout"
            " stops), and the step starts again then",
            waiting=True,
            guard=guard,
            paused=True,
        )
    if rollout.step >= last:
        return Judgement(RolloutAction.COMPLETED, "at the last step, 100 %", guard=guard)
    percentage = rollout.percentage
    if health is None or health["rollout_percentage"] != percentage:
        why = f"no release health computed at {percentage:g} % yet"
        return _unjudged(rollout, now, why, None, guard)
    statistics = {**health_answer(dict(health)), "guard": guard}
    if health["sample_ratio_mismatch"]:
        return Judgement(
            RolloutAction.HELD,
            f"sample ratio mismatch: {health['sample_ratio_observed']:.4f} of users in treatment"
            f" where {health['sample_ratio_expected']:.4f} were expected"
            f" (p = {health['sample_ratio_p_value']:.2g})",
            statistics,
            guard=guard,
        )
    watched = rollout.plan.guardrails
    regressed = [g for g in watched if evidence[g].status is Status.REGRESSION]
    if regressed:
        return Judgement(
            RolloutAction.ROLLED_BACK,
            "regression: " + "; ".join(_describe(g, evidence[g], entries) for g in regressed),
            statistics,
            guard=guard,
        )
    if now < rollout.step_due_at:
        return Judgement(RolloutAction.WAIT, "the step's time has not passed", statistics,
                         guard=guard)  # fmt: skip
    unshown = [g for g in watched if evidence[g].status is not Status.SAFE]
    if unshown:
        why = "; ".join(_not_shown(g, evidence[g], percentage, entries) for g in unshown)
        return _unjudged(rollout, now, why, statistics, guard)
    action = RolloutAction.COMPLETED if rollout.step + 1 == last else RolloutAction.ADVANCED
    shown = ", ".join(_describe(g, evidence[g], entries) for g in watched)
    return Judgement(
        action,
        f"step time passed and every guardrail shown within its tolerance"
        f" ({shown or 'no guardrails'}); {percentage:g} % -> {rollout.plan.steps[rollout.step + 1]:g} %",
        statistics,
        guard=guard,
    )


def _unjudged(
    rollout: Rollout,
    now: float,
    why: str,
    statistics: JsonDocument | None,
    guard: JsonDocument | None,
) -> Judgement:
    """Before the step's time: an ordinary wait. After it: a recorded wait for evidence, and
    past ``MAX_WAIT_SECONDS`` a hold."""
    if now < rollout.step_due_at:
        return Judgement(RolloutAction.WAIT, why, statistics, guard=guard)
    if now >= rollout.step_due_at + MAX_WAIT_SECONDS:
        days = MAX_WAIT_SECONDS / 86_400
        return Judgement(
            RolloutAction.HELD,
            f"step at {rollout.percentage:g} % not shown safe {days:g} days after its time: {why}",
            statistics,
            guard=guard,
        )
    return Judgement(RolloutAction.WAIT, why, statistics, waiting=True, guard=guard)


def _amount(value: float, unit: str) -> str:
    return f"{value:+.3g} {unit}"


def _interval(bound: GuardBound, unit: str) -> str:
    """``[-0.4 pp, +1.2 pp]``; an end the data cannot bound yet is ``?``."""
    low, high = (_amount(e, unit) if math.isfinite(e) else "?" for e in bound.ci)
    return f"[{low}, {high}]"


def _named(guardrail: str, entries: Mapping[str, Measure]) -> tuple[str, str]:
    """A guardrail's label (as people read it: "p95 latency", a metric's name) and unit; a
    metric deleted since stays by its name."""
    entry = entries.get(guardrail)
    return (entry.label, entry.unit) if entry is not None else (guardrail, "")


def _describe(guardrail: str, bound: GuardBound, entries: Mapping[str, Measure]) -> str:
    label, unit = _named(guardrail, entries)
    difference = "n/a" if bound.difference is None else _amount(bound.difference, unit)
    return (
        f"{label} (treatment - control {difference}, interval {_interval(bound, unit)},"
        f" tolerance {bound.tolerance:g} {unit})"
    )


def _not_shown(
    guardrail: str, bound: GuardBound, percentage: float, entries: Mapping[str, Measure]
) -> str:
    """Why a guardrail does not let the step advance yet, and what it would take."""
    label, unit = _named(guardrail, entries)
    text = (
        f"{label} not yet shown within {bound.tolerance:g} {unit}"
        f" (interval {_interval(bound, unit)}, {bound.treatment_users:,} treatment and"
        f" {bound.control_users:,} control users so far)"
    )
    if bound.users_needed is not None:
        return f"{text}: about {counted(bound.users_needed, 'more user')} at {percentage:g} %"
    if bound.difference is not None and abs(bound.difference) >= bound.tolerance:
        return f"{text}: its estimate is beyond the tolerance"
    return text


def guard_document(rollout: Rollout, evidence: Evidence) -> JsonDocument:
    """The evidence as ``GET .../rollout`` shows it under ``guard`` (contract section 10):
    per guardrail its tolerance, difference, interval, status, users and users still needed;
    an end the data cannot bound yet is null."""
    return {
        "step": rollout.step,
        "percentage": rollout.percentage,
        "confidence": {
            "rollback": 1.0 - rollback_alpha(len(rollout.plan.guardrails)),
            "safety": 1.0 - SAFETY_ALPHA,
        },
        "guardrails": {
            guardrail: {
                "tolerance": bound.tolerance,
                "difference": bound.difference,
                "ci": [_finite(bound.ci[0]), _finite(bound.ci[1])],
                "status": str(bound.status),
                "users": {"treatment": bound.treatment_users, "control": bound.control_users},
                "usersNeeded": bound.users_needed,
            }
            for guardrail, bound in evidence.items()
            if guardrail in rollout.plan.guardrails
        },
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
