"""Every flag's lifecycle stage and its evidence (contract section 14, docs/lifecycle.md)."""

import time
from collections.abc import Mapping
from typing import Any

import dagster as dg

from api.controlplane.store import ControlPlaneStore
from pipelines.constants import (
    ATTRIBUTED_FEEDBACK,
    FLAG_LIFECYCLE,
    GROUP,
    RAW_EVALUATIONS,
    ROLLOUT_DECISIONS,
)
from pipelines.lifecycle import FlagKey, compute_lifecycle, read_flags
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
    flags announced stale by this run (`newlyStale`: the `flag.stale` webhook events it
    queued)."""
    now = time.time()
    with control_plane.store() as store:
        flags = read_flags(store) if store is not None else []
        with warehouse.connect() as con:
            run = compute_lifecycle(con, flags, now, lifecycle.thresholds())
        # `flag.stale` (contract section 14), once per flag and transition: the store keeps
        # which flags it announced, so a run repeated or failed halfway announces none twice.
        transitions = store.announce_stale_flags(with_references(store, run.stale)) if store else []
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


def with_references(
    store: ControlPlaneStore, stale: Mapping[FlagKey, dict[str, Any]]
) -> dict[FlagKey, dict[str, Any]]:
    """The stale flags' documents with their code references (the control plane's, which the
    pipeline's evidence does not hold): what ``flag.stale`` tells its receiver."""
    summaries = {env: store.code_reference_summaries(env) for env, _ in stale}
    return {
        (env, key): {**doc, "codeReferences": summaries[env].get(key, doc["codeReferences"])}
        for (env, key), doc in stale.items()
    }
