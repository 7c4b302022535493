-- Version 11: outcomes beyond success (contract section 13; warehouse/README.md): tracked
-- metrics per exposed user, and release health's comparisons as rows, one per comparison.

-- When each user was first seen in its arm (an exposure, section 9): a metric counts a user's
-- events from its first exposure to the flag. Users folded before this version take their last
-- evaluation's time, the earliest the warehouse still knows.
ALTER TABLE arm_users ADD COLUMN first_evaluated_at TIMESTAMPTZ;
UPDATE arm_users SET first_evaluated_at = last_evaluated_at;

-- One row per followed metric, flag environment, split, arm and exposed user: the user's value
-- of the metric over its window, and of the same metric over the 7 days before its exposure
-- (the regression adjustment's covariate). Replaced whole by each run of `metric_users`.
--   value        conversion: 1 if any event else 0; count: events; sum and mean: sum of values
--   denominator  mean: events with a value; otherwise 1 (the ratio's denominator per user)
--   pre_value    the same as value, over the 7 days before exposed_at
CREATE TABLE metric_users (
    metric_key          VARCHAR     NOT NULL,
    event_name          VARCHAR     NOT NULL,
    kind                VARCHAR     NOT NULL,
    better              VARCHAR     NOT NULL,
    organization_id     VARCHAR,
    environment_id      VARCHAR     NOT NULL,
    flag_key            VARCHAR     NOT NULL,
    rollout_percentage  DOUBLE      NOT NULL,
    arm                 VARCHAR     NOT NULL,
    user_identifier     VARCHAR     NOT NULL,
    pre_starts_at       TIMESTAMPTZ NOT NULL,
    exposed_at          TIMESTAMPTZ NOT NULL,
    window_ends_at      TIMESTAMPTZ NOT NULL,
    events              BIGINT      NOT NULL,
    value               DOUBLE      NOT NULL,
    denominator         DOUBLE      NOT NULL,
    pre_events          BIGINT      NOT NULL,
    pre_value           DOUBLE      NOT NULL,
    pre_denominator     DOUBLE      NOT NULL
);

-- Release health's comparisons, one row per flag environment and comparison (`metric:<key>`
-- for a metric): a new metric is rows, never a column.
CREATE TABLE health_comparisons (
    organization_id     VARCHAR,
    environment_id      VARCHAR     NOT NULL,
    flag_key            VARCHAR     NOT NULL,
    comparison          VARCHAR     NOT NULL,
    rollout_percentage  DOUBLE,
    treatment_users     BIGINT      NOT NULL,
    treatment_mean      DOUBLE,
    control_users       BIGINT      NOT NULL,
    control_mean        DOUBLE,
    difference          DOUBLE,
    ci_low              DOUBLE,
    ci_high             DOUBLE,
    confidence          DOUBLE      NOT NULL,
    decision            VARCHAR     NOT NULL,
    variance_reduction  DOUBLE,
    withheld_reason     VARCHAR,
    computed_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (environment_id, flag_key, comparison)
);

-- The built-in comparisons move from flag_health's columns to rows (api/controlplane/catalogue.py).
INSERT INTO health_comparisons
SELECT organization_id, environment_id, flag_key, c.name, rollout_percentage,
       coalesce(c.treatment_users, 0), c.treatment_mean, coalesce(c.control_users, 0),
       c.control_mean,
       c.difference, c.ci_low, c.ci_high, coalesce(confidence, 0.95),
       coalesce(c.decision, 'withheld'), NULL, withheld_reason,
       computed_at
FROM flag_health,
     LATERAL (VALUES
        ('failureRate', treatment_users_with_feedback, treatment_failure_rate,
         control_users_with_feedback, control_failure_rate, failure_rate_difference,
         failure_rate_ci_low, failure_rate_ci_high, failure_rate_decision),
        ('latencyP95Ms', treatment_latency_users, treatment_latency_p95_ms,
         control_latency_users, control_latency_p95_ms, latency_p95_difference,
         latency_p95_ci_low, latency_p95_ci_high, latency_p95_decision),
        ('coverage', treatment_users, treatment_coverage, control_users, control_coverage,
         coverage_difference, coverage_ci_low, coverage_ci_high, coverage_decision)
     ) AS c (name, treatment_users, treatment_mean, control_users, control_mean, difference,
             ci_low, ci_high, decision)
WHERE rollout_percentage IS NOT NULL;

ALTER TABLE flag_health DROP COLUMN failure_rate_difference;
ALTER TABLE flag_health DROP COLUMN failure_rate_ci_low;
ALTER TABLE flag_health DROP COLUMN failure_rate_ci_high;
ALTER TABLE flag_health DROP COLUMN failure_rate_decision;
ALTER TABLE flag_health DROP COLUMN latency_p95_difference;
ALTER TABLE flag_health DROP COLUMN latency_p95_ci_low;
ALTER TABLE flag_health DROP COLUMN latency_p95_ci_high;
ALTER TABLE flag_health DROP COLUMN latency_p95_decision;
ALTER TABLE flag_health DROP COLUMN coverage_difference;
ALTER TABLE flag_health DROP COLUMN coverage_ci_low;
ALTER TABLE flag_health DROP COLUMN coverage_ci_high;
ALTER TABLE flag_health DROP COLUMN coverage_decision;
