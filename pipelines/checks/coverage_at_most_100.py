"""Feedback coverage never exceeds 100%."""

import dagster as dg
import duckdb

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_ENVIRONMENT_METRICS
from pipelines.parts import InsightsCheck, Metadata


def _coverage_at_most_100(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
    rows = con.execute(
        "SELECT environment_id, flag_key, evaluations, feedback_count, feedback_coverage "
        "FROM flag_environment_metrics WHERE feedback_coverage > 100 ORDER BY ALL"
    ).fetchall()
    return not rows, {"violations": len(rows), "sample": sample(rows)}


coverage_at_most_100 = InsightsCheck(
    spec=dg.AssetCheckSpec(
        "coverage_at_most_100",
        asset=FLAG_ENVIRONMENT_METRICS,
        description="Feedback coverage is at most 100% for every flag environment.",
    ),
    evaluate=_coverage_at_most_100,
)
