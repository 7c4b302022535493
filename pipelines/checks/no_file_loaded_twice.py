"""Each sealed file is loaded once, and the raw tables hold what the loads kept: one check on
each raw asset, all named ``no_file_loaded_twice``."""

import dagster as dg
import duckdb

from api.eventlog.schema import EVALUATION, FEEDBACK, TRACK
from pipelines.checks.sampling import sample
from pipelines.constants import RAW_EVALUATIONS, RAW_FEEDBACK, RAW_TRACK
from pipelines.loading import RAW_TABLES
from pipelines.resources import WarehouseResource

NAME = "no_file_loaded_twice"


@dg.asset_check(asset=RAW_EVALUATIONS, name=NAME)
def no_evaluation_file_loaded_twice(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """No evaluation file appears twice in the ledger `loaded_files`, and the raw table holds
    exactly the rows the ledger's loads kept."""
    with warehouse.connect() as con:
        return _ledger_agrees(con, EVALUATION)


@dg.asset_check(asset=RAW_FEEDBACK, name=NAME)
def no_feedback_file_loaded_twice(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """No feedback file appears twice in the ledger `loaded_files`, and the raw table holds
    exactly the rows the ledger's loads kept."""
    with warehouse.connect() as con:
        return _ledger_agrees(con, FEEDBACK)


@dg.asset_check(asset=RAW_TRACK, name=NAME)
def no_track_file_loaded_twice(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """No tracked-event file appears twice in the ledger `loaded_files`, and the raw table
    holds exactly the rows the ledger's loads kept."""
    with warehouse.connect() as con:
        return _ledger_agrees(con, TRACK)


def _ledger_agrees(con: duckdb.DuckDBPyConnection, event_type: str) -> dg.AssetCheckResult:
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
    return dg.AssetCheckResult(
        passed=not twice and kept == held,
        metadata={
            "files_loaded_twice": len(twice),
            "sample": sample(twice),
            "files_in_ledger": int(files),
            "rows_kept_by_loads": int(kept),
            "rows_in_table": int(held),
        },
    )
