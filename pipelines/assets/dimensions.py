"""Environment keys from the control plane, kept as a small dimension."""

import dagster as dg
import pyarrow as pa

from pipelines.constants import ENVIRONMENT_KEYS, GROUP
from pipelines.resources import ControlPlaneResource, WarehouseResource


@dg.asset(
    name=ENVIRONMENT_KEYS,
    group_name=GROUP,
    kinds={"duckdb", "sqlite"},
    description=(
        "Environment id -> key (e.g. `production`), read from the control-plane database and "
        "upserted into `environment_keys` each run. Events carry ids only; this gives the metrics "
        "their `environment_key`. A missing database or table leaves keys unknown (NULL) and does "
        "not fail the run; keys seen before are kept."
    ),
)
def environment_keys(
    context: dg.AssetExecutionContext,
    control_plane: ControlPlaneResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    pairs = control_plane.environment_keys()
    if not pairs:
        context.log.warning(
            "control plane has no readable environments table; keys stay as they were"
        )
    with warehouse.connect() as con:
        if pairs:
            rows = pa.table(
                {"environment_id": [p[0] for p in pairs], "environment_key": [p[1] for p in pairs]}
            )
            con.complete()
            con.register("control_plane_environments", rows)
            con.execute(
                "INSERT INTO environment_keys SELECT environment_id, environment_key, current_timestamp "
                "FROM control_plane_environments ON CONFLICT DO UPDATE SET "
                "environment_key = excluded.environment_key, refreshed_at = excluded.refreshed_at"
            )
            con.complete()
            con.unregister("control_plane_environments")
        known = con.execute("SELECT count(*) FROM environment_keys").fetchone()[0]
    return dg.MaterializeResult(
        metadata={"environments_read": len(pairs), "dagster/row_count": int(known)}
    )
