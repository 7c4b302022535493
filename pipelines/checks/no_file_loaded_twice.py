"""Each sealed file is loaded once, and the raw tables hold what the loads kept."""

import dagster as dg
import duckdb

from api.eventlog.schema import EVALUATION, FEEDBACK
from pipelines.checks.sampling import sample
from pipelines.constants import RAW_EVALUATIONS, RAW_FEEDBACK
from pipelines.loading import RAW_TABLES
from pipelines.parts import InsightsCheck, Metadata


def _no_file_loaded_twice(event_type: str, asset: str) -> InsightsCheck:
    def evaluate(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
        twice = con.execute(
            "SELECT path, count(*) FROM loaded_files WHERE event_type = ? "
            "GROUP BY path HAVING count(*) > 1 ORDER BY path",
            [event_type],
        ).fetchall()
        kept = con.execute(
            "SELECT coalesce(sum(rows_loaded), 0) FROM load_batches WHERE event_type = ?",
            [event_type],
        ).fetchone()[0]
        held = con.execute(f"SELECT count(*) FROM {RAW_TABLES[event_type]}").fetchone()[0]
        files = con.execute(
            "SELECT count(*) FROM loaded_files WHERE event_type = ?", [event_type]
        ).fetchone()[0]
        return not twice and kept == held, {
            "files_loaded_twice": len(twice),
            "sample": sample(twice),
            "files_in_ledger": int(files),
            "rows_kept_by_loads": int(kept),
            "rows_in_table": int(held),
        }

    return InsightsCheck(
        spec=dg.AssetCheckSpec(
            "no_file_loaded_twice",
            asset=asset,
            description=(
                f"No {event_type} file appears twice in the ledger `loaded_files`, and the raw "
                "table holds exactly the rows the ledger's loads kept."
            ),
        ),
        evaluate=evaluate,
    )


no_evaluation_file_loaded_twice = _no_file_loaded_twice(EVALUATION, RAW_EVALUATIONS)
no_feedback_file_loaded_twice = _no_file_loaded_twice(FEEDBACK, RAW_FEEDBACK)
