"""Dagster's storage stays bounded: the retention sensor deletes old insights runs and their
files (a real Dagster instance, real runs), and the instance ``flagsight`` configures prunes
ticks."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import dagster as dg

from api.infra.dagster_home import prepare_dagster_home
from pipelines.constants import JOB_NAME
from pipelines.retention import purge_old_runs, run_retention_sensor


@dg.op
def _fails() -> None:
    raise RuntimeError("a failed run")


@dg.op
def _succeeds() -> None:
    return None


def _runs(instance: dg.DagsterInstance, succeeding: int, failing: int) -> None:
    good = dg.GraphDefinition(name=JOB_NAME, node_defs=[_succeeds]).to_job()
    bad = dg.GraphDefinition(name=JOB_NAME, node_defs=[_fails]).to_job()
    for _ in range(failing):
        bad.execute_in_process(instance=instance, raise_on_error=False)
    for _ in range(succeeding):
        good.execute_in_process(instance=instance)


def _run_ids(instance: dg.DagsterInstance, count: int) -> list[str]:
    """``count`` successful runs, oldest first."""
    job = dg.GraphDefinition(name=JOB_NAME, node_defs=[_succeeds]).to_job()
    return [job.execute_in_process(instance=instance).run_id for _ in range(count)]


def _files_of(home: Path, run_id: str) -> list[Path]:
    """The files the default storage keeps for one run: its event-log file and compute logs."""
    return [home / "history" / "runs" / f"{run_id}.db"] + sorted(
        p for p in (home / "storage" / run_id).rglob("*") if p.is_file()
    )


def _fingerprint(paths: list[Path]) -> dict[Path, tuple[int, int, str]]:
    return {
        p: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in paths
    }


def _statuses(instance: dg.DagsterInstance) -> list[str]:
    return [str(r.status.value) for r in instance.get_runs(dg.RunsFilter(job_name=JOB_NAME))]


def test_old_runs_are_deleted_beyond_the_newest_kept_and_recent_failures_stay(
    tmp_path: Path,
) -> None:
    prepare_dagster_home(tmp_path / "dagster", None)
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        _runs(instance, succeeding=6, failing=2)  # the failures are the oldest
        assert len(_statuses(instance)) == 8
        assert purge_old_runs(instance, keep=3) == 3  # three old successes; failures are recent
        assert _statuses(instance) == ["SUCCESS"] * 3 + ["FAILURE"] * 2
        far_future = 10 * 86_400 + time.time()
        assert purge_old_runs(instance, keep=3, now=far_future) == 2  # failures a week old
        assert _statuses(instance) == ["SUCCESS"] * 3


def _open_files() -> list[str]:
    """What this process's file descriptors point at (one closing meanwhile is skipped)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            continue
    return found


def test_a_purge_removes_the_files_of_the_runs_it_deleted_and_leaves_the_kept_ones(
    tmp_path: Path,
) -> None:
    home = tmp_path / "dagster"
    prepare_dagster_home(home, None)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        old, kept = (ids := _run_ids(instance, 6))[:4], ids[4:]
        for run_id in ids:  # both files exist before, or the test proves nothing
            assert (home / "history" / "runs" / f"{run_id}.db").is_file()
            assert (home / "storage" / run_id / "compute_logs").is_dir()
        before = _fingerprint([f for run_id in kept for f in _files_of(home, run_id)])
        assert purge_old_runs(instance, keep=2) == 4
        assert [r.run_id for r in instance.get_runs(dg.RunsFilter(job_name=JOB_NAME))] == [
            *reversed(kept)
        ]
        for run_id in old:
            assert not (home / "history" / "runs" / f"{run_id}.db").exists()
            assert not (home / "history" / "runs" / f"{run_id}.db-wal").exists()
            assert not (home / "storage" / run_id).exists()
        assert _fingerprint(list(before)) == before  # the kept runs' files, untouched
        assert all(len(instance.all_logs(run_id)) > 0 for run_id in kept)  # still readable
        # Nothing of this process keeps a deleted run's file open (the event log keeps its
        # latest runs' connections: pipelines.instance_storage).
        open_files = _open_files()
        assert not [f for f in open_files if any(run_id in f for run_id in old)], open_files
    remaining = {p.stem for p in (home / "history" / "runs").glob("*.db")} - {"index"}
    assert remaining == set(kept)
    assert {p.name for p in (home / "storage").iterdir()} == set(kept)


def test_failures_are_kept_beyond_the_newest_runs_up_to_a_bound(tmp_path: Path) -> None:
    prepare_dagster_home(tmp_path / "dagster", None)
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        _runs(instance, succeeding=1, failing=4)  # a pipeline that failed on every run, then not
        assert purge_old_runs(instance, keep=1, failed_kept=2) == 2  # the two oldest failures
        assert _statuses(instance) == ["SUCCESS", "FAILURE", "FAILURE"]


def test_with_postgres_storage_the_local_compute_logs_of_deleted_runs_are_removed(
    tmp_path: Path, postgres_url: str
) -> None:
    """Runs and their events are rows in PostgreSQL (no per-run file), but Dagster still
    captures each step's output under ``storage/<run_id>`` on the host that ran it."""
    home = tmp_path / "dagster"
    prepare_dagster_home(home, postgres_url)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        old, kept = (ids := _run_ids(instance, 3))[:2], ids[2:]
        assert all((home / "storage" / run_id).is_dir() for run_id in ids)
        assert purge_old_runs(instance, keep=1) == 2
    assert {p.name for p in (home / "storage").iterdir()} == set(kept)
    assert not any((home / "storage" / run_id).exists() for run_id in old)
    assert not (home / "history").exists()  # nothing of the runs' events is local


def test_the_sensor_purges_through_its_instance_and_says_how_many(tmp_path: Path) -> None:
    prepare_dagster_home(tmp_path / "dagster", None)
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        _runs(instance, succeeding=3, failing=0)
        context = dg.build_sensor_context(instance=instance)
        result = run_retention_sensor(context)
        assert isinstance(result, dg.SkipReason)
        assert result.skip_message == f"deleted 0 old runs of {JOB_NAME}"


def test_the_instance_prunes_its_schedule_and_sensor_ticks(tmp_path: Path) -> None:
    prepare_dagster_home(tmp_path / "dagster", None)
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        settings = instance.get_settings("retention")
    assert settings["schedule"]["purge_after_days"] == 7
    assert settings["sensor"]["purge_after_days"] == {"skipped": 1, "failure": 7, "success": 7}
