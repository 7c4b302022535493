"""The insights code location: assets, checks, resources, job and schedule in one place.

Loaded by Dagster's webserver and daemon through ``workspace.yaml`` (module
``pipelines.definitions``, attribute ``defs``) and by ``flagsight pipeline run``. Locations
come from ``Settings.from_env()``.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from api.infra.objectstore import is_remote
from api.settings import Settings
from pipelines.assets import ASSETS
from pipelines.checks import CHECKS
from pipelines.constants import JOB_NAME
from pipelines.resources import (
    ControlPlaneResource,
    EventLakeResource,
    LifecycleResource,
    WarehouseResource,
)
from pipelines.retention import run_retention_sensor
from pipelines.rollout_sensor import rollout_step_sensor
from pipelines.schedules import build_schedule
from pipelines.sensors import new_events_sensor


def working_database_path(settings: Settings) -> str:
    """The pipeline's private read-write DuckDB file (readers never open it)."""
    return str(settings.data_dir / "pipeline" / "working.duckdb")


def lake_resource(settings: Settings) -> EventLakeResource:
    """The lake of ``settings``; a secret read from a variable is passed as Dagster's
    ``EnvVar`` of that variable, which keeps it out of the UI and the run's config."""
    s3 = settings.s3
    secret: str | dg.EnvVar | None = s3.secret_access_key
    if s3.secret_variable:
        secret = dg.EnvVar(s3.secret_variable)
    return EventLakeResource(
        events_location=settings.events_location,
        s3_region=s3.region,
        s3_endpoint_url=s3.endpoint_url,
        s3_access_key_id=s3.access_key_id,
        s3_secret_access_key=secret,
        s3_session_token=s3.session_token,
        s3_connect_timeout_s=s3.connect_timeout_s,
        s3_request_timeout_s=s3.request_timeout_s,
    )


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    return {
        "lake": lake_resource(settings),
        "warehouse": WarehouseResource(
            working_path=working_database_path(settings),
            published_path=str(settings.warehouse_path),
        ),
        "control_plane": ControlPlaneResource(
            database_path=str(settings.control_plane_path), database_url=settings.database_url
        ),
        "lifecycle": LifecycleResource(
            launched_days=settings.lifecycle_launched_days,
            stale_days=settings.lifecycle_stale_days,
            archived_evaluated_hours=settings.lifecycle_archived_evaluated_hours,
        ),
    }


def deployment_kinds(settings: Settings) -> Callable[[dg.AssetSpec], dg.AssetSpec]:
    """The kinds that depend on where things live. The assets declare the default deployment's:
    the control plane in SQLite (``sqlite``), the lake in a folder (``parquet``). With
    ``database_url`` the control plane is ``postgres`` instead; with the lake in a bucket, the
    assets that use the lake (read it, or upload the snapshot to it) are also ``s3``."""
    lake_users = {asset.key for asset in ASSETS if "lake" in asset.required_resource_keys}
    in_bucket = lake_users if is_remote(settings.events_location) else set()
    control_plane = "postgres" if settings.database_url else "sqlite"

    def kinds(spec: dg.AssetSpec) -> dg.AssetSpec:
        mapped = {control_plane if kind == "sqlite" else kind for kind in spec.kinds}
        return spec.replace_attributes(kinds=mapped | ({"s3"} if spec.key in in_bucket else set()))

    return kinds


def build_definitions(settings: Settings) -> dg.Definitions:
    # One process for the whole run, one step per asset and per check: every step shares one
    # DuckDB file (and one connection), which only one process at a time may open read-write.
    job = dg.define_asset_job(
        JOB_NAME,
        selection=dg.AssetSelection.all(),
        executor_def=dg.in_process_executor,
        description="Materialize every insights asset and run its checks.",
    )
    return dg.Definitions(
        assets=dg.map_asset_specs(deployment_kinds(settings), ASSETS),
        asset_checks=CHECKS,
        jobs=[job],
        schedules=[build_schedule(settings.schedule_cron)],
        sensors=[new_events_sensor, rollout_step_sensor, run_retention_sensor],
        resources=build_resources(settings),
        executor=dg.in_process_executor,
    )


defs = build_definitions(Settings.from_env())
