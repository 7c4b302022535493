"""Dagster keeps every run it made, and the new-events sensor makes one every 10-20 s while
traffic flows: about 400 KB of run storage each, far more than the events they load. This
sensor deletes the insights job's finished runs beyond the newest ``RUNS_KEPT`` (failed ones are
kept ``FAILED_KEPT_DAYS`` whatever their rank, so an operator can still read why). The schedule's
and sensors' ticks are pruned by Dagster itself (``retention`` in ``dagster.yaml``,
``api.infra.dagster_home``).
"""

from __future__ import annotations

import time

import dagster as dg

from pipelines.constants import JOB_NAME

RETENTION_SENSOR_NAME = "run_retention_sensor"
RETENTION_INTERVAL_S = 600
RUNS_KEPT = 500
"""Finished insights runs kept: about two hours of the sensor's runs under steady traffic."""
FAILED_KEPT_DAYS = 7
_FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
_BATCH = 1_000


def purge_old_runs(
    instance: dg.DagsterInstance,
    job_name: str = JOB_NAME,
    keep: int = RUNS_KEPT,
    failed_days: float = FAILED_KEPT_DAYS,
    now: float | None = None,
) -> int:
    """Delete ``job_name``'s finished runs older than its newest ``keep``, except failures of
    the last ``failed_days``; returns how many were deleted (at most ``_BATCH`` a call)."""
    now = time.time() if now is None else now
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=job_name, statuses=_FINISHED), limit=keep + _BATCH
    )  # newest first
    deleted = 0
    for record in records[keep:]:
        failed = record.dagster_run.status is dg.DagsterRunStatus.FAILURE
        if failed and record.create_timestamp.timestamp() > now - failed_days * 86_400:
            continue
        instance.delete_run(record.dagster_run.run_id)
        deleted += 1
    return deleted


@dg.sensor(
    name=RETENTION_SENSOR_NAME,
    minimum_interval_seconds=RETENTION_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        f"Every {RETENTION_INTERVAL_S // 60} minutes: deletes the insights job's finished runs "
        f"beyond the newest {RUNS_KEPT} (failures are kept {FAILED_KEPT_DAYS} days), so "
        "Dagster's storage stays bounded while the new-events sensor runs the job every few "
        "seconds."
    ),
)
def run_retention_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    deleted = purge_old_runs(context.instance)
    return dg.SkipReason(f"deleted {deleted} old runs of {JOB_NAME}")
