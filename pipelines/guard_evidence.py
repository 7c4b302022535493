"""A running guarded rollout's evidence, per guardrail, from the warehouse: the arms of every
step since the rollout started (one stratum each) in, ``warehouse.statistics.guard``'s bounds
out. The guardian (``pipelines.guardian``) judges on them; ``GET .../rollout`` shows them.

Each guardrail is an entry of the catalogue (``api.controlplane.catalogue``), and its method
says which guard reads it: a proportion's strata (failure rate, coverage, a conversion), the
pooled users' quantile (latency), or a mean's strata (a metric's count, sum or mean)."""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT

from api.controlplane.catalogue import Measure, Method, measures, metric_key_of
from api.controlplane.changes import Rollout
from pipelines.health import quantile_of
from pipelines.metrics import metric_strata
from warehouse.read import RolloutArms, rollout_arms
from warehouse.statistics.guard import (
    GuardBound,
    Status,
    proportion_guard,
    quantile_guard,
    rollback_alpha,
    strata_of,
)
from warehouse.statistics.histogram import LatencyHistogram
from warehouse.statistics.means import MeanMoments, mean_guard

MetricStrata = Mapping[str, list[tuple[MeanMoments, MeanMoments]]]
"""Each metric guardrail's strata, treatment and control moments per step, by guardrail name."""

_ARM_FIGURES = ("users", "users_with_feedback", "failed_users")
"""The arm totals' figures, in ``RolloutArms.totals``' order."""


def rollout_evidence(
    con: duckdb.DuckDBPyConnection, rollout: Rollout, catalogue: Mapping[str, Measure]
) -> dict[str, GuardBound]:
    """Each watched guardrail's evidence over the rollout's steps so far; ``catalogue`` holds
    every guardrail's entry (``catalogue.measures`` of the organization's metrics)."""
    percentages = rollout.plan.steps[: rollout.step + 1]
    arms = rollout_arms(con, rollout.environment_id, rollout.flag_key, percentages)
    metrics = {
        guardrail: metric_strata(
            con, rollout.environment_id, rollout.flag_key, key, arms.percentages
        )
        for guardrail in rollout.plan.guardrails
        if (key := metric_key_of(guardrail)) is not None
    }
    return evidence_of(arms, rollout, catalogue, metrics)


def evidence_of(
    arms: RolloutArms,
    rollout: Rollout,
    catalogue: Mapping[str, Measure] | None = None,
    metrics: MetricStrata | None = None,
) -> dict[str, GuardBound]:
    """``rollout_evidence`` from arms (and metric strata) already read; ``catalogue`` is the
    built-in one when not given. A metric guardrail whose metric or strata are missing has no
    evidence: it never shows safety."""
    catalogue = catalogue if catalogue is not None else measures()
    level = rollback_alpha(len(rollout.plan.guardrails))
    share = rollout.percentage / 100.0
    tolerances = rollout.plan.tolerances

    def column(arm: str, figure: str) -> list[int]:
        index = _ARM_FIGURES.index(figure)
        return [arms.totals.get((p, arm), (0, 0, 0))[index] for p in arms.percentages]

    evidence: dict[str, GuardBound] = {}
    for guardrail in rollout.plan.guardrails:
        tolerance, measure = tolerances[guardrail], catalogue.get(guardrail)
        strata = (metrics or {}).get(guardrail)
        if measure is None or (metric_key_of(guardrail) is not None and strata is None):
            evidence[guardrail] = _no_evidence(tolerance)
        elif strata is not None:
            evidence[guardrail] = _metric_guard(measure, strata, tolerance, level, share)
        elif measure.method is Method.PROPORTION:
            evidence[guardrail] = proportion_guard(
                strata_of(
                    column(ARM_TREATMENT, str(measure.events)), column(ARM_TREATMENT, str(measure.among)),
                    column(ARM_CONTROL, str(measure.events)), column(ARM_CONTROL, str(measure.among)),
                ),
                tolerance, higher_is_worse=measure.higher_is_worse, rollback_level=level,
                current_share=share,
            )  # fmt: skip
        else:
            q = quantile_of(measure)
            treatment, control = (
                LatencyHistogram.of_sorted(*arms.latency.get(arm, ([], []))).cells(q)
                for arm in (ARM_TREATMENT, ARM_CONTROL)
            )
            evidence[guardrail] = quantile_guard(
                treatment, control, q, tolerance, rollback_level=level, current_share=share
            )
    return evidence


def _metric_guard(
    measure: Measure,
    strata: list[tuple[MeanMoments, MeanMoments]],
    tolerance: float,
    level: float,
    share: float,
) -> GuardBound:
    """A metric guardrail: a conversion through the proportions' guard (users converted among
    the arm's exposed users), a count, sum or mean through the means' guard."""
    if measure.method is Method.PROPORTION:
        return proportion_guard(
            strata_of(
                [round(t.y) for t, _ in strata], [t.n for t, _ in strata],
                [round(c.y) for _, c in strata], [c.n for _, c in strata],
            ),
            tolerance, higher_is_worse=measure.higher_is_worse, rollback_level=level,
            current_share=share,
        )  # fmt: skip
    return mean_guard(
        strata, tolerance, higher_is_worse=measure.higher_is_worse,
        ratio=measure.method is Method.RATIO, rollback_level=level, current_share=share,
    )  # fmt: skip


def _no_evidence(tolerance: float) -> GuardBound:
    return GuardBound(tolerance, None, (-float("inf"), float("inf")), Status.UNDECIDED, 0, 0, None)
