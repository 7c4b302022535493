"""Release health's decisions obey contract section 9's rules."""

import dagster as dg
import duckdb

from pipelines.checks.sampling import sample
from pipelines.constants import FLAG_HEALTH
from pipelines.parts import InsightsCheck, Metadata
from warehouse.statistics import MIN_USERS_WITH_FEEDBACK

_DECISIONS = ("failure_rate_decision", "latency_p95_decision", "coverage_decision")


def _decisions_follow_the_rules(con: duckdb.DuckDBPyConnection) -> tuple[bool, Metadata]:
    withheld = " AND ".join(f"{column} = 'withheld'" for column in _DECISIONS)
    rows = con.execute(
        "SELECT environment_id, flag_key, sample_ratio_mismatch, treatment_users_with_feedback, "
        "control_users_with_feedback, failure_rate_decision FROM flag_health WHERE "
        f"(sample_ratio_mismatch AND NOT ({withheld})) "
        f"OR (rollout_percentage IS NULL AND NOT ({withheld})) "
        "OR (failure_rate_decision <> 'withheld' AND least(treatment_users_with_feedback, "
        f"control_users_with_feedback) < {MIN_USERS_WITH_FEEDBACK}) "
        "OR (failure_rate_decision = 'regression' AND NOT failure_rate_ci_low > 0) "
        "OR (failure_rate_decision = 'improvement' AND NOT failure_rate_ci_high < 0) "
        "ORDER BY ALL"
    ).fetchall()
    return not rows, {"violations": len(rows), "sample": sample(rows)}


decisions_follow_the_rules = InsightsCheck(
    spec=dg.AssetCheckSpec(
        "decisions_follow_the_rules",
        asset=FLAG_HEALTH,
        description=(
            "Every decision is withheld under a sample-ratio mismatch, without a percentage "
            f"rule and below {MIN_USERS_WITH_FEEDBACK} users with feedback per arm; a "
            "regression's interval lies above 0 and an improvement's below."
        ),
    ),
    evaluate=_decisions_follow_the_rules,
)
