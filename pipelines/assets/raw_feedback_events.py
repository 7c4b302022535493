"""Raw feedback events, loaded incrementally from the Parquet lake: each file exactly once."""

import dagster as dg

from api.eventlog.schema import FEEDBACK
from pipelines.constants import GROUP, RAW_FEEDBACK
from pipelines.loading import load_event_type
from pipelines.parts import InsightsAsset, InsightsResources, Metadata


def _load_feedback(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    return load_event_type(context, FEEDBACK, resources)


raw_feedback_events = InsightsAsset(
    spec=dg.AssetSpec(
        RAW_FEEDBACK,
        group_name=GROUP,
        kinds={"duckdb", "parquet"},
        description=(
            "Feedback events from the lake (`events/event_type=feedback/date=*/*.parquet`), appended as "
            "received to the working table `feedback_events` (duplicates included: deduplication "
            "happens in `attributed_feedback`). Each sealed file is loaded exactly once (ledger "
            "`loaded_files`)."
        ),
    ),
    materialize=_load_feedback,
)
