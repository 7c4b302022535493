"""The lifecycle's stages, reasons and evidence hold together (contract section 14)."""

import dagster as dg

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_LIFECYCLE
from pipelines.resources import WarehouseResource
from warehouse.lifecycle import ARCHIVED, LAUNCH_SOURCES, LAUNCHED, NEW, REASONS, STAGES

_RULES = (
    ("unknown stage", "NOT list_contains($stages, stage)"),
    ("no reason, or an unknown one", "len(reasons) = 0 OR NOT list_has_all($reasons, reasons)"),
    ("negative evaluations", "evaluations_30d < 0"),
    ("served true outside [0, 100]", "NOT served_true_percent_30d BETWEEN 0 AND 100"),
    (
        "served true without evaluations, or none with",
        "(served_true_percent_30d IS NULL) <> (evaluations_30d = 0)",
    ),
    ("evaluations without a last evaluation", "evaluations_30d > 0 AND last_evaluated_at IS NULL"),
    (
        "archivedButEvaluated on a flag not archived",
        f"archived_but_evaluated AND stage <> '{ARCHIVED}'",
    ),
    ("new but evaluated", f"stage = '{NEW}' AND last_evaluated_at IS NOT NULL"),
    ("launched without launchedAt", f"stage = '{LAUNCHED}' AND launched_at IS NULL"),
    (
        "launchedAt without its source, or an unknown one",
        "(launched_at IS NULL) <> (launched_by IS NULL) "
        "OR NOT list_contains($sources, coalesce(launched_by, $sources[1]))",
    ),
)


@dg.asset_check(
    asset=FLAG_LIFECYCLE,
    description=(
        "Every flag_lifecycle row has a known stage and known reasons; evaluations30d >= 0; "
        "servedTruePercent30d within [0, 100], and null exactly when there is no evaluation; "
        "archivedButEvaluated only on archived flags; a new flag never evaluated, a launched "
        "one with its launchedAt and what gave it."
    ),
)
def lifecycle_evidence_consistent(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    which = " ".join(f"WHEN {condition} THEN '{name}'" for name, condition in _RULES)
    with warehouse.connect() as con:
        rows = con.execute(
            f"SELECT environment_id, flag_key, stage, CASE {which} END AS violation "
            f"FROM flag_lifecycle WHERE {' OR '.join(f'({c})' for _, c in _RULES)} ORDER BY ALL",
            {"stages": list(STAGES), "reasons": list(REASONS), "sources": list(LAUNCH_SOURCES)},
        ).fetchall()
    return dg.AssetCheckResult(
        passed=not rows, metadata={"violations": len(rows), "sample": sample(rows)}
    )
