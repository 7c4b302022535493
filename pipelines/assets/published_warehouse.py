"""The published warehouse file that analysts, notebooks and the dashboard read."""

import time
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
from warehouse.read import outcomes_path
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
    table as it was and only warns (metadata `compaction_error`): the snapshot is published.
    The analysts' per-user tables of followed metrics (`metric_users`, `track_events`) go to
    `outcomes.duckdb` beside it, in the same way but at most every `OUTCOMES_REFRESH_S`: they
    grow with users times metrics, and the snapshot every run writes (and every API host
    downloads) must not (metadata `outcomes_size_bytes` when published)."""
    target = Path(warehouse.published_path)
    with warehouse.connect() as con:
        size = publish(con, target, context.run_id)
        metadata: dict[str, object] = {"path": str(target), "size_bytes": size}
        outcomes = outcomes_path(target)
        if _outcomes_due(outcomes, time.time()):
            metadata["outcomes_size_bytes"] = publish(
                con, outcomes, context.run_id, "publish_outcomes"
            )
        try:
            compacted = compact(con, full=is_full_inspection(context.run_id))
            metadata["rows_compacted"] = sum(compacted.values())
        except duckdb.Error as exc:  # the table is as it was; the next run compacts it
            context.log.warning(f"working tables not compacted this run: {exc}")
            metadata["compaction_error"] = str(exc)
    if is_remote(lake.events_location):
        metadata["uploaded_to"] = upload_snapshot(target, lake.events_location, lake.s3_options())
    return dg.MaterializeResult(metadata=metadata)


OUTCOMES_REFRESH_S = 600.0
"""How old ``outcomes.duckdb`` may grow before a run publishes it again (ten minutes: its copy
took 10 s over 4.7 million rows of ``metric_users`` on a loaded 2-core machine)."""


def _outcomes_due(path: Path, now: float) -> bool:
    """Whether ``outcomes.duckdb`` is missing or older than ``OUTCOMES_REFRESH_S``."""
    try:
        return now - path.stat().st_mtime >= OUTCOMES_REFRESH_S
    except FileNotFoundError:
        return True
