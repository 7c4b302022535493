"""Release health per flag environment: arms, sample ratio, always-valid comparisons."""

import dagster as dg

from pipelines.constants import ATTRIBUTED_FEEDBACK, FLAG_ENVIRONMENT_METRICS, FLAG_HEALTH, GROUP
from pipelines.health import compute_health
from pipelines.resources import ControlPlaneResource, WarehouseResource


@dg.asset(
    name=FLAG_HEALTH,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[ATTRIBUTED_FEEDBACK, FLAG_ENVIRONMENT_METRICS],
)
def flag_health(
    control_plane: ControlPlaneResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Release health per flag environment (contract section 9): the treatment and control arms
    of its first percentage rule at its current percentage, counted in users (a user with any
    failed feedback failed; its latency is its mean), the sample-ratio check against the split
    (p < 0.001 withholds every decision), and always-valid comparisons of failure rate, p95
    latency and coverage with their 95% confidence sequences (docs/statistics.md), one
    ``health_comparisons`` row per comparison of the catalogue (``api.controlplane.catalogue``). Only
    flag environments whose arms changed since the last run are computed again; a flag without a
    percentage rule now (in the control plane) has no arms. The health endpoint, the health view
    and the rollout guardian read this table."""
    without_split = control_plane.flags_without_a_split()
    with warehouse.connect() as con:
        computed = compute_health(con, without_split)
        total, decided, mismatched = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE (environment_id, flag_key) IN ("
            " SELECT (environment_id, flag_key) FROM health_comparisons"
            " WHERE decision IN ('regression', 'improvement'))),"
            " count(*) FILTER (WHERE sample_ratio_mismatch) FROM flag_health"
        ).fetchone()
    return dg.MaterializeResult(
        metadata={
            "recomputed": computed,
            "flags_with_a_decision": int(decided),
            "sample_ratio_mismatches": int(mismatched),
            "dagster/row_count": int(total),
        }
    )
