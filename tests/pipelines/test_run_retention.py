"""Dagster's storage stays bounded: the retention sensor deletes old insights runs (a real
Dagster instance, real runs), and the instance ``flagsight`` configures prunes ticks."""

from __future__ import annotations

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
        far_future = 10 * 86_400 + __import__("time").time()
        assert purge_old_runs(instance, keep=3, now=far_future) == 2  # failures a week old
        assert _statuses(instance) == ["SUCCESS"] * 3


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
