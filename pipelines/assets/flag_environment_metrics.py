"""The analyst-facing metrics table per flag environment (contract section 6)."""

import dagster as dg

from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    ENVIRONMENT_KEYS,
    FLAG_ENVIRONMENT_METRICS,
    GROUP,
)
from pipelines.derived import build_metrics
from pipelines.resources import WarehouseResource


@dg.asset(
    name=FLAG_ENVIRONMENT_METRICS,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[ATTRIBUTED_FEEDBACK, ENVIRONMENT_KEYS],
)
def flag_environment_metrics(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """One row per (environment, flag key) seen in evaluation events, unknown flag keys
    included: evaluations, feedback_count (evaluations with feedback), feedback_coverage,
    success/failure counts and rates, avg_latency_ms, computed_at, exactly as contract section 6
    defines them. Rates are unrounded percentages, NULL where the denominator is 0. The admin
    metrics endpoint and the dashboard read this table."""
    with warehouse.connect() as con:
        rows = build_metrics(con)
    return dg.MaterializeResult(metadata={"dagster/row_count": rows})
