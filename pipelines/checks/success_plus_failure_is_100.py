"""Success and failure rates add up to 100 wherever defined."""

import dagster as dg
import duckdb

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_ENVIRONMENT_METRICS
from pipelines.parts import InsightsCheck, Metadata

_RATE_TOLERANCE = 1e-9


def _success_plus_failure_is_100(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
    rows = con.execute(
        "SELECT environment_id, flag_key, success_rate, failure_rate "
        "FROM flag_environment_metrics WHERE feedback_count > 0 "
        "AND (success_rate IS NULL OR failure_rate IS NULL "
        f"OR abs(success_rate + failure_rate - 100) > {_RATE_TOLERANCE}) ORDER BY ALL"
    ).fetchall()
    return not rows, {"violations": len(rows), "sample": sample(rows)}


success_plus_failure_is_100 = InsightsCheck(
    spec=dg.AssetCheckSpec(
        "success_plus_failure_is_100",
        asset=FLAG_ENVIRONMENT_METRICS,
        description=(
            "success_rate + failure_rate = 100 wherever the rates are defined (feedback > 0)."
        ),
    ),
    evaluate=_success_plus_failure_is_100,
)
