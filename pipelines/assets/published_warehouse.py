"""The published warehouse file that analysts, notebooks and the dashboard read."""

from pathlib import Path

import dagster as dg
import duckdb

from api.infra.objectstore import is_remote
from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    ENVIRONMENT_KEYS,
    FLAG_ARM_WINDOWS,
    FLAG_ENVIRONMENT_DAILY,
    FLAG_ENVIRONMENT_METRICS,
    FLAG_HEALTH,
    FLAG_LIFECYCLE,
    GROUP,
    METRIC_USERS,
    PUBLISHED_WAREHOUSE,
)
from pipelines.publishing import publish
from pipelines.resources import EventLakeResource, WarehouseResource
from warehouse.compaction import compact, is_full_inspection
from warehouse.shared_snapshot import upload_snapshot


# Kinds: s3 too when the lake is in a bucket, where the snapshot is uploaded (definitions.py).
@dg.asset(
    name=PUBLISHED_WAREHOUSE,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[
        FLAG_ENVIRONMENT_METRICS,
        FLAG_ENVIRONMENT_DAILY,
        FLAG_HEALTH,
        FLAG_ARM_WINDOWS,
        FLAG_LIFECYCLE,
        METRIC_USERS,
        ENVIRONMENT_KEYS,
        ATTRIBUTED_FEEDBACK,
    ],
)
def published_warehouse(
    context: dg.AssetExecutionContext, lake: EventLakeResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """`$FLAGSIGHT_DATA_DIR/warehouse.duckdb`: the metric tables, the flags' lifecycle,
    environments, pending feedback and a load summary, written to a new file and swapped in by
    atomic rename. Readers open it read-only at any time without lock errors; a reader keeps the
    snapshot it opened. Its size (and publishing time) depends on flag environments and days,
    not on the number of events. Tables are documented in warehouse/README.md. With the lake in
    a bucket, the snapshot is also uploaded there for every API host. Once published, the working database's tables are
    compacted (warehouse/compaction.py: small trailing row groups merged, row groups with many
    deleted rows written again; metadata `rows_compacted`). A compaction that fails leaves its
    table as it was and only warns (metadata `compaction_error`): the snapshot is published."""
    target = Path(warehouse.published_path)
    with warehouse.connect() as con:
        size = publish(con, target, context.run_id)
        metadata: dict[str, object] = {"path": str(target), "size_bytes": size}
        try:
            compacted = compact(con, full=is_full_inspection(context.run_id))
            metadata["rows_compacted"] = sum(compacted.values())
        except duckdb.Error as exc:  # the table is as it was; the next run compacts it
            context.log.warning(f"working tables not compacted this run: {exc}")
            metadata["compaction_error"] = str(exc)
    if is_remote(lake.events_location):
        metadata["uploaded_to"] = upload_snapshot(target, lake.events_location, lake.s3_options())
    return dg.MaterializeResult(metadata=metadata)
