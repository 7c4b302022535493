"""Raw events, loaded incrementally from the Parquet lake: each sealed file exactly once."""

import dagster as dg

from api.eventlog.schema import EVALUATION, FEEDBACK
from pipelines.constants import GROUP, RAW_EVALUATIONS, RAW_FEEDBACK
from pipelines.loading import RAW_TABLES, LoadReport, load_files
from pipelines.parts import InsightsAsset, InsightsResources, Metadata


def _load(
    context: dg.AssetExecutionContext, event_type: str, resources: InsightsResources
) -> Metadata:
    files = resources.lake.sealed_files(event_type)
    with resources.warehouse.connect() as con:
        report: LoadReport = load_files(con, event_type, files, context.run_id)
        table_rows = con.execute(f"SELECT count(*) FROM {RAW_TABLES[event_type]}").fetchone()[0]
    context.log.info(
        f"{event_type}: {report.file_count} new file(s) of {len(files)}, "
        f"{report.rows_loaded} row(s) loaded, {report.duplicate_rows} duplicate(s) dropped"
    )
    return {
        "new_files": report.file_count,
        "files_in_lake": len(files),
        "rows_read": report.rows_read,
        "rows_loaded": report.rows_loaded,
        "duplicate_rows_dropped": report.duplicate_rows,
        "load_batch": report.load_batch if report.load_batch is not None else -1,
        "dagster/row_count": int(table_rows),
    }


def _load_evaluations(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    return _load(context, EVALUATION, resources)


def _load_feedback(context: dg.AssetExecutionContext, resources: InsightsResources) -> Metadata:
    return _load(context, FEEDBACK, resources)


raw_evaluation_events = InsightsAsset(
    spec=dg.AssetSpec(
        RAW_EVALUATIONS,
        group_name=GROUP,
        kinds={"duckdb", "parquet"},
        description=(
            "Evaluation events from the lake (`events/evaluation/date=*/*.parquet`), appended to "
            "the working table `evaluation_events`. Each sealed file is loaded exactly once, "
            "recorded in the ledger `loaded_files`, however often the pipeline runs; files still "
            "being written (`.*`, `*.tmp`) are ignored. An evaluation id seen twice (a re-sealed "
            "copy) is kept once and counted as `duplicate_rows_dropped`. Re-running with no new "
            "file is a no-op."
        ),
    ),
    materialize=_load_evaluations,
)

raw_feedback_events = InsightsAsset(
    spec=dg.AssetSpec(
        RAW_FEEDBACK,
        group_name=GROUP,
        kinds={"duckdb", "parquet"},
        description=(
            "Feedback events from the lake (`events/feedback/date=*/*.parquet`), appended as "
            "received to the working table `feedback_events` (duplicates included: deduplication "
            "happens in `attributed_feedback`). Each sealed file is loaded exactly once (ledger "
            "`loaded_files`)."
        ),
    ),
    materialize=_load_feedback,
)
