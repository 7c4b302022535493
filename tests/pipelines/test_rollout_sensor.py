"""The rollout sensor (``pipelines/rollout_sensor.py``) against a real control plane and a real
Dagster instance: a step is asked for once when its time has passed, and a rollout started
again at the same step index is a new step, asked for again (with a run key of its own)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from flagsight_core import PercentageRule

from api.controlplane.changes import RolloutPlan
from api.controlplane.model import Plan
from api.controlplane.sqlite_store import SqliteControlPlaneStore
from pipelines.resources import ControlPlaneResource
from pipelines.rollout_sensor import rollout_step_sensor


def _tick(instance: dg.DagsterInstance, resource: ControlPlaneResource, cursor: str | None):
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"control_plane": resource}
    )
    result = rollout_step_sensor(context)
    return result, context.cursor


def test_a_due_step_is_asked_for_once_and_a_new_start_again(tmp_path: Path) -> None:
    path = tmp_path / "controlplane.sqlite3"
    store = SqliteControlPlaneStore(path)
    organization = store.create_organization("Acme", Plan.PRO)
    environment = store.create_environment(organization.id, "production", "Production", True)
    store.put_flag(environment.id, "f", True, False, [PercentageRule(0.0)])
    plan = RolloutPlan((10.0, 100.0), 0.0, ())  # due at once
    store.start_rollout(environment.id, "f", plan)
    resource = ControlPlaneResource(database_path=str(path))
    with dg.DagsterInstance.ephemeral() as instance:
        first, cursor = _tick(instance, resource, None)
        assert isinstance(first, dg.RunRequest)
        again, cursor = _tick(instance, resource, cursor)
        assert isinstance(again, dg.SkipReason)  # the same step: asked for already
        store.stop_rollout(environment.id, "f")
        store.start_rollout(environment.id, "f", plan)  # step 0 again, a new start
        restarted, _ = _tick(instance, resource, cursor)
        assert isinstance(restarted, dg.RunRequest)
        assert restarted.run_key != first.run_key
    store.close()
