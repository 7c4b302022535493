"""``flagsight pipeline run``: materialize every insights asset once, now.

The run is recorded in the persistent Dagster instance at ``settings.dagster_home`` (the one
Dagster's daemon and webserver use with ``DAGSTER_HOME`` set to it), so it shows in the UI.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import dagster as dg

from api.infra.dagster_home import prepare_dagster_home
from api.settings import Settings
from pipelines.constants import JOB_NAME
from pipelines.definitions import build_definitions

QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
"""The run's console logger prints warnings and errors only: its DEBUG line per event (about
fifty a run) buried the summary below. Every event is still in the run's log in the UI."""


class PipelineRunFailed(RuntimeError):
    """A step of the insights run failed; the message names it."""


def run_pipeline_once(settings: Settings, echo: Callable[[str], None] = print) -> None:
    """Run the insights job in-process against the persistent instance; raise if it fails."""
    prepare_dagster_home(settings.dagster_home, settings.database_url)  # the pipeline's start
    job = build_definitions(settings).resolve_job_def(JOB_NAME)
    started = time.monotonic()
    echo(f"insights pipeline: running {JOB_NAME} (DAGSTER_HOME={settings.dagster_home})")
    with dg.DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        result = job.execute_in_process(
            run_config=QUIET_CONSOLE,
            instance=instance,
            raise_on_error=False,
            tags={"flagsight/trigger": "cli"},
        )
    for line in _summary(result):
        echo(line)
    elapsed = time.monotonic() - started
    if not result.success:
        failed = [
            f"{event.step_key} ({_failure(event)})"
            for event in result.all_events
            if event.is_step_failure
        ]
        raise PipelineRunFailed(f"insights run {result.run_id} failed at step(s): {failed}")
    echo(f"insights pipeline: run {result.run_id} succeeded in {elapsed:.1f} s")


def _summary(result: dg.ExecuteInProcessResult) -> list[str]:
    lines = []
    for event in result.all_events:
        if event.is_step_materialization:
            key = event.asset_key.to_user_string() if event.asset_key else event.step_key
            lines.append(f"  materialized {key}")
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            state = "passed" if evaluation.passed else "FAILED"
            lines.append(
                f"  check {evaluation.asset_key.to_user_string()}:{evaluation.check_name} {state}"
            )
        elif event.is_step_failure:
            lines.append(f"  step {event.step_key} FAILED: {_failure(event)}")
    return lines


def _failure(event: dg.DagsterEvent) -> str:
    """The first line of the error that failed a step (each step is one asset, named by its
    key): the innermost cause, not Dagster's wrapper around it."""
    error = event.step_failure_data.error
    while error is not None and error.cause is not None:
        error = error.cause
    message = error.message.strip() if error else ""
    return message.splitlines()[0] if message else "no error recorded"
