"""Release health per flag environment (contract section 9): the arms of its current split,
compared with the always-valid statistics of ``warehouse.statistics``.

Only flag environments whose arms changed since the last run (``health_dirty``) are computed
again, so a run costs what is new. The per-user figures come from SQL (``arm_summaries.sql``);
the decisions from the pure statistics package; the p95 intervals from the order statistics
that ``quantile_ci_ranks`` names, read back from SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from api.eventlog.schema import ARM_CONTROL, ARM_TREATMENT
from warehouse.sql import run_script
from warehouse.statistics import (
    CONFIDENCE,
    Comparison,
    Decision,
    QuantileSummary,
    WithheldReason,
    compare_proportions,
    compare_quantiles,
    quantile_ci_ranks,
    sample_ratio,
)

LATENCY_QUANTILE = 0.95
ARMS = (ARM_TREATMENT, ARM_CONTROL)
TAIL_LEVEL = 0.85
"""The p95's interval ranks always lie above this share of an arm's users (its lower rank is
above 0.879 n wherever it exists: ``tests/pipelines/test_health_ranks.py``), so only the users
at or above the arm's 85th percentile are sorted to find them (``arm_summaries.sql``)."""


@dataclass(frozen=True)
class ArmFigures:
    users: int
    users_with_feedback: int
    failed_users: int
    latency_users: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None

    @property
    def coverage(self) -> float | None:
        return 100.0 * self.users_with_feedback / self.users if self.users else None

    @property
    def failure_rate(self) -> float | None:
        if not self.users_with_feedback:
            return None
        return 100.0 * self.failed_users / self.users_with_feedback


EMPTY_ARM = ArmFigures(0, 0, 0, 0, None, None, None)


def compute_health(con: duckdb.DuckDBPyConnection) -> int:
    """Recompute ``flag_health`` for the dirty flag environments and add a row (arms null,
    decisions withheld) for each flag environment with metrics but none; returns the number
    computed. One transaction: a failed run leaves the dirty marks for the next one."""
    con.execute("BEGIN TRANSACTION")
    try:
        run_script(con, "arm_summaries")
        computed = _health_rows(con)
        con.execute(
            "DELETE FROM flag_health WHERE (environment_id, flag_key) IN "
            "(SELECT (environment_id, flag_key) FROM health_dirty)"
        )
        for row in computed:
            con.execute(
                f"INSERT INTO flag_health VALUES ({', '.join('?' * len(row))}, current_timestamp)",
                row,
            )
        _add_flags_without_arms(con)
        con.execute("DELETE FROM health_dirty")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(computed)


def _health_rows(con: duckdb.DuckDBPyConnection) -> list[list]:
    epochs = con.execute(
        "SELECT environment_id, flag_key, rollout_percentage FROM health_epoch ORDER BY ALL"
    ).fetchall()
    arms = {
        (env, flag, arm): (org, ArmFigures(*figures))
        for env, flag, arm, org, *figures in con.execute(
            "SELECT environment_id, flag_key, arm, organization_id, users, users_with_feedback, "
            "failed_users, latency_users, latency_p50_ms, latency_p95_ms, latency_p99_ms "
            "FROM health_arms"
        ).fetchall()
    }
    bounds = _latency_bounds(con, arms)
    rows = []
    for env, flag, percentage in epochs:
        organization = next((arms[(env, flag, a)][0] for a in ARMS if (env, flag, a) in arms), None)
        treatment = arms.get((env, flag, ARM_TREATMENT), (None, EMPTY_ARM))[1]
        control = arms.get((env, flag, ARM_CONTROL), (None, EMPTY_ARM))[1]
        rows.append(health_row(organization, env, flag, percentage, treatment, control, bounds))
    return rows


def health_row(
    organization: str | None,
    env: str,
    flag: str,
    percentage: float,
    treatment: ArmFigures,
    control: ArmFigures,
    bounds: dict[tuple[str, str, str], tuple[float | None, float | None]],
) -> list:
    """One ``flag_health`` row (without ``computed_at``), in the table's column order."""
    ratio = sample_ratio(treatment.users, control.users, percentage / 100.0)
    withheld = WithheldReason.SAMPLE_RATIO_MISMATCH if ratio.mismatch else None
    failure = compare_proportions(
        treatment.failed_users,
        treatment.users_with_feedback,
        control.failed_users,
        control.users_with_feedback,
        withheld_reason=withheld,
    )
    latency = compare_quantiles(
        _quantile(treatment, bounds.get((env, flag, ARM_TREATMENT))),
        _quantile(control, bounds.get((env, flag, ARM_CONTROL))),
        withheld_reason=withheld,
    )
    coverage = compare_proportions(
        treatment.users_with_feedback,
        treatment.users,
        control.users_with_feedback,
        control.users,
        higher_is_worse=False,
        withheld_reason=withheld,
    )
    reasons = [str(c.reason) for c in (failure, latency, coverage) if c.reason]
    return [
        organization,
        env,
        flag,
        percentage,
        *_arm_columns(treatment),
        *_arm_columns(control),
        ratio.expected,
        ratio.observed,
        ratio.p_value,
        ratio.mismatch,
        *_comparison_columns(failure),
        *_comparison_columns(latency),
        *_comparison_columns(coverage),
        reasons[0] if reasons else None,
        CONFIDENCE,
    ]


def _arm_columns(arm: ArmFigures) -> list:
    return [
        arm.users,
        arm.users_with_feedback,
        arm.failed_users,
        arm.coverage,
        arm.failure_rate,
        arm.latency_users,
        arm.latency_p50_ms,
        arm.latency_p95_ms,
        arm.latency_p99_ms,
    ]


def _comparison_columns(comparison: Comparison) -> list:
    low, high = comparison.ci if comparison.ci is not None else (None, None)
    return [comparison.difference, low, high, str(comparison.decision)]


def _quantile(arm: ArmFigures, bound: tuple[float | None, float | None] | None) -> QuantileSummary:
    lower, upper = bound if bound is not None else (None, None)
    return QuantileSummary(arm.latency_users, arm.latency_p95_ms, lower, upper)


def _latency_bounds(
    con: duckdb.DuckDBPyConnection, arms: dict[tuple[str, str, str], tuple]
) -> dict[tuple[str, str, str], tuple[float | None, float | None]]:
    """The order statistics bounding each arm's p95 latency (``quantile_ci_ranks``)."""
    wanted = {}
    for key, (_, figures) in arms.items():
        ranks = quantile_ci_ranks(figures.latency_users, LATENCY_QUANTILE, CONFIDENCE)
        if ranks is not None:
            assert ranks[0] >= TAIL_LEVEL * figures.latency_users, "rank below the sorted tail"
            wanted[key] = ranks
    if not wanted:
        return {}
    keys = list(wanted)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE health_ranks AS SELECT unnest(?::VARCHAR[]) AS "
        "environment_id, unnest(?::VARCHAR[]) AS flag_key, unnest(?::VARCHAR[]) AS arm, "
        "unnest(?::BIGINT[]) AS lo, unnest(?::BIGINT[]) AS hi",
        [
            [k[0] for k in keys],
            [k[1] for k in keys],
            [k[2] for k in keys],
            [wanted[k][0] for k in keys],
            [wanted[k][1] for k in keys],
        ],
    )
    # Ranks within the tail (latency >= the arm's 85th percentile), offset by the users below it.
    rows = con.execute(
        "WITH tail AS (SELECT u.environment_id, u.flag_key, u.arm, u.latency_ms, a.latency_users "
        "FROM health_users u JOIN health_arms a USING (environment_id, flag_key, arm) "
        "WHERE u.latency_ms >= a.latency_tail_from), "
        "ranked AS (SELECT environment_id, flag_key, arm, latency_ms, "
        "row_number() OVER w - 1 + latency_users - count(*) OVER w AS rank FROM tail "
        "WINDOW w AS (PARTITION BY environment_id, flag_key, arm ORDER BY latency_ms "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) "
        "SELECT r.environment_id, r.flag_key, r.arm, "
        "max(latency_ms) FILTER (WHERE rank = lo), max(latency_ms) FILTER (WHERE rank = hi) "
        "FROM ranked r JOIN health_ranks k USING (environment_id, flag_key, arm) "
        "WHERE rank = lo OR rank = hi GROUP BY ALL"
    ).fetchall()
    return {(env, flag, arm): (lo, hi) for env, flag, arm, lo, hi in rows}


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
