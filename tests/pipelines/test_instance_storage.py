"""``pipelines.instance_storage``: Dagster's SQLite storages keeping their engines, as the
embedded default's ``dagster.yaml`` names them. A home written before them keeps its runs, a
moved home its storages, and the event log holds a bounded number of engines."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg

from api.infra.dagster_home import MARK, prepare_dagster_home
from pipelines.instance_storage import RUN_ENGINES, KeptEngineEventLogStorage

BEFORE = MARK + "telemetry:\n  enabled: false\n"
"""A home's ``dagster.yaml`` as flagsight wrote it before these storages: Dagster's default."""


@dg.asset
def counted() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"dagster/row_count": 3})


def materialize(home: Path, runs: int = 1) -> list[str]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return [dg.materialize([counted], instance=instance).run_id for _ in range(runs)]


def test_a_home_from_before_keeps_its_runs_and_their_events(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(BEFORE)
    (earlier,) = materialize(home)
    prepare_dagster_home(home, None)
    assert "KeptEngineEventLogStorage" in (home / "dagster.yaml").read_text()
    (later,) = materialize(home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.event_log_storage) is KeptEngineEventLogStorage
        assert {record.dagster_run.run_id for record in instance.get_run_records()} == {
            earlier,
            later,
        }
        for run_id in (earlier, later):
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
            logs = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            assert logs[0].asset_materialization.metadata["dagster/row_count"].value == 3
        latest = instance.get_latest_materialization_event(counted.key)
        assert latest is not None and latest.run_id == later  # the index, across both


def test_a_moved_home_names_its_new_folders(tmp_path: Path) -> None:
    prepare_dagster_home(tmp_path / "a" / "dagster", None)
    (run_id,) = materialize(tmp_path / "a" / "dagster")
    shutil.move(tmp_path / "a", tmp_path / "b")
    prepare_dagster_home(tmp_path / "b" / "dagster", None)
    assert str(tmp_path / "a") not in (tmp_path / "b" / "dagster" / "dagster.yaml").read_text()
    with dg.DagsterInstance.from_config(str(tmp_path / "b" / "dagster")) as instance:
        assert instance.get_run_by_id(run_id) is not None


def test_the_event_log_keeps_the_engines_of_its_latest_runs_only(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    prepare_dagster_home(home, None)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run_ids = [
            dg.materialize([counted], instance=instance).run_id for _ in range(RUN_ENGINES + 3)
        ]
        storage = instance.event_log_storage
        assert isinstance(storage, KeptEngineEventLogStorage)
        kept = list(storage._engines)
        assert [shard for shard in kept if shard != "index"] == run_ids[-RUN_ENGINES:]
        assert "index" in kept
        # A run whose engine went is read through a new one.
        assert len(instance.all_logs(run_ids[0])) > 0
        assert run_ids[0] in storage._engines and len(storage._engines) == RUN_ENGINES + 1


def test_a_forked_child_opens_its_own_connections_and_both_runs_are_kept(tmp_path: Path) -> None:
    """A pool's connections are the process's that opened them: the parent closes its idle
    ones before a fork, the child starts with empty pools, and its run and the parent's are
    both kept."""
    home = tmp_path / "dagster"
    prepare_dagster_home(home, None)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        parent_run = dg.materialize([counted], instance=instance).run_id
        engines = [instance.run_storage._engine, instance.event_log_storage._engine_for("index")]
        assert all(engine.pool.checkedin() > 0 for engine in engines)  # kept open
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if its pools were empty and its run kept
            status = 1
            try:
                if all(engine.pool.checkedin() == 0 for engine in engines):
                    status = 0 if dg.materialize([counted], instance=instance).success else 2
            finally:
                os._exit(status)
        # The parent closed its idle connections before the fork: none was inherited.
        assert all(engine.pool.checkedin() == 0 for engine in engines)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert len(instance.get_run_records()) == 2
        assert instance.get_run_by_id(parent_run).status == dg.DagsterRunStatus.SUCCESS


def test_a_home_path_beyond_ascii_is_written_as_it_is(tmp_path: Path) -> None:
    """``dagster.yaml`` names the folders in UTF-8: an escaped character outside the Basic
    Multilingual Plane would read back from YAML as two lone surrogates."""
    home = tmp_path / "données 😀" / "dagster"
    prepare_dagster_home(home, None)
    (run_id,) = materialize(home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_run_by_id(run_id) is not None
    assert (home / "history" / "runs" / f"{run_id}.db").is_file()
