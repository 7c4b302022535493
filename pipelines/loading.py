"""Incremental load of sealed Parquet files into the raw tables, each file exactly once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from api.eventlog.schema import EVALUATION, FEEDBACK, TRACK
from pipelines.lake import Lake, LakeFile, Scan
from warehouse.sql import transaction

if TYPE_CHECKING:
    import dagster as dg

    from pipelines.resources import WarehouseResource

RAW_TABLES = {
    EVALUATION: "evaluation_events",
    FEEDBACK: "feedback_events",
    TRACK: "track_events",
}
_COLUMNS = {
    EVALUATION: (
        "evaluation_id, evaluated_at, organization_id, environment_id, flag_key, user_identifier, "
        "value, matched_rule_type, error_type, sdk, api_key_id, source, schema_version, "
        "rule_index, arm, rollout_percentage"
    ),
    FEEDBACK: (
        "evaluation_id, received_at, organization_id, environment_id, result, latency_ms, "
        "error_type, api_key_id, schema_version"
    ),
    TRACK: (
        "organization_id, environment_id, event_name, user_identifier, value, occurred_at, "
        "received_at, source, api_key_id, schema_version"
    ),
}
_ORDER = {TRACK: "environment_id, event_name, user_identifier, occurred_at"}
"""How a load sorts its rows, where a table is read by ranges of these columns
(``warehouse/migrations/0010_track_events.sql``); other loads keep the files' order."""
_ADDED_SINCE_V1 = {
    "rule_index": "NULL::SMALLINT",
    "arm": "NULL::VARCHAR",
    "rollout_percentage": "NULL::DOUBLE",
}
"""Columns of later event-schema versions: NULL where every file read is older."""


@dataclass(frozen=True)
class LoadReport:
    """What one load did."""

    load_batch: int | None
    file_count: int
    rows_read: int
    rows_loaded: int
    duplicate_rows: int


def new_files(
    con: duckdb.DuckDBPyConnection, event_type: str, files: list[LakeFile]
) -> list[LakeFile]:
    """The files not yet in the ledger."""
    loaded = {
        row[0]
        for row in con.execute(
            "SELECT path FROM loaded_files WHERE event_type = ?", [event_type]
        ).fetchall()
    }
    return [f for f in files if f.relative_path not in loaded]


def load_files(
    con: duckdb.DuckDBPyConnection,
    lake: Lake,
    event_type: str,
    files: list[LakeFile],
    run_id: str | None,
) -> LoadReport:
    """Append the files' rows and record them in the ledger, in one transaction.

    Evaluation events are kept once per ``evaluation_id`` (a copy already loaded, or repeated
    within the batch, is counted in ``duplicate_rows`` and dropped); feedback and tracked
    events are all kept.
    """
    pending = new_files(con, event_type, files)
    if not pending:
        return LoadReport(None, 0, 0, 0, 0)
    with transaction(con):
        batch = con.execute("SELECT nextval('load_batch_seq')").fetchone()[0]
        with lake.scan(con, event_type, pending) as scan:
            rows_read = sum(scan.row_counts.values())
            rows_loaded = _append_rows(con, event_type, scan, batch)
        _record_ledger(con, event_type, pending, scan.row_counts, batch)
        con.execute(
            "INSERT INTO load_batches VALUES (?, ?, ?, ?, ?, ?, current_timestamp, ?)",
            [
                batch,
                event_type,
                len(pending),
                rows_read,
                rows_loaded,
                rows_read - rows_loaded,
                run_id,
            ],
        )
    return LoadReport(batch, len(pending), rows_read, rows_loaded, rows_read - rows_loaded)


def _append_rows(con: duckdb.DuckDBPyConnection, event_type: str, scan: Scan, batch: int) -> int:
    table, columns = RAW_TABLES[event_type], _COLUMNS[event_type]
    source = _source(con, columns, scan)
    before = con.execute(f"SELECT count(*) FROM {table} WHERE load_batch = ?", [batch]).fetchone()[
        0
    ]
    if event_type == EVALUATION:
        _append_unique_evaluations(con, source, columns, scan.params, batch)
    else:
        order = f" ORDER BY {_ORDER[event_type]}" if event_type in _ORDER else ""
        con.execute(
            f"INSERT INTO {table} ({columns}, load_batch) SELECT *, {batch} FROM ({source}){order}",
            scan.params,
        )
    after = con.execute(f"SELECT count(*) FROM {table} WHERE load_batch = ?", [batch]).fetchone()[0]
    return int(after - before)


def _source(con: duckdb.DuckDBPyConnection, columns: str, scan: Scan) -> str:
    """The SELECT of ``columns`` from the scanned files, a column no file has read as NULL."""
    present = {
        row[0]
        for row in con.execute(f"DESCRIBE SELECT * FROM {scan.relation}", scan.params).fetchall()
    }
    wanted = [name.strip() for name in columns.split(",")]
    select = [
        f"{_ADDED_SINCE_V1[name]} AS {name}"
        if name not in present and name in _ADDED_SINCE_V1
        else name
        for name in wanted
    ]
    return f"SELECT {', '.join(select)} FROM {scan.relation}"


def _append_unique_evaluations(
    con: duckdb.DuckDBPyConnection, source: str, columns: str, params: list, batch: int
) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE eval_batch AS {source}", params)
    total, distinct = con.execute(
        "SELECT count(*), count(DISTINCT evaluation_id) FROM eval_batch"
    ).fetchone()
    if total != distinct:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE eval_batch AS SELECT * FROM eval_batch "
            "QUALIFY row_number() OVER (PARTITION BY evaluation_id ORDER BY evaluated_at) = 1"
        )
    # Probe the history with the (smaller) batch as the hash-join build side.
    con.execute(
        "CREATE OR REPLACE TEMP TABLE eval_seen AS SELECT e.evaluation_id FROM evaluation_events e "
        "WHERE e.evaluation_id IN (SELECT evaluation_id FROM eval_batch)"
    )
    con.execute(
        f"INSERT INTO evaluation_events ({columns}, load_batch) SELECT b.*, {batch} "
        "FROM eval_batch b ANTI JOIN eval_seen s USING (evaluation_id)"
    )
    con.execute("DROP TABLE eval_batch")
    con.execute("DROP TABLE eval_seen")


def _record_ledger(
    con: duckdb.DuckDBPyConnection,
    event_type: str,
    files: list[LakeFile],
    counts: dict[str, int],
    batch: int,
) -> None:
    if not files:
        return
    # Plain lists as parameters: registering an Arrow table made DuckDB import pandas (about
    # 1.1 s of an incremental run). The unnests of one SELECT advance together, row by row.
    con.execute(
        "INSERT INTO loaded_files SELECT ?, unnest(?), TRY_CAST(unnest(?) AS DATE), unnest(?), "
        f"unnest(?), {batch}, current_timestamp",
        [
            event_type,
            [f.relative_path for f in files],
            [f.event_date for f in files],
            [f.size_bytes for f in files],
            [counts.get(f.absolute_path, 0) for f in files],
        ],
    )


def load_event_type(
    context: dg.AssetExecutionContext,
    event_type: str,
    lake: Lake,
    warehouse: WarehouseResource,
) -> dict[str, Any]:
    """Load the lake's new files of one event type; the asset's metadata."""
    relocated = lake.relocate_legacy(event_type)
    if relocated:
        context.log.info(f"{event_type}: moved {relocated} file(s) of the old layout")
    files = lake.sealed_files(event_type)
    with warehouse.connect() as con:
        report: LoadReport = load_files(con, lake, event_type, files, context.run_id)
        table_rows = con.execute(f"SELECT count(*) FROM {RAW_TABLES[event_type]}").fetchone()[0]
    context.log.info(
        f"{event_type}: {report.file_count} new file(s) of {len(files)}, "
        f"{report.rows_loaded} row(s) loaded, {report.duplicate_rows} duplicate(s) dropped"
    )
    return {
        "new_files": report.file_count,
        "files_in_lake": len(files),
        "files_relocated": relocated,
        "rows_read": report.rows_read,
        "rows_loaded": report.rows_loaded,
        "duplicate_rows_dropped": report.duplicate_rows,
        "load_batch": report.load_batch if report.load_batch is not None else -1,
        "dagster/row_count": int(table_rows),
    }
