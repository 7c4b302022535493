"""Raw tracked events, loaded incrementally from the Parquet lake: each file exactly once."""

import dagster as dg

from api.eventlog.schema import TRACK
from pipelines.constants import GROUP, RAW_TRACK
from pipelines.loading import load_event_type
from pipelines.resources import EventLakeResource, WarehouseResource


@dg.asset(name=RAW_TRACK, group_name=GROUP, kinds={"duckdb", "parquet"})
def raw_track_events(
    context: dg.AssetExecutionContext, lake: EventLakeResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Tracked events (`POST /v1/track`, the SDK's and the OpenFeature provider's `track`) from
    the lake (`events/event_type=track/date=*/*.parquet`), appended as received to the working
    table `track_events`, each load sorted by environment, event name, user and time (how
    metrics read them). Each sealed file is loaded exactly once (ledger `loaded_files`); a
    tracked event has no id, so rows are never deduplicated."""
    metadata = load_event_type(context, TRACK, lake.lake(), warehouse)
    return dg.MaterializeResult(metadata=metadata)
