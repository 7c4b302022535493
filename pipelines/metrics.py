"""Outcomes beyond success (contract section 13): each followed metric's value per exposed user
(``metric_users``) and its comparison between the arms of the flag's current split, one
``health_comparisons`` row per flag environment and metric.

``metric_users`` is kept up to date rather than recomputed: a row's value moves only when its
user's exposure changes (the fold marks it), when its user has a new tracked event of the
metric's event (a watermark over the loads of tracked events), or when its follow is new or
its metric changed; an event outside a window never counts in it, so a window closing moves
nothing (``warehouse/sql/metric_users.sql``). The comparisons read per-arm moments (one SQL aggregate per
arm, ``MOMENT_COLUMNS``) into the pure statistics: conversion through the proportion sequence
of failure rate and coverage, count and sum as means, mean as a ratio of per-user sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import duckdb
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT

from api.controlplane.catalogue import METRIC_PREFIX, metric_name
from api.controlplane.model import Better, MetricFollow, MetricKind
from api.eventlog.schema import TRACK
from pipelines.watermarks import latest_batch, set_watermark, watermark
from warehouse.sql import run_script, transaction
from warehouse.statistics import CONFIDENCE, Decision, WithheldReason, compare_proportions
from warehouse.statistics.means import MOMENT_COLUMNS, MeanMoments, compare_means

PRE_PERIOD_DAYS = 7
"""The pre-exposure window of the regression adjustment (contract section 13)."""

METRICS_FOLDED = "metrics_folded"
"""``fold_state``'s watermark: the last load batch of tracked events ``metric_users`` read."""


class MetricResult(NamedTuple):
    """One metric's comparison of a flag environment's current split."""

    treatment_users: int
    treatment_mean: float | None
    control_users: int
    control_mean: float | None
    difference: float | None
    ci: tuple[float, float] | None
    decision: Decision
    variance_reduction: float | None
    withheld_reason: str | None


def load_follows(con: duckdb.DuckDBPyConnection, follows: Sequence[MetricFollow]) -> None:
    """The control plane's follows as the temp table ``metric_follows`` the SQL reads."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE metric_follows (organization_id VARCHAR, "
        "environment_id VARCHAR, flag_key VARCHAR, metric_key VARCHAR, event_name VARCHAR, "
        "kind VARCHAR, window_hours INTEGER, better VARCHAR)"
    )
    rows = sorted(
        {
            (f.organization_id, f.environment_id, f.flag_key, f.metric.key, f.metric.event,
             str(f.metric.kind), int(f.metric.window_hours), str(f.metric.better))
            for f in follows
        }
    )  # fmt: skip
    if rows:
        con.executemany("INSERT INTO metric_follows VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)


def compute_metrics(con: duckdb.DuckDBPyConnection, follows: Sequence[MetricFollow]) -> int:
    """Bring ``metric_users`` up to date (only the rows the tracked events loaded since the
    last run, the users whose exposure changed and the follows that changed can move) and
    replace the metrics' rows of ``health_comparisons`` (a metric no longer followed loses its
    row); returns the number of comparisons. One transaction: a failed run leaves the marks
    and the watermark for the next one."""
    with transaction(con):
        load_follows(con, follows)
        lo = watermark(con, METRICS_FOLDED)
        hi = max(lo, latest_batch(con, TRACK))
        params = {"pre_days": PRE_PERIOD_DAYS, "track_lo": lo, "track_hi": hi}
        run_script(con, "metric_users", params)
        set_watermark(con, METRICS_FOLDED, hi)
        rows = _comparison_rows(con)
        con.execute(
            f"DELETE FROM health_comparisons WHERE starts_with(comparison, '{METRIC_PREFIX}')"
        )
        for row in rows:
            con.execute(
                "INSERT INTO health_comparisons VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
                row,
            )
    return len(rows)


def _comparison_rows(con: duckdb.DuckDBPyConnection) -> list[list]:
    splits = _current_splits(con)
    mismatched = {
        (env, flag)
        for env, flag in con.execute(
            "SELECT environment_id, flag_key FROM flag_health WHERE sample_ratio_mismatch"
        ).fetchall()
    }
    moments = _arm_moments(con)
    rows = []
    for organization, env, flag, metric_key, kind, better in con.execute(
        "SELECT organization_id, environment_id, flag_key, metric_key, kind, better "
        "FROM metric_follows ORDER BY ALL"
    ).fetchall():
        percentage = splits.get((env, flag))
        arms = {
            arm: moments.get((metric_key, env, flag, percentage, arm), MeanMoments.of([]))
            for arm in (ARM_TREATMENT, ARM_CONTROL)
        }
        if percentage is None:
            withheld = str(WithheldReason.NO_PERCENTAGE_RULE)
        elif (env, flag) in mismatched:
            withheld = str(WithheldReason.SAMPLE_RATIO_MISMATCH)
        else:
            withheld = None
        result = compare_metric(
            MetricKind(kind), Better(better), arms[ARM_TREATMENT], arms[ARM_CONTROL], withheld
        )
        low, high = result.ci if result.ci is not None else (None, None)
        rows.append(
            [organization, env, flag, metric_name(metric_key), percentage,
             result.treatment_users, result.treatment_mean, result.control_users,
             result.control_mean, result.difference, low, high, CONFIDENCE,
             str(result.decision), result.variance_reduction, result.withheld_reason]
        )  # fmt: skip
    return rows


def compare_metric(
    kind: MetricKind,
    better: Better,
    treatment: MeanMoments,
    control: MeanMoments,
    withheld_reason: str | None = None,
) -> MetricResult:
    """Treatment minus control of one metric, per user (conversion in percentage points, the
    others in the events' unit), at the contract's confidence."""
    higher_is_better = better is Better.HIGHER
    means = (_mean(treatment, kind), _mean(control, kind))
    if kind is MetricKind.CONVERSION:
        compared = compare_proportions(
            round(treatment.y), treatment.n, round(control.y), control.n,
            higher_is_worse=not higher_is_better, withheld_reason=withheld_reason,
        )  # fmt: skip
        return MetricResult(
            treatment.n, means[0], control.n, means[1], compared.difference, compared.ci,
            compared.decision, None, compared.reason,
        )  # fmt: skip
    compared_means = compare_means(
        treatment, control, ratio=kind is MetricKind.MEAN, higher_is_better=higher_is_better,
        withheld_reason=withheld_reason,
    )  # fmt: skip
    return MetricResult(
        treatment.n, means[0], control.n, means[1], compared_means.difference, compared_means.ci,
        compared_means.decision, compared_means.variance_reduction, compared_means.reason,
    )  # fmt: skip


def _mean(arm: MeanMoments, kind: MetricKind) -> float | None:
    """The arm's metric per user: a percentage of users for conversion, the ratio of sums for
    mean, the mean per user otherwise; None without a user (or, for mean, an event)."""
    if kind is MetricKind.MEAN:
        return arm.y / arm.d if arm.d else None
    if not arm.n:
        return None
    return (100.0 if kind is MetricKind.CONVERSION else 1.0) * arm.y / arm.n


def _current_splits(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], float]:
    """Each followed flag environment's current split (the percentage of its latest
    evaluation in an arm, as release health reads it), also as the temp table
    ``metric_splits``."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE metric_splits AS "
        "SELECT u.environment_id, u.flag_key, "
        "arg_max(u.rollout_percentage, u.last_evaluated_at) AS rollout_percentage "
        "FROM arm_users AS u SEMI JOIN metric_follows AS f USING (environment_id, flag_key) "
        "GROUP BY ALL"
    )
    return {
        (env, flag): percentage
        for env, flag, percentage in con.execute("SELECT * FROM metric_splits").fetchall()
    }


def _arm_moments(
    con: duckdb.DuckDBPyConnection,
) -> dict[tuple[str, str, str, float, str], MeanMoments]:
    """Every followed metric's moments in the arms of its flag environment's current split."""
    return {
        (metric, env, flag, percentage, arm): MeanMoments(*values)
        for metric, env, flag, percentage, arm, *values in con.execute(
            "SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, "
            f"{', '.join(MOMENT_COLUMNS)} FROM ("
            " SELECT *, value AS y, denominator AS d, pre_value AS x FROM metric_users"
            " SEMI JOIN metric_splits USING (environment_id, flag_key, rollout_percentage)"
            ") GROUP BY ALL"
        ).fetchall()
    }


def metric_strata(
    con: duckdb.DuckDBPyConnection,
    environment_id: str,
    flag_key: str,
    metric_key: str,
    percentages: Sequence[float],
) -> list[tuple[MeanMoments, MeanMoments]]:
    """A metric guardrail's strata for the guard: treatment and control moments per step."""
    wanted = list(map(float, percentages))
    found = {
        (float(percentage), arm): MeanMoments(*values)
        for percentage, arm, *values in con.execute(
            f"SELECT rollout_percentage, arm, {', '.join(MOMENT_COLUMNS)} FROM ("
            " SELECT *, value AS y, denominator AS d, pre_value AS x FROM metric_users"
            " WHERE metric_key = ? AND environment_id = ? AND flag_key = ?"
            " AND list_contains(?, rollout_percentage)) GROUP BY ALL",
            [metric_key, environment_id, flag_key, wanted],
        ).fetchall()
    }
    empty = MeanMoments.of([])
    return [
        (found.get((p, ARM_TREATMENT), empty), found.get((p, ARM_CONTROL), empty)) for p in wanted
    ]
