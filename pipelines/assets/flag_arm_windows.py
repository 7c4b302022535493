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
    (UTC minutes kept 48 hours, hours 35 days, days always). The windows touched by new events
    since the last run are deleted and inserted again from the events, so a run is idempotent
    and costs what is new. Descriptive (evaluation level): the decisions are flag_health's."""
    with warehouse.connect() as con:
        touched = con.execute("SELECT count(*) FROM window_dirty").fetchone()[0]
        rows = build_windows(con)
    return dg.MaterializeResult(
        metadata={"minutes_touched": int(touched), "dagster/row_count": rows}
    )
