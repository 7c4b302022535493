"""Release health per flag environment (contract section 9): the arms of its current split,
compared with the always-valid statistics of ``warehouse.statistics``.

Only flag environments whose arms changed since the last run (``health_dirty``) are computed
again, and each from its arms' totals and latency histograms, which the fold keeps up to date
(``arm_totals``, ``arm_latency_buckets``): a run costs what is new, whatever the history. The
decisions come from the pure statistics package; the latency percentiles and the p95's bounds
from the histograms (``statistics.histogram``: within 0.5 %, bounds widened to stay valid).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import duckdb
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT

from api.controlplane.catalogue import BUILT_IN, BUILT_IN_NAMES, Measure, Method
from warehouse.sql import insert_rows, run_script, transaction
from warehouse.statistics import (
    CONFIDENCE,
    Comparison,
    ProportionComparison,
    SampleRatio,
    WithheldReason,
    compare_all_proportions,
    compare_quantiles,
    sample_ratio,
)
from warehouse.statistics.histogram import LatencyHistogram

LATENCY_QUANTILE = 0.95
ARMS = (ARM_TREATMENT, ARM_CONTROL)


@dataclass(frozen=True)
class ArmFigures:
    """One arm's users and what they reported; ``latency`` holds each user's mean latency."""

    users: int
    users_with_feedback: int
    failed_users: int
    latency: LatencyHistogram

    @property
    def latency_users(self) -> int:
        return self.latency.n

    @property
    def coverage(self) -> float | None:
        return 100.0 * self.users_with_feedback / self.users if self.users else None

    @property
    def failure_rate(self) -> float | None:
        if not self.users_with_feedback:
            return None
        return 100.0 * self.failed_users / self.users_with_feedback


EMPTY_ARM = ArmFigures(0, 0, 0, LatencyHistogram(()))


def compute_health(
    con: duckdb.DuckDBPyConnection, without_split: Collection[tuple[str, str]] = ()
) -> int:
    """Recompute ``flag_health`` and the built-in ``health_comparisons`` for the dirty flag
    environments and add a row (arms null, decisions withheld) for each flag environment with
    metrics but none; returns the number computed. ``without_split`` are the flags with no
    percentage rule now: one that lost its rule gets the row without arms too, instead of the
    arms of a split it no longer has (no new event of it is in an arm, so nothing marks it
    dirty). One transaction: a failed run leaves the dirty marks for the next one."""
    with transaction(con):
        run_script(con, "arm_summaries")
        computed = _health_rows(con)
        dirty = (
            "(environment_id, flag_key) IN (SELECT (environment_id, flag_key) FROM health_dirty)"
        )
        con.execute(f"DELETE FROM flag_health WHERE {dirty}")
        con.execute(f"DELETE FROM health_comparisons WHERE {dirty} AND {_BUILT_IN_ROWS}")
        comparisons = [c for r in computed for c in r.comparisons]
        insert_rows(con, "flag_health", HEALTH_COLUMNS, [r.health for r in computed],
                    computed_at=True)  # fmt: skip
        insert_rows(con, "health_comparisons", COMPARISON_COLUMNS, comparisons, computed_at=True)
        _drop_arms_without_a_split(con, without_split)
        _add_flags_without_arms(con)
        con.execute("DELETE FROM health_dirty")
    return len(computed)


_BUILT_IN_ROWS = f"list_contains({list(BUILT_IN_NAMES)!r}, comparison)"
"""SQL: a ``health_comparisons`` row of a built-in comparison (the metrics' are
``pipelines.metrics``')."""


def _health_rows(con: duckdb.DuckDBPyConnection) -> list[list]:
    epochs = con.execute(
        "SELECT environment_id, flag_key, rollout_percentage FROM health_epoch ORDER BY ALL"
    ).fetchall()
    histograms = {
        (env, flag, arm): LatencyHistogram.of_sorted(buckets, users)
        for env, flag, arm, buckets, users in con.execute(
            "SELECT b.environment_id, b.flag_key, b.arm, list(b.bucket ORDER BY b.bucket), "
            "list(b.users ORDER BY b.bucket) FROM arm_latency_buckets AS b "
            "JOIN health_epoch AS h USING (environment_id, flag_key, rollout_percentage) "
            "GROUP BY ALL"
        ).fetchall()
    }
    empty = LatencyHistogram(())
    arms = {
        (env, flag, arm): (
            org,
            ArmFigures(*totals, histograms.get((env, flag, arm), empty)),
        )
        for env, flag, arm, org, *totals in con.execute(
            "SELECT environment_id, flag_key, arm, organization_id, users, users_with_feedback, "
            "failed_users FROM health_arms"
        ).fetchall()
    }
    inputs = []
    for env, flag, percentage in epochs:
        organization = next((arms[(env, flag, a)][0] for a in ARMS if (env, flag, a) in arms), None)
        treatment = arms.get((env, flag, ARM_TREATMENT), (None, EMPTY_ARM))[1]
        control = arms.get((env, flag, ARM_CONTROL), (None, EMPTY_ARM))[1]
        inputs.append(HealthInput(organization, env, flag, percentage, treatment, control))
    return health_rows(inputs)


_ARM_FIELDS = (
    "users", "users_with_feedback", "failed_users", "coverage", "failure_rate",
    "latency_users", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
)  # fmt: skip
HEALTH_COLUMNS = (
    "organization_id", "environment_id", "flag_key", "rollout_percentage",
    *(f"{arm}_{field}" for arm in ARMS for field in _ARM_FIELDS),
    "sample_ratio_expected", "sample_ratio_observed", "sample_ratio_p_value",
    "sample_ratio_mismatch", "withheld_reason", "confidence",
)  # fmt: skip
"""``flag_health``'s columns as ``health_row`` fills them (``computed_at`` is the insert's)."""

COMPARISON_COLUMNS = (
    "organization_id", "environment_id", "flag_key", "comparison", "rollout_percentage",
    "treatment_users", "treatment_mean", "control_users", "control_mean", "difference",
    "ci_low", "ci_high", "confidence", "decision", "variance_reduction", "withheld_reason",
)  # fmt: skip
"""``health_comparisons``' columns but ``computed_at``: one row per flag environment and
comparison of the catalogue (``api.controlplane.catalogue``)."""


class HealthInput(NamedTuple):
    """What one ``flag_health`` row is computed from (``health_rows``)."""

    organization: str | None
    env: str
    flag: str
    percentage: float
    treatment: ArmFigures
    control: ArmFigures


class HealthRows(NamedTuple):
    """One flag environment's ``flag_health`` row and its ``health_comparisons`` rows."""

    health: list
    comparisons: list[list]


def health_row(
    organization: str | None,
    env: str,
    flag: str,
    percentage: float,
    treatment: ArmFigures,
    control: ArmFigures,
) -> dict[str, Any]:
    """One flag environment's health as ``warehouse.read.health_row`` reads it back: the
    ``flag_health`` columns, and ``comparisons``, its ``health_comparisons`` rows."""
    row = health_rows([HealthInput(organization, env, flag, percentage, treatment, control)])[0]
    return {
        **dict(zip(HEALTH_COLUMNS, row.health, strict=True)),
        "computed_at": None,
        "comparisons": [dict(zip(COMPARISON_COLUMNS, c, strict=True)) for c in row.comparisons],
    }


def health_rows(inputs: Sequence[HealthInput]) -> list[HealthRows]:
    """Each input's ``flag_health`` row (without ``computed_at``, in ``HEALTH_COLUMNS``
    order) and one ``health_comparisons`` row per built-in comparison of the catalogue, at
    the contract's ``CONFIDENCE``. The proportion comparisons of every input are computed
    together (``compare_all_proportions``): a hundred intervals in one vectorized refinement.
    (A guarded rollout's decisions rest on the guard's own evidence over the whole rollout,
    ``pipelines.guard_evidence``, not on these.)"""
    ratios = [
        sample_ratio(i.treatment.users, i.control.users, i.percentage / 100.0) for i in inputs
    ]
    compared = comparisons(inputs, ratios, CONFIDENCE)
    rows = []
    for i, ratio, result in zip(inputs, ratios, compared, strict=True):
        reasons = [str(c.reason) for c in result.values() if c.reason]
        health = [
            i.organization, i.env, i.flag, i.percentage,
            *_arm_columns(i.treatment), *_arm_columns(i.control),
            ratio.expected, ratio.observed, ratio.p_value, ratio.mismatch,
            reasons[0] if reasons else None, CONFIDENCE,
        ]  # fmt: skip
        rows.append(
            HealthRows(
                health,
                [_comparison_row(i, BUILT_IN_BY_NAME[name], c) for name, c in result.items()],
            )
        )
    return rows


BUILT_IN_BY_NAME = {measure.name: measure for measure in BUILT_IN}


def comparisons(
    inputs: Sequence[HealthInput], ratios: Sequence[SampleRatio], confidence: float
) -> list[dict[str, Comparison]]:
    """Each built-in comparison of the catalogue for each input, treatment against control,
    at ``confidence``, by name; all withheld when its sample ratio mismatches."""
    proportions: list[ProportionComparison] = []
    quantiles: list[Comparison] = []
    for i, ratio in zip(inputs, ratios, strict=True):
        withheld = WithheldReason.SAMPLE_RATIO_MISMATCH if ratio.mismatch else None
        for measure in BUILT_IN:
            if measure.method is Method.PROPORTION:
                proportions.append(
                    ProportionComparison(
                        *proportion_counts(measure, i.treatment),
                        *proportion_counts(measure, i.control),
                        higher_is_worse=measure.higher_is_worse,
                        withheld_reason=withheld,
                    )
                )
            else:
                q = quantile_of(measure)
                quantiles.append(
                    compare_quantiles(
                        i.treatment.latency.cells(q),
                        i.control.latency.cells(q),
                        q,
                        confidence=confidence,
                        withheld_reason=withheld,
                    )  # fmt: skip
                )
    proportion_results = iter(compare_all_proportions(proportions, confidence=confidence))
    quantile_results = iter(quantiles)
    return [
        {
            m.name: next(proportion_results if m.method is Method.PROPORTION else quantile_results)
            for m in BUILT_IN
        }
        for _ in inputs
    ]


def proportion_counts(measure: Measure, arm: ArmFigures) -> tuple[int, int]:
    """A built-in proportion's ``(events, n)`` in one arm, by the catalogue's field names."""
    return getattr(arm, str(measure.events)), getattr(arm, str(measure.among))


def quantile_of(measure: Measure) -> float:
    """A built-in quantile comparison's level (every one is over the users' latencies)."""
    if measure.method is not Method.QUANTILE or measure.quantile is None:
        raise ValueError(f"{measure.name} is not a quantile comparison")
    return measure.quantile


def _arm_value(measure: Measure, arm: ArmFigures) -> tuple[int, float | None]:
    """What one arm shows of a built-in comparison: the users it counts and their figure."""
    if measure.method is Method.PROPORTION:
        events, among = proportion_counts(measure, arm)
        return among, 100.0 * events / among if among else None
    return arm.latency_users, arm.latency.quantile(quantile_of(measure))


def _comparison_row(i: HealthInput, measure: Measure, comparison: Comparison) -> list:
    low, high = comparison.ci if comparison.ci is not None else (None, None)
    treatment_users, treatment_value = _arm_value(measure, i.treatment)
    control_users, control_value = _arm_value(measure, i.control)
    return [
        i.organization, i.env, i.flag, measure.name, i.percentage,
        treatment_users, treatment_value, control_users, control_value,
        comparison.difference, low, high, comparison.confidence, str(comparison.decision),
        None, comparison.reason,
    ]  # fmt: skip


def _arm_columns(arm: ArmFigures) -> list:
    return [
        arm.users,
        arm.users_with_feedback,
        arm.failed_users,
        arm.coverage,
        arm.failure_rate,
        arm.latency_users,
        arm.latency.quantile(0.50),
        arm.latency.quantile(LATENCY_QUANTILE),
        arm.latency.quantile(0.99),
    ]


def _drop_arms_without_a_split(
    con: duckdb.DuckDBPyConnection, without_split: Collection[tuple[str, str]]
) -> None:
    """Delete the rows with arms of the flag environments in ``without_split``, and their
    built-in comparisons (the answer withholds them: no percentage rule)."""
    if without_split:
        pairs = sorted([environment, flag] for environment, flag in without_split)
        con.execute(
            "DELETE FROM flag_health WHERE rollout_percentage IS NOT NULL"
            " AND list_contains(?, [environment_id, flag_key])",
            [pairs],
        )
        con.execute(
            "DELETE FROM health_comparisons WHERE list_contains(?, [environment_id, flag_key])"
            f" AND {_BUILT_IN_ROWS}",
            [pairs],
        )


def _add_flags_without_arms(con: duckdb.DuckDBPyConnection) -> None:
    """A row without arms for each flag environment with metrics but no health row; its
    comparisons are withheld (``health_document``: a comparison without a row is)."""
    con.execute(
        "INSERT INTO flag_health (organization_id, environment_id, flag_key, withheld_reason, "
        "confidence, computed_at) "
        "SELECT m.organization_id, m.environment_id, m.flag_key, ?, ?, current_timestamp "
        "FROM flag_environment_metrics m ANTI JOIN flag_health h USING (environment_id, flag_key)",
        [str(WithheldReason.NO_PERCENTAGE_RULE), CONFIDENCE],
    )
