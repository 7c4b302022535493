"""Release health's decisions obey contract section 9's rules, for every comparison."""

import dagster as dg

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_HEALTH
from pipelines.resources import WarehouseResource
from warehouse.statistics import MIN_USERS_WITH_FEEDBACK


@dg.asset_check(
    asset=FLAG_HEALTH,
    description=(
        "Every decision is withheld under a sample-ratio mismatch, without a percentage rule and, "
        f"for failure rate, below {MIN_USERS_WITH_FEEDBACK} users with feedback per arm; a "
        "decision's interval lies on its side of 0 (above for treatment higher, below for lower), "
        "whichever comparison it is."
    ),
)
def decisions_follow_the_rules(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.connect() as con:
        rows = con.execute(
            "SELECT c.environment_id, c.flag_key, c.comparison, c.decision, c.ci_low, c.ci_high "
            "FROM health_comparisons AS c LEFT JOIN flag_health AS h "
            "USING (environment_id, flag_key) "
            "WHERE (c.decision <> 'withheld' AND (coalesce(h.sample_ratio_mismatch, false) "
            "       OR c.rollout_percentage IS NULL)) "
            "OR (c.comparison = 'failureRate' AND c.decision <> 'withheld' "
            f"    AND least(c.treatment_users, c.control_users) < {MIN_USERS_WITH_FEEDBACK}) "
            "OR (c.decision IN ('regression', 'improvement') "
            "    AND NOT (c.ci_low > 0 OR c.ci_high < 0)) "
            "ORDER BY ALL"
        ).fetchall()
    return dg.AssetCheckResult(
        passed=not rows, metadata={"violations": len(rows), "sample": sample(rows)}
    )
