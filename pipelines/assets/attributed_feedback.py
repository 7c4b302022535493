"""Feedback deduplicated and attributed to its evaluation's flag environment."""

import dagster as dg

from pipelines.attribution import fold_new_events
from pipelines.constants import ATTRIBUTED_FEEDBACK, GROUP, RAW_EVALUATIONS, RAW_FEEDBACK
from pipelines.parts import InsightsAsset, InsightsResources, Metadata


def _fold(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    rollouts = resources.control_plane.rollout_starts()
    with resources.warehouse.connect() as con:
        report = fold_new_events(con, context.run_id, rollouts)
    context.log.info(
        f"folded evaluation batches {report.evaluation_batches}, feedback batches "
        f"{report.feedback_batches}; {report.pending_count} feedback pending"
    )
    return {
        "new_feedback_winners": report.new_feedback_winners,
        "attributed_this_run": report.newly_attributed,
        "pending_feedback": report.pending_count,
        "deduplicated_feedback": report.deduplicated_feedback,
        "dagster/row_count": report.deduplicated_feedback,
    }


attributed_feedback = InsightsAsset(
    spec=dg.AssetSpec(
        ATTRIBUTED_FEEDBACK,
        group_name=GROUP,
        kinds={"duckdb"},
        deps=[RAW_EVALUATIONS, RAW_FEEDBACK],
        description=(
            "Feedback deduplicated by evaluation id (the latest `received_at` wins) in "
            "`feedback_latest`, attributed to its evaluation's environment, flag, UTC date and "
            "served value; new evaluations and feedback are folded into the counters "
            "`flag_value_daily_stats` that every metric derives from. Only load batches past the "
            "watermarks are read, in one transaction, so a run costs what is new. Feedback whose "
            "evaluation is not loaded yet is kept as pending (metadata `pending_feedback`) and "
            "attributed on a later run, never dropped."
        ),
    ),
    materialize=_fold,
)
