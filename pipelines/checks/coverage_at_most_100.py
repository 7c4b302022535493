"""Feedback coverage never exceeds 100%."""

import dagster as dg

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_ENVIRONMENT_METRICS
from pipelines.resources import WarehouseResource


@dg.asset_check(asset=FLAG_ENVIRONMENT_METRICS)
def coverage_at_most_100(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """Feedback coverage is at most 100% for every flag environment."""
    with warehouse.connect() as con:
        rows = con.execute(
            "SELECT environment_id, flag_key, evaluations, feedback_count, feedback_coverage "
            "FROM flag_environment_metrics WHERE feedback_coverage > 100 ORDER BY ALL"
        ).fetchall()
    return dg.AssetCheckResult(
        passed=not rows, metadata={"violations": len(rows), "sample": sample(rows)}
    )
