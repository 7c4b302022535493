"""Read helpers for the published warehouse (``$FLAGSIGHT_DATA_DIR/warehouse.duckdb``).

Every helper opens the file read-only, runs one query and closes it, so the dashboard can call
them per page view. The pipeline replaces the file by atomic rename and never locks it; a
missing file (no pipeline run yet) gives ``None`` / empty results.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb

_METRIC_COLUMNS = {
    "organization_id": "organizationId",
    "environment_id": "environmentId",
    "environment_key": "environmentKey",
    "flag_key": "flagKey",
    "evaluations": "evaluations",
    "feedback_count": "feedbackCount",
    "feedback_coverage": "feedbackCoverage",
    "success_count": "successCount",
    "failure_count": "failureCount",
    "success_rate": "successRate",
    "failure_rate": "failureRate",
    "avg_latency_ms": "avgLatencyMs",
}
_DAILY_COLUMNS = {
    "evaluation_date": "date",
    "evaluations": "evaluations",
    "feedback_count": "feedbackCount",
    "feedback_coverage": "feedbackCoverage",
    "success_count": "successCount",
    "failure_count": "failureCount",
    "success_rate": "successRate",
    "failure_rate": "failureRate",
    "avg_latency_ms": "avgLatencyMs",
}
_SIDE_FIGURES = {
    "evaluations": "evaluations",
    "feedback_count": "feedbackCount",
    "feedback_coverage": "feedbackCoverage",
    "success_count": "successCount",
    "failure_count": "failureCount",
    "success_rate": "successRate",
    "failure_rate": "failureRate",
    "avg_latency_ms": "avgLatencyMs",
}


def connect_readonly(warehouse_path: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the published warehouse; the caller closes it.

    Raises ``FileNotFoundError`` when the pipeline has not published yet.
    """
    path = Path(warehouse_path)
    if not path.is_file():
        raise FileNotFoundError(f"no warehouse at {path}: the insights pipeline has not run yet")
    return duckdb.connect(str(path), read_only=True)


@contextmanager
def _reading(warehouse_path: Path) -> Iterator[duckdb.DuckDBPyConnection | None]:
    try:
        con = connect_readonly(warehouse_path)
    except FileNotFoundError:
        yield None
        return
    try:
        yield con
    finally:
        con.close()


def _iso_utc(value: int | None) -> str | None:
    if value is None:
        return None
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value)
    return moment.isoformat().replace("+00:00", "Z")


def flag_metrics(warehouse_path: Path, environment_id: str, flag_key: str) -> dict | None:
    """The ``flag_environment_metrics`` row, camelCase, or ``None`` (no warehouse or no row)."""
    columns = ", ".join(_METRIC_COLUMNS)
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        row = con.execute(
            f"SELECT {columns}, epoch_us(computed_at) FROM flag_environment_metrics "
            "WHERE environment_id = ? AND flag_key = ?",
            [environment_id, flag_key],
        ).fetchone()
    if row is None:
        return None
    result = dict(zip(_METRIC_COLUMNS.values(), row[:-1], strict=True))
    result["computedAt"] = _iso_utc(row[-1])
    return result


def daily_series(warehouse_path: Path, environment_id: str, flag_key: str) -> list[dict]:
    """One dict per UTC evaluation date (``date`` as ``YYYY-MM-DD``), oldest first."""
    columns = ", ".join(_DAILY_COLUMNS)
    with _reading(warehouse_path) as con:
        if con is None:
            return []
        rows = con.execute(
            f"SELECT {columns} FROM flag_environment_daily "
            "WHERE environment_id = ? AND flag_key = ? ORDER BY evaluation_date",
            [environment_id, flag_key],
        ).fetchall()
    series = []
    for row in rows:
        item = dict(zip(_DAILY_COLUMNS.values(), row, strict=True))
        if isinstance(item["date"], date):
            item["date"] = item["date"].isoformat()
        series.append(item)
    return series


def value_comparison(warehouse_path: Path, environment_id: str, flag_key: str) -> dict | None:
    """On/off figures, z-score, p-value and verdict (or ``noVerdictReason``), or ``None``."""
    sides = [f"{side}_{column}" for side in ("on", "off") for column in _SIDE_FIGURES]
    tail = ["z_score", "p_value", "verdict", "no_verdict_reason", "min_feedback_per_side", "alpha"]
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        row = con.execute(
            f"SELECT {', '.join(sides + tail)}, epoch_us(computed_at) FROM flag_value_comparison "
            "WHERE environment_id = ? AND flag_key = ?",
            [environment_id, flag_key],
        ).fetchone()
    if row is None:
        return None
    n = len(_SIDE_FIGURES)
    return {
        "environmentId": environment_id,
        "flagKey": flag_key,
        "on": dict(zip(_SIDE_FIGURES.values(), row[:n], strict=True)),
        "off": dict(zip(_SIDE_FIGURES.values(), row[n : 2 * n], strict=True)),
        "zScore": row[2 * n],
        "pValue": row[2 * n + 1],
        "verdict": row[2 * n + 2],
        "noVerdictReason": row[2 * n + 3],
        "minFeedbackPerSide": row[2 * n + 4],
        "alpha": row[2 * n + 5],
        "computedAt": _iso_utc(row[2 * n + 6]),
    }


def pending_feedback_count(warehouse_path: Path) -> int | None:
    """Feedback kept while its evaluation is not loaded yet; ``None`` before the first run."""
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        row = con.execute("SELECT pending_feedback_count FROM warehouse_info").fetchone()
    return int(row[0]) if row else 0
