"""What an insights asset is made of, and how it becomes a Dagster asset of its own step.

Each asset module defines an ``InsightsAsset`` (its spec and the function that materializes
it) and each check module an ``InsightsCheck``; ``to_dagster`` turns an asset and its checks
into one ``@multi_asset`` with one spec, so every asset is its own op, hence its own step in
a run, with its checks evaluated in that step right after it materializes.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb

from pipelines.resources import ControlPlaneResource, EventLakeResource, WarehouseResource


@dataclass(frozen=True)
class InsightsResources:
    """The resources every asset may use."""

    lake: EventLakeResource
    warehouse: WarehouseResource
    control_plane: ControlPlaneResource


Metadata = Mapping[str, Any]


@dataclass(frozen=True)
class InsightsAsset:
    """One asset: its spec, and the function that materializes it and returns its metadata."""

    spec: dg.AssetSpec
    materialize: Callable[[dg.AssetExecutionContext, InsightsResources], Metadata]


@dataclass(frozen=True)
class InsightsCheck:
    """One asset check: its spec, and the query that evaluates it (passed, metadata)."""

    spec: dg.AssetCheckSpec
    evaluate: Callable[[duckdb.DuckDBPyConnection], tuple[bool, Metadata]]
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR


def to_dagster(asset: InsightsAsset, checks: Sequence[InsightsCheck]) -> dg.AssetsDefinition:
    """The asset as a Dagster op of its own, evaluating ``checks`` (those of this asset).

    Subsettable only so that a check can run without its asset ("Execute check" in the UI)."""
    own = [check for check in checks if check.spec.asset_key == asset.spec.key]

    @dg.multi_asset(
        name=asset.spec.key.to_python_identifier(),
        specs=[asset.spec],
        check_specs=[check.spec for check in own],
        can_subset=True,
    )
    def _asset(
        context: dg.AssetExecutionContext,
        lake: EventLakeResource,
        warehouse: WarehouseResource,
        control_plane: ControlPlaneResource,
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        resources = InsightsResources(lake=lake, warehouse=warehouse, control_plane=control_plane)
        if asset.spec.key in context.selected_asset_keys:
            yield dg.MaterializeResult(metadata=asset.materialize(context, resources))
        for check in own:
            if check.spec.key not in context.selected_asset_check_keys:
                continue  # a check alone can be run from the UI, without its asset
            with warehouse.connect() as con:
                passed, metadata = check.evaluate(con)
            yield dg.AssetCheckResult(
                check_name=check.spec.name,
                passed=passed,
                severity=check.severity,
                metadata=metadata,
            )

    return _asset
