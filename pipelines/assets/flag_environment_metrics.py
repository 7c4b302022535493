"""Analyst-facing metric tables, rebuilt from the counters each run."""

import dagster as dg

from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    ENVIRONMENT_KEYS,
    FLAG_ENVIRONMENT_DAILY,
    FLAG_ENVIRONMENT_METRICS,
    FLAG_VALUE_COMPARISON,
    GROUP,
    MIN_FEEDBACK_PER_SIDE,
    SIGNIFICANCE_LEVEL,
)
from pipelines.derived import build_daily, build_metrics, build_value_comparison
from pipelines.parts import InsightsAsset, InsightsResources, Metadata


def _metrics(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    with resources.warehouse.connect() as con:
        rows = build_metrics(con)
    return {"dagster/row_count": rows}


def _daily(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    with resources.warehouse.connect() as con:
        rows = build_daily(con)
    return {"dagster/row_count": rows}


def _comparison(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    with resources.warehouse.connect() as con:
        rows = build_value_comparison(con)
        verdicts = con.execute(
            "SELECT count(*) FROM flag_value_comparison WHERE verdict IS NOT NULL"
        ).fetchone()[0]
    return {"dagster/row_count": rows, "flags_with_verdict": int(verdicts)}


flag_environment_metrics = InsightsAsset(
    spec=dg.AssetSpec(
        FLAG_ENVIRONMENT_METRICS,
        group_name=GROUP,
        kinds={"duckdb"},
        deps=[ATTRIBUTED_FEEDBACK, ENVIRONMENT_KEYS],
        description=(
            "One row per (environment, flag key) seen in evaluation events, unknown flag keys "
            "included: evaluations, feedback_count (evaluations with feedback), "
            "feedback_coverage, success/failure counts and rates, avg_latency_ms, computed_at, "
            "exactly as contract section 6 defines them. Rates are unrounded percentages, NULL "
            "where the denominator is 0. The admin metrics endpoint and the dashboard read this "
            "table."
        ),
    ),
    materialize=_metrics,
)

flag_environment_daily = InsightsAsset(
    spec=dg.AssetSpec(
        FLAG_ENVIRONMENT_DAILY,
        group_name=GROUP,
        kinds={"duckdb"},
        deps=[ATTRIBUTED_FEEDBACK],
        description=(
            "The same figures per flag environment and UTC date of the evaluation: feedback "
            "counts on the day its evaluation happened, whenever it arrived. For coverage and "
            "success-rate charts over time."
        ),
    ),
    materialize=_daily,
)

flag_value_comparison = InsightsAsset(
    spec=dg.AssetSpec(
        FLAG_VALUE_COMPARISON,
        group_name=GROUP,
        kinds={"duckdb"},
        deps=[ATTRIBUTED_FEEDBACK],
        description=(
            "The figures split by served value (on = true, off = false) per flag environment, "
            "with a two-sided two-proportion z-test of the success rates (alpha "
            f"{SIGNIFICANCE_LEVEL}). Below {MIN_FEEDBACK_PER_SIDE} deduplicated feedback events "
            "on either side no p-value and no verdict are given; `no_verdict_reason` says why."
        ),
    ),
    materialize=_comparison,
)
