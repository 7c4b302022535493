"""Raw feedback events, loaded incrementally from the Parquet lake: each file exactly once."""

import dagster as dg

from api.eventlog.schema import FEEDBACK
from pipelines.constants import GROUP, RAW_FEEDBACK
from pipelines.loading import load_event_type
from pipelines.resources import EventLakeResource, WarehouseResource


@dg.asset(name=RAW_FEEDBACK, group_name=GROUP, kinds={"duckdb", "parquet"})
def raw_feedback_events(
    context: dg.AssetExecutionContext, lake: EventLakeResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Feedback events from the lake (`events/event_type=feedback/date=*/*.parquet`), appended
    as received to the working table `feedback_events` (duplicates included: deduplication
    happens in `attributed_feedback`). Each sealed file is loaded exactly once (ledger
    `loaded_files`)."""
    metadata = load_event_type(context, FEEDBACK, lake.lake(), warehouse)
    return dg.MaterializeResult(metadata=metadata)
