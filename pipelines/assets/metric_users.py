"""Outcomes beyond success: each followed metric per exposed user, and its comparison between
the arms (contract section 13; ``pipelines/metrics.py``)."""

import dagster as dg

from pipelines.constants import ATTRIBUTED_FEEDBACK, FLAG_HEALTH, GROUP, METRIC_USERS, RAW_TRACK
from pipelines.metrics import compute_metrics
from pipelines.resources import ControlPlaneResource, WarehouseResource
from warehouse.compaction import is_full_inspection


@dg.asset(
    name=METRIC_USERS,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[RAW_TRACK, ATTRIBUTED_FEEDBACK, FLAG_HEALTH],
)
def metric_users(
    context: dg.AssetExecutionContext,
    control_plane: ControlPlaneResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    """Per followed metric, flag environment, arm and exposed user: the user's value over the
    metric's window from its first exposure, and over the 7 days before it (the covariate of
    the regression adjustment); then each metric's comparison of the current split's arms
    (``health_comparisons``, one row per flag environment and metric: means per user, the
    always-valid interval of their difference, the decision read by the metric's ``better``,
    and how much the pre-exposure data narrowed it). Follows come from the control plane,
    a running rollout's metric guardrails included (docs/warehouse.md). The arms' moments
    are kept by differences; the runs that inspect every table for compaction (about one in
    sixteen, by their id) also sum every arm's moments afresh (metadata `moments_rebuilt`)."""
    follows = control_plane.metric_follows()
    rebuild = is_full_inspection(context.run_id)
    with warehouse.connect() as con:
        compared = compute_metrics(con, follows, rebuild_all=rebuild)
        users, decided = con.execute(
            "SELECT (SELECT count(*) FROM metric_users), "
            "(SELECT count(*) FROM health_comparisons WHERE starts_with(comparison, 'metric:') "
            "AND decision IN ('regression', 'improvement'))"
        ).fetchone()
    return dg.MaterializeResult(
        metadata={
            "follows": len(follows),
            "comparisons": compared,
            "comparisons_with_a_decision": int(decided),
            "moments_rebuilt": rebuild,
            "dagster/row_count": int(users),
        }
    )
