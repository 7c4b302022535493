"""Release health written into a warehouse as the pipeline writes it: one ``flag_health`` row
and one ``health_comparisons`` row per comparison (``pipelines/health.py``), for tests of what
reads them (the admin API, the dashboard, the guardian)."""

from __future__ import annotations

from typing import Any

import duckdb

_COMPARISON_DEFAULTS = {"treatment_users": 0, "control_users": 0, "decision": "withheld"}


def insert_health(
    con: duckdb.DuckDBPyConnection,
    row: dict[str, Any],
    comparisons: dict[str, dict[str, Any]] | None = None,
    computed_at: str = "now()",
) -> None:
    """``row``'s ``flag_health`` columns (those not given are null) and, per comparison name
    (``failureRate``, ``metric:checkout``...), its ``health_comparisons`` columns; a
    comparison's decision is withheld unless given. ``computed_at`` is a SQL expression."""
    values = {"confidence": 0.95, **row}
    _insert(con, "flag_health", values, computed_at)
    shared = {key: values.get(key) for key in ("organization_id", "environment_id", "flag_key",
                                               "rollout_percentage", "confidence")}  # fmt: skip
    for name, comparison in (comparisons or {}).items():
        columns = {**shared, **_COMPARISON_DEFAULTS, "comparison": name, **comparison}
        _insert(con, "health_comparisons", columns, computed_at)


def _insert(
    con: duckdb.DuckDBPyConnection, table: str, values: dict[str, Any], computed_at: str
) -> None:
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    con.execute(
        f"INSERT INTO {table} ({names}, computed_at) VALUES ({marks}, {computed_at})",
        list(values.values()),
    )
