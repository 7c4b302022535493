"""Environment keys from the control plane, kept as a small dimension."""

import dagster as dg

from pipelines.constants import ENVIRONMENT_KEYS, GROUP
from pipelines.resources import ControlPlaneResource, WarehouseResource


# Kinds: the control plane's database too, sqlite here or postgres (definitions.py).
@dg.asset(name=ENVIRONMENT_KEYS, group_name=GROUP, kinds={"duckdb", "sqlite"})
def environment_keys(
    context: dg.AssetExecutionContext,
    control_plane: ControlPlaneResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    """Environment id -> key (e.g. `production`), read from the control-plane database and
    upserted into `environment_keys` each run. Events carry ids only; this gives the metrics
    their `environment_key`. A missing database or table leaves keys unknown (NULL) and does not
    fail the run; keys seen before are kept."""
    pairs = control_plane.environment_keys()
    if not pairs:
        context.log.warning(
            "control plane has no readable environments table; keys stay as they were"
        )
    with warehouse.connect() as con:
        if pairs:
            # Plain lists as parameters: registering an Arrow table made DuckDB import pandas
            # (about 0.8 s). The unnests of one SELECT advance together, row by row.
            con.execute(
                "INSERT INTO environment_keys "
                "SELECT unnest(?), unnest(?), current_timestamp ON CONFLICT DO UPDATE SET "
                "environment_key = excluded.environment_key, refreshed_at = excluded.refreshed_at",
                [[p[0] for p in pairs], [p[1] for p in pairs]],
            )
        known = con.execute("SELECT count(*) FROM environment_keys").fetchone()[0]
    return dg.MaterializeResult(
        metadata={"environments_read": len(pairs), "dagster/row_count": int(known)}
    )
