"""Helpers for the event log tests: event factories, DuckDB reads, child processes."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa

from api.eventlog.schema import TRACK_SOURCES, EvaluationEvent, FeedbackEvent, TrackEvent

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("child.py")
DAY_US = 86_400 * 1_000_000
# 2024-02-29T23:59:59.999999Z: the last microsecond of a (leap) day, and the next one.
LAST_US_OF_DAY = int(dt.datetime(2024, 3, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000 - 1


def evaluation(n: int, at_us: int = LAST_US_OF_DAY, tag: str = "e") -> EvaluationEvent:
    """A distinct evaluation event; optional fields cycle through None and values."""
    return EvaluationEvent(
        evaluation_id=f"{tag}-{n}",
        evaluated_at_us=at_us,
        organization_id=f"org-{n % 3}",
        environment_id=f"env-{n % 5}",
        flag_key=f"flag.{n % 7}",
        user_identifier=f"üser-{n}",
        value=n % 2 == 0,
        matched_rule_type=("STATIC", "SEGMENT", "PERCENTAGE", None)[n % 4],
        error_type=None if n % 3 else "FLAG_NOT_FOUND",
        sdk=None if n % 2 else "python/1.2.3",
        api_key_id=f"key-{n % 2}",
        source=("v1", "v1-bulk", "ofrep", "ofrep-bulk")[n % 4],
        rule_index=(None, 0, 1, 2)[n % 4],
        arm=(None, None, "treatment", "control")[n % 4],
        rollout_percentage=(None, None, 12.5, 12.5)[n % 4],
    )


def feedback(n: int, at_us: int = LAST_US_OF_DAY, tag: str = "e") -> FeedbackEvent:
    return FeedbackEvent(
        evaluation_id=f"{tag}-{n}",
        received_at_us=at_us,
        organization_id=f"org-{n % 3}",
        environment_id=f"env-{n % 5}",
        result=n % 3 != 0,
        latency_ms=None if n % 4 == 0 else n * 0.25,
        error_type=None if n % 2 else "TimeoutError",
        api_key_id=f"key-{n % 2}",
    )


def track(n: int, at_us: int = LAST_US_OF_DAY) -> TrackEvent:
    """A distinct tracked event (its user and value say ``n``), received a second after it
    occurred; the value cycles through None, integers and fractions, the source through all."""
    return TrackEvent(
        occurred_at_us=at_us,
        received_at_us=at_us + 1_000_000,
        organization_id=f"org-{n % 3}",
        environment_id=f"env-{n % 5}",
        event_name=("checkout", "revenue", "error.payment")[n % 3],
        user_identifier=f"üser-{n}",
        value=(None, float(n), n + 0.25)[n % 3],
        source=TRACK_SOURCES[n % len(TRACK_SOURCES)],
        api_key_id=f"key-{n % 2}",
    )


def query(sql: str) -> pa.Table:
    """Run SQL on a fresh in-memory DuckDB, as an analyst would."""
    with duckdb.connect() as con:
        return con.sql(sql).to_arrow_table()


def evaluation_ids(events: Path) -> list[str]:
    """Every evaluation id in the sealed files (duplicates kept), read with DuckDB."""
    if not list(events.glob("event_type=evaluation/*/*.parquet")):
        return []
    table = query(
        f"SELECT evaluation_id FROM read_parquet('{events}/event_type=evaluation/*/*.parquet')"
    )
    return table.column("evaluation_id").to_pylist()


def spawn_child(*args: str) -> subprocess.Popen[bytes]:
    """Run ``child.py`` in a fresh interpreter (a real process, as a gunicorn worker is)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, env=env, cwd=REPO
    )
