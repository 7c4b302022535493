"""The analyst-facing tables, rebuilt from the counters (their size: flag environments x days)."""

from __future__ import annotations

import duckdb

from warehouse.sql import run_script, transaction


def build_metrics(con: duckdb.DuckDBPyConnection) -> int:
    """Rebuild ``flag_environment_metrics``; returns its row count."""
    return _rebuild(con, "flag_environment_metrics")


def build_daily(con: duckdb.DuckDBPyConnection) -> int:
    """Rebuild ``flag_environment_daily``; returns its row count."""
    return _rebuild(con, "flag_environment_daily")


def build_windows(con: duckdb.DuckDBPyConnection) -> int:
    """Add the folds' window deltas to ``flag_arm_windows``; returns its row count."""
    return _rebuild(con, "flag_arm_windows")


def _rebuild(con: duckdb.DuckDBPyConnection, table: str, params: dict | None = None) -> int:
    with transaction(con):
        run_script(con, table, params)
    return _count(con, table)


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
