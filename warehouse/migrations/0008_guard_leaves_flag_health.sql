-- Version 8: a guard that guards (contract section 10). A guarded rollout is judged on its own
-- evidence over all its steps (pipelines/guard_evidence.py), no longer on flag_health's
-- comparisons read a second time at a per-step share of its budget: those columns go.
ALTER TABLE flag_health DROP COLUMN guard_confidence;
ALTER TABLE flag_health DROP COLUMN failure_rate_guard_ci_low;
ALTER TABLE flag_health DROP COLUMN failure_rate_guard_ci_high;
ALTER TABLE flag_health DROP COLUMN failure_rate_guard_decision;
ALTER TABLE flag_health DROP COLUMN latency_p95_guard_ci_low;
ALTER TABLE flag_health DROP COLUMN latency_p95_guard_ci_high;
ALTER TABLE flag_health DROP COLUMN latency_p95_guard_decision;
ALTER TABLE flag_health DROP COLUMN coverage_guard_ci_low;
ALTER TABLE flag_health DROP COLUMN coverage_guard_ci_high;
ALTER TABLE flag_health DROP COLUMN coverage_guard_decision;
