"""The pieces the insights multi-asset is made of: one asset or one check each.

Every asset and check of the code location is computed in one Dagster step (see
``pipelines/assets/__init__.py``): Dagster's cost per step (events written to the instance,
input version look-ups, telemetry) exceeded the incremental work itself. Each piece keeps its
own asset key, description, kinds, dependencies and check, so the asset graph, the
materializations and the check results are those of separate assets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb

from pipelines.resources import ControlPlaneResource, EventLakeResource, WarehouseResource


@dataclass(frozen=True)
class InsightsResources:
    """The resources every piece may use."""

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
