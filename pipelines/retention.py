"""Dagster keeps every run it made, and the new-events sensor makes one every 10-20 s while
traffic flows: about 450 KB on disk each with the default SQLite storage (its event-log file
``history/runs/<run_id>.db``, about 300 KB, its rows mirrored in ``history/runs/index.db``, and
its compute logs ``storage/<run_id>/``), far more than the events they load. This sensor
deletes the insights job's finished runs beyond the newest ``RUNS_KEPT``; beyond those, the
newest ``FAILED_KEPT`` failures of the last ``FAILED_KEPT_DAYS`` stay too, so an operator can
still read why. Deleting a run also deletes its files: Dagster's ``delete_run`` deletes rows
only. Runs on disk are therefore bounded by ``RUNS_KEPT + FAILED_KEPT`` finished runs (plus the
one in progress), about 70 MB at most; the shared SQLite files (``runs.db``, ``index.db``) reuse
the pages freed by deleted rows, so they stop growing at that high-water mark. The schedule's
and sensors' ticks are pruned by Dagster itself (``retention`` in ``dagster.yaml``,
``api.infra.dagster_home``).
"""

from __future__ import annotations

import contextlib
import os
import time

import dagster as dg

# Not re-exported by ``dagster``; Dagster's API reference documents them under these paths.
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager

from pipelines.constants import JOB_NAME
from pipelines.instance_storage import KeptEngineEventLogStorage

RETENTION_SENSOR_NAME = "run_retention_sensor"
RETENTION_INTERVAL_S = 600
RUNS_KEPT = 100
"""Finished insights runs kept: 17-33 minutes of the sensor's runs under steady traffic, 8 hours
of the schedule's alone; about 45 MB with the default SQLite storage."""
FAILED_KEPT = 50
"""Failures kept beyond ``RUNS_KEPT`` (if younger than ``FAILED_KEPT_DAYS``): enough to read why
a pipeline fails, and a bound when it fails on every run."""
FAILED_KEPT_DAYS = 7
_FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
_BATCH = 1_000


def purge_old_runs(
    instance: dg.DagsterInstance,
    job_name: str = JOB_NAME,
    keep: int = RUNS_KEPT,
    failed_days: float = FAILED_KEPT_DAYS,
    now: float | None = None,
    failed_kept: int = FAILED_KEPT,
) -> int:
    """Delete ``job_name``'s finished runs older than its newest ``keep``, except the newest
    ``failed_kept`` failures of the last ``failed_days``, with their files; returns how many
    were deleted (at most ``_BATCH`` a call)."""
    now = time.time() if now is None else now
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=job_name, statuses=_FINISHED),
        limit=keep + failed_kept + _BATCH,
    )  # newest first
    deleted = 0
    failures_spared = 0
    for record in records[keep:]:
        failed = record.dagster_run.status is dg.DagsterRunStatus.FAILURE
        recent = record.create_timestamp.timestamp() > now - failed_days * 86_400
        if failed and recent and failures_spared < failed_kept:
            failures_spared += 1
            continue
        run_id = record.dagster_run.run_id
        instance.delete_run(run_id)
        delete_run_files(instance, run_id)
        deleted += 1
    return deleted


def delete_run_files(instance: dg.DagsterInstance, run_id: str) -> None:
    """Remove what a deleted run left on this host's disk: its event-log file when the event
    log is SQLite sharded by run (with PostgreSQL there is none), and its compute logs when
    they are kept locally (they are, by default, whatever the storage)."""
    events = instance.event_log_storage
    if isinstance(events, SqliteEventLogStorage) and events.is_run_sharded:
        # Dagster deletes one run's events as rows and removes shard files only in wipe(), for
        # every run at once: no call removes one. path_for_shard is how the storage names the
        # file; its journal files go with it, as wipe() removes them.
        if isinstance(events, KeptEngineEventLogStorage):
            events.forget(run_id)  # its kept connections closed before the file goes
        shard = events.path_for_shard(run_id)
        for path in (shard, f"{shard}-wal", f"{shard}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    logs = instance.compute_log_manager
    if isinstance(logs, LocalComputeLogManager):
        logs.delete_logs(prefix=[run_id])  # the folder of every step's log of the run


@dg.sensor(
    name=RETENTION_SENSOR_NAME,
    minimum_interval_seconds=RETENTION_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        f"Every {RETENTION_INTERVAL_S // 60} minutes: deletes the insights job's finished runs "
        f"and their files beyond the newest {RUNS_KEPT} (and {FAILED_KEPT} failures of the "
        f"last {FAILED_KEPT_DAYS} days), so Dagster's storage stays bounded while the "
        "new-events sensor runs the job every few seconds."
    ),
)
def run_retention_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    deleted = purge_old_runs(context.instance)
    return dg.SkipReason(f"deleted {deleted} old runs of {JOB_NAME}")
