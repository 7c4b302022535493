"""Start the insights job when a rollout step's time has passed, even when no new event has
been sealed (the new-events sensor would not start one): a quiet flag still advances on time.

Its cursor lists the ``environment/flag@step:start`` it already asked a run for, so each step is
requested once; the step's start is in the key, so a rollout started again (or resumed) at the
same step index is a new step to ask for. A tick is skipped while a run is in progress (that run
judges every rollout).
"""

import hashlib
import time

import dagster as dg
import msgspec

from pipelines.constants import JOB_NAME, ROLLOUT_SENSOR_INTERVAL_S, ROLLOUT_SENSOR_NAME
from pipelines.resources import ControlPlaneResource
from pipelines.schedules import run_in_progress


def due_steps(control_plane: ControlPlaneResource, now: float) -> list[str]:
    """``environment/flag@step:start`` of every running rollout whose step time has passed."""
    with control_plane.store() as store:
        rollouts = store.running_rollouts() if store is not None else []
    return sorted(
        f"{r.environment_id}/{r.flag_key}@{r.step}:{r.step_started_at:.3f}"
        for r in rollouts
        if r.step_due_at <= now
    )


@dg.sensor(
    name=ROLLOUT_SENSOR_NAME,
    job_name=JOB_NAME,
    minimum_interval_seconds=ROLLOUT_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        f"Every {ROLLOUT_SENSOR_INTERVAL_S} s: starts the insights job when a guarded "
        "rollout's step time has passed, so its guardian judges it without waiting for new "
        "events or the schedule."
    ),
)
def rollout_step_sensor(
    context: dg.SensorEvaluationContext, control_plane: ControlPlaneResource
) -> dg.RunRequest | dg.SkipReason:
    requested = set(msgspec.json.decode(context.cursor)) if context.cursor else set()
    due = due_steps(control_plane, time.time())
    new = [step for step in due if step not in requested]
    if not new:
        return dg.SkipReason("no rollout step has come due since the last request")
    running = run_in_progress(context.instance)
    if running:
        return dg.SkipReason(f"run {running} is in progress; it judges every rollout")
    context.update_cursor(msgspec.json.encode(due).decode())
    # Dagster skips a run key it has seen: the key is that of these steps, whole.
    return dg.RunRequest(run_key="rollout-" + hashlib.sha256(",".join(new).encode()).hexdigest())
