"""The sensor starts a run when files were sealed since its last one, and only then."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from pipelines.definitions import build_resources
from pipelines.sensors import new_events_sensor


def tick(settings, instance: dg.DagsterInstance, cursor: str | None):
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"lake": build_resources(settings)["lake"]}
    )
    return new_events_sensor(context), context.cursor


def test_a_run_is_requested_for_new_files_once(lake_settings) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        result, cursor = tick(lake_settings, instance, None)
        assert isinstance(result, dg.RunRequest)
        again, same = tick(lake_settings, instance, cursor)
        assert isinstance(again, dg.SkipReason) and same == cursor

        sealed = [
            p
            for p in Path(lake_settings.events_location).rglob("*.parquet")
            if not p.name.startswith(".")
        ]
        newest = max(sealed, key=os.path.getmtime)
        later = newest.stat().st_mtime_ns + 1_000_000_000
        os.utime(newest, ns=(later, later))  # a file sealed since
        result, moved = tick(lake_settings, instance, cursor)
        assert isinstance(result, dg.RunRequest)
        assert int(moved) > int(cursor)


def test_an_empty_lake_requests_nothing(tmp_path) -> None:
    from api.settings import Settings

    with dg.DagsterInstance.ephemeral() as instance:
        result, _ = tick(Settings(data_dir=tmp_path / "data"), instance, None)
        assert isinstance(result, dg.SkipReason)
