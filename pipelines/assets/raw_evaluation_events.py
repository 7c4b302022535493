"""Raw evaluation events, loaded incrementally from the Parquet lake: each file exactly once."""

import dagster as dg

from api.eventlog.schema import EVALUATION
from pipelines.constants import GROUP, RAW_EVALUATIONS
from pipelines.loading import load_event_type
from pipelines.resources import EventLakeResource, WarehouseResource


@dg.asset(name=RAW_EVALUATIONS, group_name=GROUP, kinds={"duckdb", "parquet"})
def raw_evaluation_events(
    context: dg.AssetExecutionContext, lake: EventLakeResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Evaluation events from the lake (`events/event_type=evaluation/date=*/*.parquet`),
    appended to the working table `evaluation_events`. Each sealed file is loaded exactly once,
    recorded in the ledger `loaded_files`, however often the pipeline runs; files still being
    written (`.*`, `*.tmp`) are ignored. An evaluation id seen twice (a re-sealed copy) is kept
    once and counted as `duplicate_rows_dropped`. Re-running with no new file is a no-op."""
    metadata = load_event_type(context, EVALUATION, lake.lake(), warehouse)
    return dg.MaterializeResult(metadata=metadata)
