"""Every flag's lifecycle stage and its evidence (contract section 14, docs/lifecycle.md)."""

import time

import dagster as dg

from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    FLAG_LIFECYCLE,
    GROUP,
    RAW_EVALUATIONS,
    ROLLOUT_DECISIONS,
)
from pipelines.lifecycle import compute_lifecycle, newly_stale, read_flags
from pipelines.resources import ControlPlaneResource, LifecycleResource, WarehouseResource
from warehouse.lifecycle import STAGES

NEWLY_STALE_LISTED = 100
"""The newly stale flags the metadata names (all are counted)."""


# Kinds: the control plane is read, sqlite here or postgres (definitions.py).
@dg.asset(
    name=FLAG_LIFECYCLE,
    group_name=GROUP,
    kinds={"duckdb", "sqlite"},
    deps=[RAW_EVALUATIONS, ATTRIBUTED_FEEDBACK, ROLLOUT_DECISIONS],
)
def flag_lifecycle(
    context: dg.AssetExecutionContext,
    control_plane: ControlPlaneResource,
    warehouse: WarehouseResource,
    lifecycle: LifecycleResource,
) -> dg.MaterializeResult:
    """One row per flag of the control plane and its environment (contract section 14): its
    stage (`new`, `active`, `launched`, `stale`, `permanent`, `archived`), the reasons, and the
    evidence: last evaluation, evaluations and the share that served true in the window,
    applications (`sdk` values), since when it is launched (one value served with no change of
    `enabled` or rules, or a guarded rollout completed at 100 %), and whether an archived flag
    is still evaluated. The evidence is read in one query over day-sized tables (never the
    events again: new evaluations are folded into `flag_sdk_daily` once); the stage is
    `warehouse.lifecycle.lifecycle_stage`, the one the admin API uses. Thresholds are the
    `FLAGSIGHT_LIFECYCLE_*` settings (docs/lifecycle.md). Metadata: flags per stage, and the
    flags that became stale with this run (`newlyStale`)."""
    now = time.time()
    with control_plane.store() as store:
        flags = read_flags(store) if store is not None else []
    with warehouse.connect() as con:
        run = compute_lifecycle(con, flags, now, lifecycle.thresholds())
    # Each (environment id, flag key) here turned stale with this run, once: the `flag.stale`
    # webhook event (contract section 14) is one per transition.
    transitions = newly_stale(run.previous, run.current)
    for environment_id, flag_key in transitions[:NEWLY_STALE_LISTED]:
        context.log.info(f"{flag_key} in {environment_id} is stale")
    stages = list(run.current.values())
    return dg.MaterializeResult(
        metadata={
            **{stage: stages.count(stage) for stage in STAGES},
            "newlyStale": len(transitions),
            "newly_stale_flags": dg.MetadataValue.json(
                [
                    {"environment_id": env, "flag_key": key}
                    for env, key in transitions[:NEWLY_STALE_LISTED]
                ]
            ),
            "folded_batches": f"{run.folded_batches[0]} < load_batch <= {run.folded_batches[1]}",
            "dagster/row_count": len(stages),
        }
    )
