"""``raw_track_events``: the lake's tracked events (sealed by the real event log, real Parquet)
loaded into ``track_events`` by the asset, materialized for real: every row as sealed, each file
once, each load sorted as metrics read it, and the ledger check passing."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb

from api.eventlog.schema import TRACK, TrackEvent
from api.eventlog.segmented import SegmentedEventLog
from api.settings import Settings
from pipelines.assets.raw_track_events import raw_track_events
from pipelines.checks.no_file_loaded_twice import no_track_file_loaded_twice
from pipelines.definitions import build_resources, working_database_path
from tests.conftest import ADMIN_TOKEN
from tests.eventlog.support import LAST_US_OF_DAY, track

COLUMNS = (
    "epoch_us(occurred_at), epoch_us(received_at), organization_id, environment_id, "
    "event_name, user_identifier, value, source, api_key_id"
)


def _seal(settings: Settings, events: list[TrackEvent]) -> None:
    """``events`` appended in two frames and sealed, as a worker of the server does."""
    log = SegmentedEventLog(settings.data_dir / "wal", settings.events_location)
    log.start()
    log.append_track(events[: len(events) // 2])
    log.append_track(events[len(events) // 2 :])
    log.close()


def _materialize(settings: Settings) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [raw_track_events, no_track_file_loaded_twice],
        resources=build_resources(settings),
        instance=dg.DagsterInstance.ephemeral(),
    )


def _query(settings: Settings, sql: str) -> list[tuple]:
    with duckdb.connect(working_database_path(settings), read_only=True) as con:
        return con.execute(sql).fetchall()


def _loaded(result: dg.ExecuteInProcessResult) -> dict:
    (materialization,) = result.asset_materializations_for_node("raw_track_events")
    return {k: v.value for k, v in materialization.metadata.items()}


def test_new_track_files_are_loaded_once_each_sorted_for_metrics(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", admin_token=ADMIN_TOKEN)
    first = [track(n, at_us=LAST_US_OF_DAY + n % 2) for n in range(40)]  # two UTC dates
    _seal(settings, first)

    result = _materialize(settings)
    assert result.success
    assert [c.passed for c in result.get_asset_check_evaluations()] == [True]
    assert (_loaded(result)["new_files"], _loaded(result)["rows_loaded"]) == (2, 40)
    rows = _query(settings, f"SELECT {COLUMNS} FROM track_events ORDER BY rowid")
    assert rows == [tuple(event) for event in sorted(first, key=_metric_order)]

    second = [track(n, at_us=LAST_US_OF_DAY + 2) for n in range(40, 50)]
    _seal(settings, second)
    result = _materialize(settings)
    assert (_loaded(result)["new_files"], _loaded(result)["rows_loaded"]) == (1, 10)
    assert [c.passed for c in result.get_asset_check_evaluations()] == [True]
    rows = _query(settings, f"SELECT {COLUMNS}, load_batch FROM track_events ORDER BY rowid")
    assert [row[:-1] for row in rows] == [
        *(tuple(e) for e in sorted(first, key=_metric_order)),
        *(tuple(e) for e in sorted(second, key=_metric_order)),
    ]
    assert [row[-1] for row in rows] == [rows[0][-1]] * 40 + [rows[0][-1] + 1] * 10

    assert _loaded(_materialize(settings))["new_files"] == 0
    assert _query(settings, "SELECT count(*) FROM track_events") == [(50,)]
    assert _query(
        settings,
        f"SELECT event_date::VARCHAR, count(*) FROM loaded_files WHERE event_type = '{TRACK}' "
        "GROUP BY ALL ORDER BY 1",
    ) == [("2024-02-29", 1), ("2024-03-01", 2)]


def _metric_order(event: TrackEvent) -> tuple:
    return (event.environment_id, event.event_name, event.user_identifier, event.occurred_at_us)
