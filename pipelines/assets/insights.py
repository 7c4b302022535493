"""Every insights asset and check, computed in one Dagster step.

A step costs Dagster a dozen writes to the instance's SQLite storage (start, output, success,
telemetry, input data-version look-ups) whatever it computes, and with one step per asset and
per check that fixed cost exceeded an incremental run's data work. So the assets are the specs
of one subsettable multi-asset: the asset graph, descriptions, kinds, checks, materializations
and check results are unchanged, the UI can still materialize any subset, and the run shows one
step instead of thirteen.

Failures behave as they did with one step per asset: an asset that raises is not materialized,
the assets downstream of it (and its checks) are skipped, everything independent of it still
runs, and the step then fails naming what failed, so the run fails.
"""

import traceback
from collections.abc import Iterator, Sequence

import dagster as dg

from pipelines.parts import InsightsAsset, InsightsCheck, InsightsResources
from pipelines.resources import ControlPlaneResource, EventLakeResource, WarehouseResource

OP_NAME = "insights"


def in_dependency_order(parts: Sequence[InsightsAsset]) -> list[InsightsAsset]:
    """``parts`` unchanged, after checking each comes after the parts it depends on."""
    seen: set[dg.AssetKey] = set()
    keys = {part.spec.key for part in parts}
    for part in parts:
        early = [d.asset_key for d in part.spec.deps if d.asset_key in keys - seen]
        if early:
            raise ValueError(f"{part.spec.key.to_user_string()} listed before its deps {early}")
        seen.add(part.spec.key)
    return list(parts)


def run_selected(
    context: dg.AssetExecutionContext,
    resources: InsightsResources,
    parts: Sequence[InsightsAsset],
    checks: Sequence[InsightsCheck],
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """Materialize the selected assets in order, each followed by its selected checks."""
    selected_assets = context.selected_asset_keys
    selected_checks = context.selected_asset_check_keys
    not_materialized: set[dg.AssetKey] = set()  # failed in this run, or downstream of a failure
    failures: list[tuple[str, Exception]] = []
    for part in parts:
        key = part.spec.key
        if key in selected_assets:
            upstream = sorted(
                d.asset_key.to_user_string()
                for d in part.spec.deps
                if d.asset_key in not_materialized
            )
            if upstream:
                not_materialized.add(key)
                context.log.warning(f"{key.to_user_string()} skipped: {upstream} failed")
                continue
            try:
                metadata = part.materialize(context, resources)
            except Exception as exc:
                not_materialized.add(key)
                failures.append((key.to_user_string(), exc))
                context.log.error(f"{key.to_user_string()} failed:\n{traceback.format_exc()}")
                continue
            yield dg.MaterializeResult(asset_key=key, metadata=metadata)
        for check in checks:
            if check.spec.asset_key != key or check.spec.key not in selected_checks:
                continue
            name = f"{key.to_user_string()}:{check.spec.name}"
            try:
                with resources.warehouse.connect() as con:
                    passed, metadata = check.evaluate(con)
            except Exception as exc:
                failures.append((name, exc))
                context.log.error(f"check {name} failed:\n{traceback.format_exc()}")
                continue
            yield dg.AssetCheckResult(
                asset_key=key,
                check_name=check.spec.name,
                passed=passed,
                severity=check.severity,
                metadata=metadata,
            )
    if failures:
        names = ", ".join(name for name, _ in failures)
        first = failures[0][1]
        raise dg.Failure(
            description=f"failed: {names} ({type(first).__name__}: {first})"
        ) from first


def build_insights_asset(
    parts: Sequence[InsightsAsset], checks: Sequence[InsightsCheck]
) -> dg.AssetsDefinition:
    ordered = in_dependency_order(parts)

    @dg.multi_asset(
        name=OP_NAME,
        specs=[part.spec for part in ordered],
        check_specs=[check.spec for check in checks],
        can_subset=True,
    )
    def insights(
        context: dg.AssetExecutionContext,
        lake: EventLakeResource,
        warehouse: WarehouseResource,
        control_plane: ControlPlaneResource,
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        resources = InsightsResources(lake=lake, warehouse=warehouse, control_plane=control_plane)
        yield from run_selected(context, resources, ordered, checks)

    return insights


__all__ = ["OP_NAME", "build_insights_asset", "in_dependency_order", "run_selected"]
