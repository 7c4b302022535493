-- Version 6: one error budget per guarded rollout (warehouse/statistics/budget.py). A flag in
-- a running guarded rollout has its comparisons computed a second time, at the rollout's
-- per-comparison level; the rollout guardian decides on these, the health answer shows them
-- as its "rolloutGuard". Null for a flag without a running rollout.
ALTER TABLE flag_health ADD COLUMN guard_confidence DOUBLE;
ALTER TABLE flag_health ADD COLUMN failure_rate_guard_ci_low DOUBLE;
ALTER TABLE flag_health ADD COLUMN failure_rate_guard_ci_high DOUBLE;
ALTER TABLE flag_health ADD COLUMN failure_rate_guard_decision VARCHAR;
ALTER TABLE flag_health ADD COLUMN latency_p95_guard_ci_low DOUBLE;
ALTER TABLE flag_health ADD COLUMN latency_p95_guard_ci_high DOUBLE;
ALTER TABLE flag_health ADD COLUMN latency_p95_guard_decision VARCHAR;
ALTER TABLE flag_health ADD COLUMN coverage_guard_ci_low DOUBLE;
ALTER TABLE flag_health ADD COLUMN coverage_guard_ci_high DOUBLE;
ALTER TABLE flag_health ADD COLUMN coverage_guard_decision VARCHAR;
