"""The metrics per flag environment and UTC date, for the charts of the metrics page."""

import dagster as dg

from pipelines.constants import ATTRIBUTED_FEEDBACK, FLAG_ENVIRONMENT_DAILY, GROUP
from pipelines.derived import build_daily
from pipelines.resources import WarehouseResource


@dg.asset(
    name=FLAG_ENVIRONMENT_DAILY,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[ATTRIBUTED_FEEDBACK],
)
def flag_environment_daily(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The same figures per flag environment and UTC date of the evaluation: feedback counts on
    the day its evaluation happened, whenever it arrived. For coverage and success-rate charts
    over time."""
    with warehouse.connect() as con:
        rows = build_daily(con)
    return dg.MaterializeResult(metadata={"dagster/row_count": rows})
