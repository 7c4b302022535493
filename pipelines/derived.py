"""The analyst-facing tables, rebuilt from the counters (their size: flag environments x days)."""

from __future__ import annotations

import math

import duckdb
from duckdb.sqltypes import DOUBLE

from pipelines.constants import MIN_FEEDBACK_PER_SIDE, SIGNIFICANCE_LEVEL
from warehouse.sql import run_script


def normal_two_sided_p_value(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def build_metrics(con: duckdb.DuckDBPyConnection) -> int:
    """Rebuild ``flag_environment_metrics``; returns its row count."""
    return _rebuild(con, "flag_environment_metrics")


def build_daily(con: duckdb.DuckDBPyConnection) -> int:
    """Rebuild ``flag_environment_daily``; returns its row count."""
    return _rebuild(con, "flag_environment_daily")


def build_value_comparison(
    con: duckdb.DuckDBPyConnection,
    min_feedback: int = MIN_FEEDBACK_PER_SIDE,
    alpha: float = SIGNIFICANCE_LEVEL,
) -> int:
    """Rebuild ``flag_value_comparison``; returns its row count."""
    con.complete()
    con.create_function(
        "normal_two_sided_p_value", normal_two_sided_p_value, [DOUBLE], DOUBLE, side_effects=False
    )
    try:
        return _rebuild(
            con, "flag_value_comparison", {"min_feedback": min_feedback, "alpha": alpha}
        )
    finally:
        con.complete()
        con.remove_function("normal_two_sided_p_value")


def _rebuild(con: duckdb.DuckDBPyConnection, table: str, params: dict | None = None) -> int:
    con.execute("BEGIN TRANSACTION")
    try:
        run_script(con, table, params)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
