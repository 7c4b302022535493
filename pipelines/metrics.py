"""Outcomes beyond success (contract section 13): each followed metric's value per exposed user
(``metric_users``) and its comparison between the arms of the flag's current split, one
``health_comparisons`` row per flag environment and metric.

``metric_users`` is kept up to date rather than recomputed: a row is computed again only when
its user's exposure changes (the fold marks it) or its follow is new or its metric changed;
tracked events loaded since the last run (a watermark over their loads) add to the rows whose
window or pre-period holds them; an event outside a window never counts in it, so a window
closing moves nothing (``warehouse/sql/metric_users.sql``). Each arm's moments
(``metric_moments``) follow the rows by differences, so a run's cost is that of what changed,
not of every exposed user times every followed metric. The comparisons read those moments into
the pure statistics: conversion through the proportion sequence of failure rate and coverage
(every conversion of a run in one vectorized call), count and sum as means, mean as a ratio of
per-user sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import NamedTuple

import duckdb
from flagsight_core.model import ARM_CONTROL, ARM_TREATMENT

from api.controlplane.catalogue import METRIC_PREFIX, metric_name
from api.controlplane.model import Better, MetricFollow, MetricKind
from api.eventlog.schema import TRACK
from pipelines.health import COMPARISON_COLUMNS
from pipelines.watermarks import latest_batch, set_watermark, watermark
from warehouse.sql import insert_rows, run_script, transaction
from warehouse.statistics import (
    CONFIDENCE,
    Decision,
    MeanMoments,
    MeansComparison,
    ProportionComparison,
    WithheldReason,
    compare_all_means,
    compare_all_proportions,
)

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


FOLLOW_COLUMNS = (
    "organization_id", "environment_id", "flag_key", "metric_key", "event_name", "kind",
    "window_hours", "better",
)  # fmt: skip
"""The temp table ``metric_follows``' columns (``metric_follows_state``'s too)."""


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
    insert_rows(con, "metric_follows", FOLLOW_COLUMNS, rows)


def compute_metrics(
    con: duckdb.DuckDBPyConnection, follows: Sequence[MetricFollow], *, rebuild_all: bool = False
) -> int:
    """Bring ``metric_users`` up to date (only the rows the tracked events loaded since the
    last run, the users whose exposure changed and the follows that changed can move) and
    replace the metrics' rows of ``health_comparisons`` (a metric no longer followed loses its
    row); returns the number of comparisons. ``rebuild_all``: every arm's moments summed
    afresh from the rows, not only those a kept difference may have spoilt (the SQL's step
    6). One transaction: a failed run leaves the marks and the watermark for the next one."""
    with transaction(con):
        load_follows(con, follows)
        lo = watermark(con, METRICS_FOLDED)
        hi = max(lo, latest_batch(con, TRACK))
        params = {
            "pre_days": PRE_PERIOD_DAYS, "track_lo": lo, "track_hi": hi,
            "rebuild_all": rebuild_all,
        }  # fmt: skip
        run_script(con, "metric_users", params)
        set_watermark(con, METRICS_FOLDED, hi)
        rows = _comparison_rows(con)
        con.execute(
            f"DELETE FROM health_comparisons WHERE starts_with(comparison, '{METRIC_PREFIX}')"
        )
        insert_rows(con, "health_comparisons", COMPARISON_COLUMNS, rows, computed_at=True)
    return len(rows)


class MetricArms(NamedTuple):
    """What one comparison of a metric reads: its kind and direction, each arm's moments, and
    why it is withheld when it is."""

    kind: MetricKind
    better: Better
    treatment: MeanMoments
    control: MeanMoments
    withheld_reason: str | None = None


def _comparison_rows(con: duckdb.DuckDBPyConnection) -> list[list]:
    splits = _current_splits(con)
    mismatched = {
        (env, flag)
        for env, flag in con.execute(
            "SELECT environment_id, flag_key FROM flag_health WHERE sample_ratio_mismatch"
        ).fetchall()
    }
    moments = _arm_moments(con)
    empty = MeanMoments.of([])
    keys, requests = [], []
    for organization, env, flag, metric_key, kind, better in con.execute(
        "SELECT organization_id, environment_id, flag_key, metric_key, kind, better "
        "FROM metric_follows ORDER BY ALL"
    ).fetchall():
        percentage = splits.get((env, flag))
        arms = {
            arm: moments.get((metric_key, env, flag, percentage, arm), empty)
            for arm in (ARM_TREATMENT, ARM_CONTROL)
        }
        if percentage is None:
            withheld = str(WithheldReason.NO_PERCENTAGE_RULE)
        elif (env, flag) in mismatched:
            withheld = str(WithheldReason.SAMPLE_RATIO_MISMATCH)
        else:
            withheld = None
        keys.append((organization, env, flag, metric_name(metric_key), percentage))
        requests.append(MetricArms(
            MetricKind(kind), Better(better), arms[ARM_TREATMENT], arms[ARM_CONTROL], withheld
        ))  # fmt: skip
    rows = []
    for key, result in zip(keys, compare_metrics(requests), strict=True):
        low, high = result.ci if result.ci is not None else (None, None)
        rows.append(
            [*key, result.treatment_users, result.treatment_mean, result.control_users,
             result.control_mean, result.difference, low, high, CONFIDENCE,
             str(result.decision), result.variance_reduction, result.withheld_reason]
        )  # fmt: skip
    return rows


def compare_metrics(requests: Sequence[MetricArms]) -> list[MetricResult]:
    """Treatment minus control of each metric, per user (conversion in percentage points, the
    others in the events' unit), at the contract's confidence, in order: the conversions in
    one vectorized call, the means in another (a run compares every followed metric of every
    flag environment)."""
    results: dict[int, MetricResult] = {}
    conversions = [i for i, r in enumerate(requests) if r.kind is MetricKind.CONVERSION]
    others = [i for i, r in enumerate(requests) if r.kind is not MetricKind.CONVERSION]
    proportions = compare_all_proportions([
        ProportionComparison(
            round(requests[i].treatment.y), requests[i].treatment.n,
            round(requests[i].control.y), requests[i].control.n,
            requests[i].better is not Better.HIGHER, requests[i].withheld_reason,
        )
        for i in conversions
    ])  # fmt: skip
    means = compare_all_means([
        MeansComparison(
            requests[i].treatment, requests[i].control, requests[i].kind is MetricKind.MEAN,
            requests[i].better is Better.HIGHER, requests[i].withheld_reason,
        )
        for i in others
    ])  # fmt: skip
    for i, compared in [*zip(conversions, proportions, strict=True),
                        *zip(others, means, strict=True)]:  # fmt: skip
        r = requests[i]
        results[i] = MetricResult(
            r.treatment.n, _mean(r.treatment, r.kind), r.control.n, _mean(r.control, r.kind),
            compared.difference, compared.ci, compared.decision,
            getattr(compared, "variance_reduction", None), compared.reason,
        )  # fmt: skip
    return [results[i] for i in range(len(requests))]


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


_MOMENTS = ", ".join(f.name for f in fields(MeanMoments))
"""``metric_moments``' moment columns, named as ``MeanMoments``' fields, in their order."""


def _arm_moments(
    con: duckdb.DuckDBPyConnection,
) -> dict[tuple[str, str, str, float, str], MeanMoments]:
    """Every followed metric's moments in the arms of its flag environment's current split."""
    return {
        (metric, env, flag, percentage, arm): MeanMoments(*values)
        for metric, env, flag, percentage, arm, *values in con.execute(
            "SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, "
            f"{_MOMENTS} FROM metric_moments"
            " SEMI JOIN metric_splits USING (environment_id, flag_key, rollout_percentage)"
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
            f"SELECT rollout_percentage, arm, {_MOMENTS} FROM metric_moments"
            " WHERE metric_key = ? AND environment_id = ? AND flag_key = ?"
            " AND list_contains(?, rollout_percentage)",
            [metric_key, environment_id, flag_key, wanted],
        ).fetchall()
    }
    empty = MeanMoments.of([])
    return [
        (found.get((p, ARM_TREATMENT), empty), found.get((p, ARM_CONTROL), empty)) for p in wanted
    ]
