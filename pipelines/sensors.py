"""Run the insights job as soon as new sealed files are in the lake (time to signal).

The schedule runs the job every few minutes whatever happens; this sensor starts one within
``SENSOR_INTERVAL_S`` of a file being sealed, so that release health reflects feedback within a
minute. Its cursor is the newest file modification time it has acted on; a tick is skipped
while a run is in progress (that run, or the next tick, takes the new files).
"""

import dagster as dg

from api.eventlog.schema import EVENT_TYPES
from pipelines.constants import JOB_NAME, SENSOR_INTERVAL_S, SENSOR_NAME
from pipelines.resources import EventLakeResource
from pipelines.schedules import run_in_progress


def newest_file_ns(lake: EventLakeResource) -> int:
    """The newest modification time of any sealed file (0 for an empty lake)."""
    return max(
        (f.modified_ns for event_type in EVENT_TYPES for f in lake.sealed_files(event_type)),
        default=0,
    )


@dg.sensor(
    name=SENSOR_NAME,
    job_name=JOB_NAME,
    minimum_interval_seconds=SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        f"Every {SENSOR_INTERVAL_S} s: starts the insights job when files were sealed since the "
        "last run it started, unless a run is in progress. Keeps release health within a "
        "minute of the feedback."
    ),
)
def new_events_sensor(
    context: dg.SensorEvaluationContext, lake: EventLakeResource
) -> dg.RunRequest | dg.SkipReason:
    newest = newest_file_ns(lake)
    if newest <= int(context.cursor or 0):
        return dg.SkipReason("no file sealed since the last run")
    running = run_in_progress(context.instance)
    if running:
        return dg.SkipReason(f"run {running} is in progress")
    context.update_cursor(str(newest))
    return dg.RunRequest(run_key=f"sealed-{newest}")
