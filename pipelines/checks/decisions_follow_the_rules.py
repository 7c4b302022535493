"""Release health's decisions obey contract section 9's rules."""

import dagster as dg

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_HEALTH
from pipelines.resources import WarehouseResource
from warehouse.statistics import MIN_USERS_WITH_FEEDBACK

_DECISIONS = ("failure_rate_decision", "latency_p95_decision", "coverage_decision")
_WITHHELD = " AND ".join(f"{column} = 'withheld'" for column in _DECISIONS)


@dg.asset_check(
    asset=FLAG_HEALTH,
    description=(
        "Every decision is withheld under a sample-ratio mismatch, without a percentage rule and "
        f"below {MIN_USERS_WITH_FEEDBACK} users with feedback per arm; a regression's interval "
        "lies above 0 and an improvement's below."
    ),
)
def decisions_follow_the_rules(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.connect() as con:
        rows = con.execute(
            "SELECT environment_id, flag_key, sample_ratio_mismatch, "
            "treatment_users_with_feedback, control_users_with_feedback, failure_rate_decision "
            f"FROM flag_health WHERE (sample_ratio_mismatch AND NOT ({_WITHHELD})) "
            f"OR (rollout_percentage IS NULL AND NOT ({_WITHHELD})) "
            "OR (failure_rate_decision <> 'withheld' AND least(treatment_users_with_feedback, "
            f"control_users_with_feedback) < {MIN_USERS_WITH_FEEDBACK}) "
            "OR (failure_rate_decision = 'regression' AND NOT failure_rate_ci_low > 0) "
            "OR (failure_rate_decision = 'improvement' AND NOT failure_rate_ci_high < 0) "
            "ORDER BY ALL"
        ).fetchall()
    return dg.AssetCheckResult(
        passed=not rows, metadata={"violations": len(rows), "sample": sample(rows)}
    )
