"""Events appended are the events an analyst reads back with DuckDB: every field, typed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from api.eventlog import EventLogUnavailable
from api.eventlog.reading import read_events
from api.eventlog.schema import (
    EVALUATION,
    EVALUATION_SCHEMA,
    FEEDBACK,
    FEEDBACK_SCHEMA,
    SCHEMA_VERSION,
    EvaluationEvent,
    FeedbackEvent,
)
from tests.eventlog.support import DAY_US, LAST_US_OF_DAY, evaluation, feedback, query

CASES = [
    (EVALUATION, EVALUATION_SCHEMA, EvaluationEvent, evaluation, "evaluated_at"),
    (FEEDBACK, FEEDBACK_SCHEMA, FeedbackEvent, feedback, "received_at"),
]


def _duckdb_rows(events: Path, event_type: str, time_column: str) -> pa.Table:
    return query(
        f"SELECT *, epoch_us({time_column}) AS time_us "
        f"FROM read_parquet('{events}/event_type={event_type}/*/*.parquet', hive_partitioning=true) "
        "ORDER BY evaluation_id"
    )


@pytest.mark.parametrize(("event_type", "schema", "event_class", "make", "time_column"), CASES)
def test_every_field_round_trips_through_duckdb(
    make_log, dirs, event_type, schema, event_class, make, time_column
):
    # Half the events on the last microsecond of 2024-02-29, half on the first of 2024-03-01.
    sent = [make(n, at_us=LAST_US_OF_DAY + n % 2) for n in range(1, 41)]
    log = make_log()
    append = log.append_evaluations if event_type == EVALUATION else log.append_feedback
    append(sent[:1])
    append(sent[1:])
    log.close()

    table = _duckdb_rows(dirs[1], event_type, time_column)
    by_id = {e.evaluation_id: e for e in sent}
    assert table.num_rows == len(sent)
    for row in table.to_pylist():
        expected = by_id[row["evaluation_id"]]
        got = event_class(
            *(row["time_us"] if f == 1 else row[name] for f, name in enumerate(_columns(schema)))
        )
        assert got == expected
        assert row["schema_version"] == SCHEMA_VERSION
        assert row["date"] == dt.date(1970, 1, 1) + dt.timedelta(days=row["time_us"] // DAY_US)
    assert sorted(set(table.column("date").to_pylist())) == [
        dt.date(2024, 2, 29),
        dt.date(2024, 3, 1),
    ]


def _columns(schema: pa.Schema) -> list[str]:
    """The event tuple's fields in schema order (the schema minus schema_version)."""
    return schema.names[1:]


@pytest.mark.parametrize(("event_type", "schema", "event_class", "make", "time_column"), CASES)
def test_files_have_the_documented_schema_and_layout(
    make_log, dirs, event_type, schema, event_class, make, time_column
):
    log = make_log()
    append = log.append_evaluations if event_type == EVALUATION else log.append_feedback
    append([make(n, at_us=LAST_US_OF_DAY + n % 2) for n in range(10)])
    log.close()

    files = sorted(dirs[1].rglob("*.parquet"))
    assert [f.parent.relative_to(dirs[1]).as_posix() for f in files] == [
        f"event_type={event_type}/date=2024-02-29",
        f"event_type={event_type}/date=2024-03-01",
    ]
    assert files[0].name == files[1].name  # one segment, named after it
    for path in files:
        assert pq.read_schema(path).equals(schema)
        assert pq.ParquetFile(path).metadata.num_row_groups == 1

    # Any Hive-aware reader of the whole lake sees the type and the date as columns.
    seen = query(f"SELECT * FROM read_parquet('{dirs[1]}/*/*/*.parquet', hive_partitioning=true)")
    assert seen.schema.names[:-2] == schema.names
    assert sorted(seen.schema.names[-2:]) == ["date", "event_type"]
    assert [_utc(f.type) for f in seen.schema][:-2] == [f.type for f in schema]
    assert seen.schema.field("date").type == pa.date32()
    assert set(seen.column("event_type").to_pylist()) == {event_type}


def _utc(data_type: pa.DataType) -> pa.DataType:
    """DuckDB reports UTC as ``Etc/UTC``; the instant and unit are what must match."""
    if pa.types.is_timestamp(data_type):
        return pa.timestamp(data_type.unit, tz="UTC")
    return data_type


def test_read_events_returns_schema_plus_date(make_log, dirs):
    log = make_log()
    log.append_evaluations([evaluation(n) for n in range(5)])
    log.close()
    table = read_events(str(dirs[1]), EVALUATION)
    assert table.schema.equals(EVALUATION_SCHEMA.append(pa.field("date", pa.date32())))
    assert sorted(table.column("evaluation_id").to_pylist()) == [f"e-{n}" for n in range(5)]
    assert read_events(str(dirs[1]), FEEDBACK).num_rows == 0


def test_file_uri_locations_work(tmp_path):
    from api.eventlog import SegmentedEventLog

    log = SegmentedEventLog(tmp_path / "wal", f"file://{tmp_path}/lake")
    log.start()
    log.append_feedback([feedback(1)])
    log.close()
    assert [p.name for p in (tmp_path / "lake/event_type=feedback/date=2024-02-29").iterdir()]


def test_no_events_means_no_files_and_no_segments(make_log, dirs):
    log = make_log()
    log.append_evaluations([])
    log.close()
    assert not dirs[1].exists() or not list(dirs[1].rglob("*.parquet"))
    assert list(dirs[0].iterdir()) == []


def test_closed_log_refuses_appends(make_log, metrics):
    log = make_log()
    log.close()
    with pytest.raises(EventLogUnavailable):
        log.append_evaluations([evaluation(1)])
    log.close()  # idempotent


def test_metrics_count_events_and_files(make_log, metrics):
    log = make_log()
    log.append_evaluations([evaluation(n, at_us=LAST_US_OF_DAY + n % 2) for n in range(3)])
    log.append_feedback([feedback(1)])
    log.close()
    sample = metrics.registry.get_sample_value
    assert sample("flagsight_events_logged_total", {"type": EVALUATION}) == 3
    assert sample("flagsight_events_logged_total", {"type": FEEDBACK}) == 1
    assert sample("flagsight_event_files_sealed_total", {"type": EVALUATION}) == 2
    assert sample("flagsight_event_files_sealed_total", {"type": FEEDBACK}) == 1
    assert sample("flagsight_event_log_errors_total") == 0
