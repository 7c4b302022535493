"""A running guarded rollout's evidence, per guardrail, from the warehouse: the arms of every
step since the rollout started (one stratum each) in, ``warehouse.statistics.guard``'s bounds
out. The guardian (``pipelines.guardian``) judges on them; ``GET .../rollout`` shows them."""

from __future__ import annotations

import duckdb
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT

from api.controlplane.changes import Rollout
from pipelines.health import LATENCY_QUANTILE
from warehouse.read import RolloutArms, rollout_arms
from warehouse.statistics.guard import (
    GuardBound,
    proportion_guard,
    quantile_guard,
    rollback_alpha,
    strata_of,
)
from warehouse.statistics.histogram import LatencyHistogram


def rollout_evidence(con: duckdb.DuckDBPyConnection, rollout: Rollout) -> dict[str, GuardBound]:
    """Each watched guardrail's evidence over the rollout's steps so far."""
    percentages = rollout.plan.steps[: rollout.step + 1]
    arms = rollout_arms(con, rollout.environment_id, rollout.flag_key, percentages)
    return evidence_of(arms, rollout)


def evidence_of(arms: RolloutArms, rollout: Rollout) -> dict[str, GuardBound]:
    """``rollout_evidence`` from arms already read."""
    level = rollback_alpha(len(rollout.plan.guardrails))
    share = rollout.percentage / 100.0
    tolerances = rollout.plan.tolerances

    def column(arm: str, index: int) -> list[int]:
        return [arms.totals.get((p, arm), (0, 0, 0))[index] for p in arms.percentages]

    users_t, feedback_t, failed_t = (column(ARM_TREATMENT, i) for i in range(3))
    users_c, feedback_c, failed_c = (column(ARM_CONTROL, i) for i in range(3))
    proportions = {  # each proportion guardrail's strata, and whether higher is worse
        "failureRate": (strata_of(failed_t, feedback_t, failed_c, feedback_c), True),
        "coverage": (strata_of(feedback_t, users_t, feedback_c, users_c), False),
    }
    evidence: dict[str, GuardBound] = {}
    for guardrail in rollout.plan.guardrails:
        tolerance = tolerances[guardrail]
        if guardrail in proportions:
            strata, higher_is_worse = proportions[guardrail]
            evidence[guardrail] = proportion_guard(
                strata, tolerance, higher_is_worse=higher_is_worse, rollback_level=level,
                current_share=share,
            )  # fmt: skip
            continue
        treatment, control = (
            LatencyHistogram.of_sorted(*arms.latency.get(arm, ([], []))).cells(LATENCY_QUANTILE)
            for arm in (ARM_TREATMENT, ARM_CONTROL)
        )
        evidence[guardrail] = quantile_guard(
            treatment, control, LATENCY_QUANTILE, tolerance, rollback_level=level,
            current_share=share,
        )  # fmt: skip
    return evidence
