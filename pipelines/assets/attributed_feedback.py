"""Feedback deduplicated and attributed to its evaluation's flag environment."""

import dagster as dg

from pipelines.attribution import fold_new_events
from pipelines.constants import ATTRIBUTED_FEEDBACK, GROUP, RAW_EVALUATIONS, RAW_FEEDBACK
from pipelines.resources import ControlPlaneResource, WarehouseResource


@dg.asset(
    name=ATTRIBUTED_FEEDBACK,
    group_name=GROUP,
    kinds={"duckdb"},
    deps=[RAW_EVALUATIONS, RAW_FEEDBACK],
)
def attributed_feedback(
    context: dg.AssetExecutionContext,
    control_plane: ControlPlaneResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:
    """Feedback deduplicated by evaluation id (the latest `received_at` wins) in
    `feedback_latest`, attributed to its evaluation's environment, flag, UTC date and served
    value; new evaluations and feedback are folded into the counters `flag_value_daily_stats`
    that every metric derives from. Only load batches past the watermarks are read, in one
    transaction, so a run costs what is new. Feedback whose evaluation is not loaded yet is kept
    as pending (metadata `pending_feedback`) and attributed on a later run, never dropped."""
    rollouts = control_plane.rollout_starts()
    with warehouse.connect() as con:
        report = fold_new_events(con, context.run_id, rollouts)
    context.log.info(
        f"folded evaluation batches {report.evaluation_batches}, feedback batches "
        f"{report.feedback_batches}; {report.pending_count} feedback pending"
    )
    return dg.MaterializeResult(
        metadata={
            "new_feedback_winners": report.new_feedback_winners,
            "attributed_this_run": report.newly_attributed,
            "pending_feedback": report.pending_count,
            "deduplicated_feedback": report.deduplicated_feedback,
            "dagster/row_count": report.deduplicated_feedback,
        }
    )
