"""The lake's Hive layout (``event_type=<type>/date=<day>/``) and the upgrade from the layout
older versions wrote (``<type>/date=<day>/``): nothing loaded twice, nothing left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from api.eventlog.schema import EVENT_TYPES
from tests.pipelines.support import add_wave_two, materialize_all


def _to_old_layout(events: Path) -> None:
    """Move every file to where versions before the Hive type key put it."""
    for event_type in EVENT_TYPES:
        current = events / f"event_type={event_type}"
        for path in sorted(current.rglob("*")):
            if path.is_file():
                target = events / event_type / path.relative_to(current)
                target.parent.mkdir(parents=True, exist_ok=True)
                path.rename(target)
        shutil.rmtree(current)


def _as_before_the_upgrade(working: Path) -> None:
    """The working database as the previous version left it: version 3, ledger paths in the
    old layout."""
    con = duckdb.connect(str(working))
    try:
        con.execute("UPDATE loaded_files SET path = replace(path, 'event_type=', '')")
        con.execute("DROP TABLE arm_epochs")  # made by 0005
        guard_columns = con.execute(  # made by 0006
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'flag_health' AND column_name LIKE '%guard%'"
        ).fetchall()
        for (column,) in guard_columns:
            con.execute(f"ALTER TABLE flag_health DROP COLUMN {column}")
        con.execute("DROP TABLE window_deltas")  # made by 0007, which dropped window_dirty
        con.execute(
            "CREATE TABLE window_dirty (environment_id VARCHAR NOT NULL, flag_key VARCHAR NOT "
            "NULL, minute TIMESTAMPTZ NOT NULL, PRIMARY KEY (environment_id, flag_key, minute))"
        )
        con.execute("DROP TABLE flag_sdk_daily")  # made by 0009
        con.execute("DROP TABLE flag_lifecycle")  # made by 0009
        con.execute("DROP TABLE track_events")  # made by 0010
        con.execute("DROP TABLE metric_users")  # made by 0011, with the two below
        con.execute("DROP TABLE health_comparisons")
        con.execute("ALTER TABLE arm_users DROP COLUMN first_evaluated_at")
        con.execute("DROP TABLE exposure_dirty")  # made by 0012, with the one below
        con.execute("DROP TABLE metric_follows_state")
        con.execute("DROP TABLE metric_moments")  # made by 0013
        for comparison in ("failure_rate", "latency_p95", "coverage"):  # dropped by 0011
            for column, kind in (("difference", "DOUBLE"), ("ci_low", "DOUBLE"),
                                 ("ci_high", "DOUBLE"), ("decision", "VARCHAR")):  # fmt: skip
                con.execute(f"ALTER TABLE flag_health ADD COLUMN {comparison}_{column} {kind}")
        con.execute("DELETE FROM fold_state WHERE name = 'lifecycle_folded'")
        con.execute("DELETE FROM schema_migrations WHERE version >= 4")
    finally:
        con.close()


def _ledger(working: Path) -> tuple[list[str], list[tuple[str, int]]]:
    con = duckdb.connect(str(working), read_only=True)
    try:
        paths = [
            r[0] for r in con.execute("SELECT path FROM loaded_files ORDER BY path").fetchall()
        ]
        batches = con.execute(
            "SELECT event_type, file_count FROM load_batches ORDER BY load_batch"
        ).fetchall()
    finally:
        con.close()
    return paths, batches


def _files(folder: Path) -> list[str]:
    """The sealed files under ``folder`` (not those being written), relative to it."""
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*.parquet")
        if not p.name.startswith(".")
    )


def test_a_lake_of_the_old_layout_is_moved_and_nothing_is_loaded_twice(lake_settings, waves):
    events = Path(lake_settings.events_location)
    working = Path(lake_settings.data_dir) / "pipeline" / "working.duckdb"
    assert materialize_all(lake_settings).success
    _, first_batches = _ledger(working)
    loaded_before = {event_type: count for event_type, count in first_batches}
    _to_old_layout(events)
    _as_before_the_upgrade(working)
    # Files an old host sealed after that run, one of them sealed again by a new host.
    add_wave_two(lake_settings, waves)
    new_files = {t: n for t in EVENT_TYPES if (n := len(_files(events / f"event_type={t}")))}
    _to_old_layout(events)
    resealed = sorted((events / "evaluation").rglob("w2-*.parquet"))[0]
    again = events / "event_type=evaluation" / resealed.parent.name / resealed.name
    again.parent.mkdir(parents=True)
    shutil.copyfile(resealed, again)
    assert not (events / "event_type=feedback").exists()

    assert materialize_all(lake_settings).success

    on_disk = _files(events)  # what is left in the old folders: files still being written
    assert all(
        path.startswith(("event_type=evaluation/", "event_type=feedback/")) for path in on_disk
    )
    paths, batches = _ledger(working)
    assert paths == on_disk  # each file once, under its path in the current layout
    assert dict(batches[:2]) == loaded_before
    assert dict(batches[2:]) == new_files  # the files loaded before were not read again

    assert materialize_all(lake_settings).success
    assert _ledger(working) == (paths, batches)  # nothing new, nothing read again
