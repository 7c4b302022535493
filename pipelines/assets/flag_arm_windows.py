"""Per-arm figures by minute, hour and day: the charts of the health view."""

import dagster as dg

from pipelines.constants import ATTRIBUTED_FEEDBACK, FLAG_ARM_WINDOWS, GROUP
from pipelines.derived import build_windows
from pipelines.resources import WarehouseResource


@dg.asset(
    name=FLAG_ARM_WINDOWS,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[ATTRIBUTED_FEEDBACK],
)
def flag_arm_windows(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Evaluations, users, feedback, failures and latency per arm and time window of evaluation
    (UTC minutes kept 48 hours, hours 35 days, days always). Each fold records what its new
    evaluations and feedback changes add per minute and arm; this asset adds that to the
    windows, and counts distinct users again from the arm evaluations of the days new
    evaluations fell in (a distinct count does not add up), so late feedback reads no event
    back. Descriptive (evaluation level): the decisions are flag_health's."""
    with warehouse.connect() as con:
        touched = con.execute(
            "SELECT count(*) FROM (SELECT DISTINCT environment_id, flag_key, minute "
            "FROM window_deltas)"
        ).fetchone()[0]
        rows = build_windows(con)
    return dg.MaterializeResult(
        metadata={"minutes_touched": int(touched), "dagster/row_count": rows}
    )
