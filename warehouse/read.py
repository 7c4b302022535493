"""Read helpers for the published warehouse (``$FLAGSIGHT_DATA_DIR/warehouse.duckdb``).

Every helper opens the file read-only, runs one query and closes it, so the dashboard can call
them per page view. The pipeline replaces the file by atomic rename and never locks it; a
missing file (no pipeline run yet) gives ``None`` / empty results.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb

METRIC_COLUMNS = (
    "organization_id",
    "environment_id",
    "environment_key",
    "flag_key",
    "evaluations",
    "feedback_count",
    "feedback_coverage",
    "success_count",
    "failure_count",
    "success_rate",
    "failure_rate",
    "avg_latency_ms",
)
"""``flag_environment_metrics``' figures, as the helpers return them (snake_case: the API's
camelCase is the HTTP edge's, ``api.web.admin.views``)."""
DAILY_COLUMNS = (
    "evaluation_date",
    "evaluations",
    "feedback_count",
    "feedback_coverage",
    "success_count",
    "failure_count",
    "success_rate",
    "failure_rate",
    "avg_latency_ms",
)
"""``flag_environment_daily``'s figures, as ``daily_series`` returns them."""

WarehouseUnreadable = duckdb.Error
"""What a read raises when the file is there but cannot be read (damaged, half written, a
newer format): the edge catches it without importing DuckDB itself."""


def outcomes_path(warehouse_path: Path) -> Path:
    """``outcomes.duckdb`` beside the published warehouse: the analysts' per-user tables of
    followed metrics (``metric_users``, ``track_events``; contract section 13), published at
    most every ten minutes (``pipelines/assets/published_warehouse.py``)."""
    return warehouse_path.with_name("outcomes.duckdb")


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
    """The ``flag_environment_metrics`` row (``METRIC_COLUMNS`` and ``computed_at``, an ISO
    string), or ``None`` (no warehouse or no row)."""
    columns = ", ".join(METRIC_COLUMNS)
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
    result = dict(zip(METRIC_COLUMNS, row[:-1], strict=True))
    result["computed_at"] = _iso_utc(row[-1])
    return result


def daily_series(warehouse_path: Path, environment_id: str, flag_key: str) -> list[dict]:
    """One dict of ``DAILY_COLUMNS`` per UTC evaluation date (``evaluation_date`` as
    ``YYYY-MM-DD``), oldest first."""
    columns = ", ".join(DAILY_COLUMNS)
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
        item = dict(zip(DAILY_COLUMNS, row, strict=True))
        if isinstance(item["evaluation_date"], date):
            item["evaluation_date"] = item["evaluation_date"].isoformat()
        series.append(item)
    return series


def flag_health(warehouse_path: Path, environment_id: str, flag_key: str) -> dict | None:
    """The ``flag_health`` row (its columns, ``computed_at`` as an ISO string), or ``None``."""
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        return health_row(con, environment_id, flag_key)


def health_row(con: duckdb.DuckDBPyConnection, environment_id: str, flag_key: str) -> dict | None:
    """``flag_health``'s row on an open connection (the published file or the pipeline's
    working database, where the rollout guardian reads it), with its ``comparisons``."""
    cursor = con.execute(
        "SELECT * EXCLUDE (computed_at), epoch_us(computed_at) AS computed_at "
        "FROM flag_health WHERE environment_id = ? AND flag_key = ?",
        [environment_id, flag_key],
    )
    row = cursor.fetchone()
    names = [column[0] for column in cursor.description]
    if row is None:
        return None
    record = dict(zip(names, row, strict=True))
    record["computed_at"] = _iso_utc(record["computed_at"])
    record["comparisons"] = health_comparisons(con, environment_id, flag_key)
    return record


def health_comparisons(
    con: duckdb.DuckDBPyConnection, environment_id: str, flag_key: str
) -> list[dict]:
    """The flag environment's ``health_comparisons`` rows, one per comparison, by name
    (``computed_at`` as an ISO string); none in a file published before version 11, whose
    comparisons were columns (the next run publishes them)."""
    try:
        cursor = con.execute(
            "SELECT * EXCLUDE (computed_at), epoch_us(computed_at) AS computed_at FROM "
            "health_comparisons WHERE environment_id = ? AND flag_key = ? ORDER BY comparison",
            [environment_id, flag_key],
        )
    except duckdb.CatalogException:
        return []
    names = [column[0] for column in cursor.description]
    rows = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    for row in rows:
        row["computed_at"] = _iso_utc(row["computed_at"])
    return rows


LIFECYCLE_COLUMNS = (
    "environment_id",
    "flag_key",
    "stage",
    "reasons",
    "last_evaluated_at",
    "evaluations_30d",
    "served_true_percent_30d",
    "launched_at",
    "launched_by",
    "applications",
    "archived_but_evaluated",
    "computed_at",
)
"""``flag_lifecycle``'s columns, as the lifecycle helpers return them: times in unix seconds
(floats, or None), lists as lists (``warehouse.lifecycle.LifecycleEvidence.from_row``)."""

_LIFECYCLE_SELECT = (
    "SELECT environment_id, flag_key, stage, reasons, epoch_us(last_evaluated_at), "
    "evaluations_30d, served_true_percent_30d, epoch_us(launched_at), launched_by, "
    "applications, archived_but_evaluated, epoch_us(computed_at) FROM flag_lifecycle"
)


def _lifecycle_row(row: tuple) -> dict:
    record = dict(zip(LIFECYCLE_COLUMNS, row, strict=True))
    for column in ("last_evaluated_at", "launched_at", "computed_at"):
        if record[column] is not None:
            record[column] = record[column] / 1e6
    return record


def flag_lifecycle(warehouse_path: Path, environment_id: str, flag_key: str) -> dict | None:
    """The flag's ``flag_lifecycle`` row (``LIFECYCLE_COLUMNS``), or ``None``: no warehouse,
    one published before the lifecycle existed, or no row (the flag is newer than the
    pipeline's last run: ``warehouse.lifecycle.EMPTY_EVIDENCE``)."""
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        try:
            row = con.execute(
                f"{_LIFECYCLE_SELECT} WHERE environment_id = ? AND flag_key = ?",
                [environment_id, flag_key],
            ).fetchone()
        except duckdb.CatalogException:
            return None
    return None if row is None else _lifecycle_row(row)


def environment_lifecycles(warehouse_path: Path, environment_id: str) -> dict[str, dict]:
    """Flag key -> its ``flag_lifecycle`` row, for every flag of the environment the pipeline
    computed; ``{}`` without a warehouse or before the lifecycle existed."""
    with _reading(warehouse_path) as con:
        if con is None:
            return {}
        try:
            rows = con.execute(
                f"{_LIFECYCLE_SELECT} WHERE environment_id = ? ORDER BY flag_key",
                [environment_id],
            ).fetchall()
        except duckdb.CatalogException:
            return {}
    return {row[1]: _lifecycle_row(row) for row in rows}


@dataclass(frozen=True)
class RolloutArms:
    """A guarded rollout's arms step by step (``arm_totals`` of each of its percentages since
    it started: one stratum each) and each arm's latency histogram over all of them."""

    percentages: tuple[float, ...]
    totals: dict[tuple[float, str], tuple[int, int, int]]
    """``(percentage, arm)`` -> users, users with feedback, failed users."""
    latency: dict[str, tuple[list[int], list[int]]]
    """arm -> its buckets, ascending, and the users in each, pooled over the percentages."""


def rollout_arms(
    con: duckdb.DuckDBPyConnection,
    environment_id: str,
    flag_key: str,
    percentages: Sequence[float],
) -> RolloutArms:
    """What the rollout guardian's evidence is computed from, on an open connection (the
    pipeline's working database). The arms count only users evaluated since the rollout
    started (``arm_epochs``)."""
    wanted = list(map(float, percentages))
    totals = {
        (float(percentage), arm): (int(users), int(feedback), int(failed))
        for percentage, arm, users, feedback, failed in con.execute(
            "SELECT rollout_percentage, arm, users, users_with_feedback, failed_users "
            "FROM arm_totals WHERE environment_id = ? AND flag_key = ? "
            "AND list_contains(?, rollout_percentage)",
            [environment_id, flag_key, wanted],
        ).fetchall()
    }
    latency = {
        arm: (list(buckets), list(users))
        for arm, buckets, users in con.execute(
            "SELECT arm, list(bucket ORDER BY bucket), list(users ORDER BY bucket) FROM ("
            " SELECT arm, bucket, sum(users)::BIGINT AS users FROM arm_latency_buckets"
            " WHERE environment_id = ? AND flag_key = ? AND list_contains(?, rollout_percentage)"
            " GROUP BY ALL HAVING sum(users) > 0) GROUP BY arm",
            [environment_id, flag_key, wanted],
        ).fetchall()
    }
    return RolloutArms(tuple(wanted), totals, latency)


GRAINS = ("minute", "hour", "day")


def arm_windows(
    warehouse_path: Path, environment_id: str, flag_key: str, grain: str, since: datetime
) -> list[dict]:
    """Per-arm figures of one grain's windows starting at or after ``since``, oldest first:
    ``window_start`` (ISO), ``arm``, evaluations, users, feedback, failures, latency mean."""
    if grain not in GRAINS:
        raise ValueError(f"grain must be one of {GRAINS}")
    with _reading(warehouse_path) as con:
        if con is None:
            return []
        rows = con.execute(
            "SELECT epoch_us(window_start), arm, evaluations, users, feedback_count, "
            "failure_count, CASE WHEN latency_count > 0 THEN latency_sum / latency_count END "
            "FROM flag_arm_windows WHERE environment_id = ? AND flag_key = ? AND grain = ? "
            "AND window_start >= ? ORDER BY window_start, arm",
            [environment_id, flag_key, grain, since],
        ).fetchall()
    return [
        {
            "window_start": _iso_utc(start),
            "arm": arm,
            "evaluations": evaluations,
            "users": users,
            "feedback_count": feedback,
            "failure_count": failures,
            "failure_rate": 100.0 * failures / feedback if feedback else None,
            "avg_latency_ms": latency,
        }
        for start, arm, evaluations, users, feedback, failures, latency in rows
    ]


def pending_feedback_count(warehouse_path: Path) -> int | None:
    """Feedback kept while its evaluation is not loaded yet; ``None`` before the first run."""
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        row = con.execute("SELECT pending_feedback_count FROM warehouse_info").fetchone()
    return int(row[0]) if row else 0


def flag_activity(warehouse_path: Path, environment_id: str, since: date) -> dict | None:
    """How much and how recently each flag key of an environment was evaluated, from
    ``flag_environment_daily``: ``{"published_at": ISO or None, "flags": {flag_key:
    {"evaluations_since": n, "last_evaluation_date": "YYYY-MM-DD"}}}``, where
    ``evaluations_since`` counts the evaluations of UTC dates on or after ``since``. A key never
    evaluated (as of ``published_at``, the pipeline's last publication) is not in ``flags``.
    ``None`` before the first pipeline run."""
    with _reading(warehouse_path) as con:
        if con is None:
            return None
        rows = con.execute(
            "SELECT flag_key, "
            "coalesce(sum(evaluations) FILTER (WHERE evaluation_date >= ?), 0)::BIGINT, "
            "max(evaluation_date) "
            "FROM flag_environment_daily WHERE environment_id = ? "
            "GROUP BY flag_key ORDER BY flag_key",
            [since, environment_id],
        ).fetchall()
        published = con.execute("SELECT epoch_us(published_at) FROM warehouse_info").fetchone()
    return {
        "published_at": _iso_utc(published[0]) if published else None,
        "flags": {
            key: {"evaluations_since": int(count), "last_evaluation_date": last.isoformat()}
            for key, count, last in rows
        },
    }
