"""Tracked events (``POST /v1/track``) through the event log: appended with the other types,
sealed into ``event_type=track/date=<UTC date of occurred_at>/``, every field read back by an
analyst's DuckDB exactly as appended."""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq

from api.eventlog.schema import TRACK, TRACK_SCHEMA, TrackEvent
from tests.eventlog.support import LAST_US_OF_DAY, evaluation, feedback, query, track


def test_every_field_round_trips_and_occurred_at_decides_the_date(make_log, dirs) -> None:
    # Occurred on the last microsecond of 2024-02-29 or the first of 2024-03-01, each received
    # a second later: the date is the occurrence's, not the arrival's.
    sent = [track(n, at_us=LAST_US_OF_DAY + n % 2) for n in range(30)]
    log = make_log()
    log.append_track(sent[:1])
    log.append_evaluations([evaluation(1)])
    log.append_track(sent[1:])
    log.append_feedback([feedback(1)])
    log.close()

    table = query(
        "SELECT *, epoch_us(occurred_at) AS occurred_us, epoch_us(received_at) AS received_us "
        f"FROM read_parquet('{dirs[1]}/event_type={TRACK}/*/*.parquet', hive_partitioning=true) "
        "ORDER BY user_identifier"
    )
    fields = {"occurred_at_us": "occurred_us", "received_at_us": "received_us"}
    got = [
        TrackEvent(*(row[fields.get(name, name)] for name in TrackEvent._fields))
        for row in table.to_pylist()
    ]
    assert got == sorted(sent, key=lambda event: event.user_identifier)
    assert {(row["date"], row["occurred_us"] % 2) for row in table.to_pylist()} == {
        (dt.date(2024, 2, 29), 1),
        (dt.date(2024, 3, 1), 0),
    }
    assert set(table.column("schema_version").to_pylist()) == {2}


def test_the_files_have_the_documented_schema_and_layout(make_log, dirs) -> None:
    log = make_log()
    log.append_track([track(n, at_us=LAST_US_OF_DAY + n % 2) for n in range(10)])
    log.close()
    files = sorted(dirs[1].rglob("*.parquet"))
    assert [f.parent.relative_to(dirs[1]).as_posix() for f in files] == [
        "event_type=track/date=2024-02-29",
        "event_type=track/date=2024-03-01",
    ]
    assert TRACK_SCHEMA.names == [
        "schema_version", "occurred_at", "received_at", "organization_id", "environment_id",
        "event_name", "user_identifier", "value", "source", "api_key_id",
    ]  # fmt: skip
    for path in files:
        assert pq.read_schema(path).equals(TRACK_SCHEMA)
    nullable = {field.name for field in TRACK_SCHEMA if field.nullable}
    assert nullable == {"value"}
