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
from typing import NamedTuple

import duckdb
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT

from warehouse.sql import run_script, transaction
from warehouse.statistics import (
    CONFIDENCE,
    Comparison,
    Decision,
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
_INSERT_CHUNK = 200


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
    """Recompute ``flag_health`` for the dirty flag environments and add a row (arms null,
    decisions withheld) for each flag environment with metrics but none; returns the number
    computed. ``without_split`` are the flags with no percentage rule now: one that lost its
    rule gets the row without arms too, instead of the arms of a split it no longer has (no
    new event of it is in an arm, so nothing marks it dirty). One transaction: a failed run
    leaves the dirty marks for the next one."""
    with transaction(con):
        run_script(con, "arm_summaries")
        computed = _health_rows(con)
        con.execute(
            "DELETE FROM flag_health WHERE (environment_id, flag_key) IN "
            "(SELECT (environment_id, flag_key) FROM health_dirty)"
        )
        _insert_health_rows(con, computed)
        _drop_arms_without_a_split(con, without_split)
        _add_flags_without_arms(con)
        con.execute("DELETE FROM health_dirty")
    return len(computed)


def _insert_health_rows(con: duckdb.DuckDBPyConnection, rows: list[list]) -> None:
    """Multi-row INSERTs of ``_INSERT_CHUNK`` rows: ``executemany`` took 2 ms a row."""
    columns = f"({', '.join(HEALTH_COLUMNS)}, computed_at)"
    for start in range(0, len(rows), _INSERT_CHUNK):
        chunk = rows[start : start + _INSERT_CHUNK]
        row = f"({', '.join('?' * len(chunk[0]))}, current_timestamp)"
        con.execute(
            f"INSERT INTO flag_health {columns} VALUES {', '.join([row] * len(chunk))}",
            [value for values in chunk for value in values],
        )


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


COMPARISONS = ("failure_rate", "latency_p95", "coverage")
"""The comparisons of a ``flag_health`` row, in column order."""

_ARM_FIELDS = (
    "users", "users_with_feedback", "failed_users", "coverage", "failure_rate",
    "latency_users", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms",
)  # fmt: skip
HEALTH_COLUMNS = (
    "organization_id", "environment_id", "flag_key", "rollout_percentage",
    *(f"{arm}_{field}" for arm in ARMS for field in _ARM_FIELDS),
    "sample_ratio_expected", "sample_ratio_observed", "sample_ratio_p_value",
    "sample_ratio_mismatch",
    *(f"{c}_{field}" for c in COMPARISONS for field in ("difference", "ci_low", "ci_high",
                                                         "decision")),
    "withheld_reason", "confidence",
)  # fmt: skip
"""``flag_health``'s columns as ``health_row`` fills them (``computed_at`` is the insert's)."""


class HealthInput(NamedTuple):
    """What one ``flag_health`` row is computed from (``health_rows``)."""

    organization: str | None
    env: str
    flag: str
    percentage: float
    treatment: ArmFigures
    control: ArmFigures


def health_row(
    organization: str | None,
    env: str,
    flag: str,
    percentage: float,
    treatment: ArmFigures,
    control: ArmFigures,
) -> list:
    """One ``flag_health`` row (``health_rows`` of one input)."""
    row = HealthInput(organization, env, flag, percentage, treatment, control)
    return health_rows([row])[0]


def health_rows(inputs: Sequence[HealthInput]) -> list[list]:
    """One ``flag_health`` row (without ``computed_at``) per input, in ``HEALTH_COLUMNS``
    order, its comparisons at the contract's ``CONFIDENCE``. The proportion comparisons of
    every input are computed together (``compare_all_proportions``): a hundred intervals in
    one vectorized refinement. (A guarded rollout's decisions rest on the guard's own
    evidence over the whole rollout, ``pipelines.guard_evidence``, not on these.)"""
    ratios = [
        sample_ratio(i.treatment.users, i.control.users, i.percentage / 100.0) for i in inputs
    ]
    compared = comparisons(inputs, ratios, CONFIDENCE)
    rows = []
    for i, ratio, result in zip(inputs, ratios, compared, strict=True):
        reasons = [str(c.reason) for c in result if c.reason]
        rows.append(
            [
                i.organization,
                i.env,
                i.flag,
                i.percentage,
                *_arm_columns(i.treatment),
                *_arm_columns(i.control),
                ratio.expected,
                ratio.observed,
                ratio.p_value,
                ratio.mismatch,
                *(column for comparison in result for column in _comparison_columns(comparison)),
                reasons[0] if reasons else None,
                CONFIDENCE,
            ]
        )
    return rows


def comparisons(
    inputs: Sequence[HealthInput], ratios: Sequence[SampleRatio], confidence: float
) -> list[tuple[Comparison, Comparison, Comparison]]:
    """Failure rate, p95 latency and coverage of each input, treatment against control, at
    ``confidence``; all withheld when its sample ratio mismatches."""
    proportions: list[ProportionComparison] = []
    latencies = []
    for i, ratio in zip(inputs, ratios, strict=True):
        withheld = WithheldReason.SAMPLE_RATIO_MISMATCH if ratio.mismatch else None
        treatment, control = i.treatment, i.control
        proportions.append(
            ProportionComparison(
                treatment.failed_users,
                treatment.users_with_feedback,
                control.failed_users,
                control.users_with_feedback,
                withheld_reason=withheld,
            )
        )
        proportions.append(
            ProportionComparison(
                treatment.users_with_feedback,
                treatment.users,
                control.users_with_feedback,
                control.users,
                higher_is_worse=False,
                withheld_reason=withheld,
            )
        )
        latencies.append(
            compare_quantiles(
                treatment.latency.cells(LATENCY_QUANTILE),
                control.latency.cells(LATENCY_QUANTILE),
                LATENCY_QUANTILE,
                confidence=confidence,
                withheld_reason=withheld,
            )
        )
    compared = compare_all_proportions(proportions, confidence=confidence)
    return [
        (failure, latency, coverage)
        for failure, coverage, latency in zip(
            compared[0::2], compared[1::2], latencies, strict=True
        )
    ]


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


def _comparison_columns(comparison: Comparison) -> list:
    low, high = comparison.ci if comparison.ci is not None else (None, None)
    return [comparison.difference, low, high, str(comparison.decision)]


def _drop_arms_without_a_split(
    con: duckdb.DuckDBPyConnection, without_split: Collection[tuple[str, str]]
) -> None:
    """Delete the rows with arms of the flag environments in ``without_split``."""
    if without_split:
        con.execute(
            "DELETE FROM flag_health WHERE rollout_percentage IS NOT NULL"
            " AND list_contains(?, [environment_id, flag_key])",
            [sorted([environment, flag] for environment, flag in without_split)],
        )


def _add_flags_without_arms(con: duckdb.DuckDBPyConnection) -> None:
    withheld = str(Decision.WITHHELD)
    con.execute(
        "INSERT INTO flag_health (organization_id, environment_id, flag_key, "
        "failure_rate_decision, latency_p95_decision, coverage_decision, withheld_reason, "
        "confidence, computed_at) "
        "SELECT m.organization_id, m.environment_id, m.flag_key, ?, ?, ?, ?, ?, "
        "current_timestamp FROM flag_environment_metrics m "
        "ANTI JOIN flag_health h USING (environment_id, flag_key)",
        [withheld, withheld, withheld, str(WithheldReason.NO_PERCENTAGE_RULE), CONFIDENCE],
    )
