"""Success and failure rates add up to 100 wherever defined."""

import dagster as dg

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_ENVIRONMENT_METRICS
from pipelines.resources import WarehouseResource

_RATE_TOLERANCE = 1e-9


@dg.asset_check(asset=FLAG_ENVIRONMENT_METRICS)
def success_plus_failure_is_100(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """success_rate + failure_rate = 100 wherever the rates are defined (feedback > 0)."""
    with warehouse.connect() as con:
        rows = con.execute(
            "SELECT environment_id, flag_key, success_rate, failure_rate "
            "FROM flag_environment_metrics WHERE feedback_count > 0 "
            "AND (success_rate IS NULL OR failure_rate IS NULL "
            f"OR abs(success_rate + failure_rate - 100) > {_RATE_TOLERANCE}) ORDER BY ALL"
        ).fetchall()
    return dg.AssetCheckResult(
        passed=not rows, metadata={"violations": len(rows), "sample": sample(rows)}
    )
