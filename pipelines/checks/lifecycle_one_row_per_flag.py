"""The lifecycle has one row per flag of the control plane, and none for a deleted flag."""

import dagster as dg

from api.controlplane.store import ControlPlaneStore
from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_LIFECYCLE
from pipelines.resources import ControlPlaneResource, WarehouseResource
from warehouse.lifecycle import parse_time

DELETION = "flag.deleted"


@dg.asset_check(
    asset=FLAG_LIFECYCLE,
    description=(
        "Every flag of every environment in the control plane has exactly one flag_lifecycle "
        "row, and no row is left for a flag that no longer exists (a flag created, changed or "
        "deleted after the rows were computed is not held against them)."
    ),
)
def lifecycle_one_row_per_flag(
    control_plane: ControlPlaneResource, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    with warehouse.connect() as con:
        counts = {
            (env, key): (int(n), computed_us / 1e6)
            for env, key, n, computed_us in con.execute(
                "SELECT environment_id, flag_key, count(*), epoch_us(max(computed_at)) "
                "FROM flag_lifecycle GROUP BY ALL"
            ).fetchall()
        }
    computed_at = min((at for _, at in counts.values()), default=None)
    with control_plane.store() as store:
        flags = _flags(store) if store is not None else {}
        missing = sorted(
            (env, key, "no row")
            for (env, key), updated in flags.items()
            if (env, key) not in counts and (computed_at is None or updated <= computed_at)
        )
        leftover = [key for key in counts if key not in flags]
        deleted_since = _deleted_since(store, leftover, computed_at) if store else set()
    extra = sorted(
        (env, key, "no such flag") for env, key in leftover if (env, key) not in deleted_since
    )
    twice = sorted((env, key, f"{n} rows") for (env, key), (n, _) in counts.items() if n > 1)
    rows = missing + extra + twice
    return dg.AssetCheckResult(
        passed=not rows,
        metadata={
            "flags": len(flags),
            "rows": sum(n for n, _ in counts.values()),
            "violations": len(rows),
            "sample": sample(rows),
        },
    )


def _flags(store: ControlPlaneStore) -> dict[tuple[str, str], float]:
    """``(environment id, flag key)`` -> its ``updated_at`` (unix seconds), of every flag."""
    return {
        (environment.id, flag.key): parse_time(flag.updated_at)
        for organization in store.list_organizations()
        for environment in store.list_environments(organization.id)
        for flag in store.list_flags(environment.id)
    }


def _deleted_since(
    store: ControlPlaneStore, keys: list[tuple[str, str]], since: float | None
) -> set[tuple[str, str]]:
    """Which of ``keys`` (rows without a flag) the audit log shows deleted after ``since``."""
    if not keys or since is None:
        return set()
    organizations = {
        environment.organization_id
        for environment in map(store.get_environment, {env for env, _ in keys})
        if environment is not None
    }
    targets = {f"flag:{env}/{key}": (env, key) for env, key in keys}
    return {
        targets[record.target]
        for organization in organizations
        for record in store.list_audit(organization)
        if record.action == DELETION and record.target in targets and parse_time(record.at) > since
    }
