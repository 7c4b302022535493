"""The periodic run: every asset once, skipped while a previous run is still going."""

import dagster as dg

from pipelines.constants import JOB_NAME, SCHEDULE_NAME

_IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def run_in_progress(instance: dg.DagsterInstance) -> str | None:
    """The id of an insights run in progress, if any."""
    running = instance.get_runs(
        filters=dg.RunsFilter(job_name=JOB_NAME, statuses=_IN_PROGRESS), limit=1
    )
    return running[0].run_id if running else None


def build_schedule(cron: str) -> dg.ScheduleDefinition:
    """Materialize everything on ``cron`` (UTC; ``FLAGSIGHT_PIPELINE_CRON``, default every 5
    minutes). Running by default, so the daemon starts it without a click."""

    @dg.schedule(
        name=SCHEDULE_NAME,
        job_name=JOB_NAME,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=(
            f"Runs the insights pipeline on `{cron}` (UTC). A tick is skipped while an earlier "
            "run is still in progress, so runs never queue up behind a slow one."
        ),
    )
    def _schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        running = run_in_progress(context.instance)
        if running:
            return dg.SkipReason(f"run {running} is still in progress")
        return dg.RunRequest()

    return _schedule
