-- Version 2: release health (contract section 9). Evaluation events carry their arm; feedback
-- keeps its evaluation's user and arm; per-user state per arm; health and per-arm time windows.
-- The served-value comparison (flag_value_comparison) is gone.

ALTER TABLE evaluation_events ADD COLUMN rule_index SMALLINT;
ALTER TABLE evaluation_events ADD COLUMN arm VARCHAR;
ALTER TABLE evaluation_events ADD COLUMN rollout_percentage DOUBLE;

ALTER TABLE feedback_latest ADD COLUMN user_identifier VARCHAR;
ALTER TABLE feedback_latest ADD COLUMN arm VARCHAR;
ALTER TABLE feedback_latest ADD COLUMN rollout_percentage DOUBLE;
ALTER TABLE feedback_latest ADD COLUMN evaluated_at TIMESTAMPTZ;

-- One row per user per arm of a flag environment's split at one percentage: what the user did.
-- Unique on (environment_id, flag_key, rollout_percentage, arm, user_identifier), kept so by the
-- fold (update existing, insert new) rather than by an index: probing an index of millions of
-- composite string keys cost more than the rest of a first run.
CREATE TABLE arm_users (
    environment_id      VARCHAR     NOT NULL,
    flag_key            VARCHAR     NOT NULL,
    rollout_percentage  DOUBLE      NOT NULL,
    arm                 VARCHAR     NOT NULL,
    user_identifier     VARCHAR     NOT NULL,
    organization_id     VARCHAR,
    evaluations         BIGINT      NOT NULL,
    feedback_count      BIGINT      NOT NULL,
    failure_count       BIGINT      NOT NULL,
    latency_sum         DOUBLE      NOT NULL,
    latency_count       BIGINT      NOT NULL,
    last_evaluated_at   TIMESTAMPTZ
);

-- Flag environments whose arms changed since flag_health last computed them.
CREATE TABLE health_dirty (
    environment_id VARCHAR NOT NULL,
    flag_key       VARCHAR NOT NULL,
    PRIMARY KEY (environment_id, flag_key)
);

-- Minutes (of evaluation time) whose arm figures changed since flag_arm_windows last ran.
CREATE TABLE window_dirty (
    environment_id VARCHAR     NOT NULL,
    flag_key       VARCHAR     NOT NULL,
    minute         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (environment_id, flag_key, minute)
);

-- Release health per flag environment: the arms of its current split, their comparison.
CREATE TABLE flag_health (
    organization_id                 VARCHAR,
    environment_id                  VARCHAR NOT NULL,
    flag_key                        VARCHAR NOT NULL,
    rollout_percentage              DOUBLE,
    treatment_users                 BIGINT,
    treatment_users_with_feedback   BIGINT,
    treatment_failed_users          BIGINT,
    treatment_coverage              DOUBLE,
    treatment_failure_rate          DOUBLE,
    treatment_latency_users         BIGINT,
    treatment_latency_p50_ms        DOUBLE,
    treatment_latency_p95_ms        DOUBLE,
    treatment_latency_p99_ms        DOUBLE,
    control_users                   BIGINT,
    control_users_with_feedback     BIGINT,
    control_failed_users            BIGINT,
    control_coverage                DOUBLE,
    control_failure_rate            DOUBLE,
    control_latency_users           BIGINT,
    control_latency_p50_ms          DOUBLE,
    control_latency_p95_ms          DOUBLE,
    control_latency_p99_ms          DOUBLE,
    sample_ratio_expected           DOUBLE,
    sample_ratio_observed           DOUBLE,
    sample_ratio_p_value            DOUBLE,
    sample_ratio_mismatch           BOOLEAN,
    failure_rate_difference         DOUBLE,
    failure_rate_ci_low             DOUBLE,
    failure_rate_ci_high            DOUBLE,
    failure_rate_decision           VARCHAR NOT NULL,
    latency_p95_difference          DOUBLE,
    latency_p95_ci_low              DOUBLE,
    latency_p95_ci_high             DOUBLE,
    latency_p95_decision            VARCHAR NOT NULL,
    coverage_difference             DOUBLE,
    coverage_ci_low                 DOUBLE,
    coverage_ci_high                DOUBLE,
    coverage_decision               VARCHAR NOT NULL,
    withheld_reason                 VARCHAR,
    confidence                      DOUBLE  NOT NULL,
    computed_at                     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (environment_id, flag_key)
);

-- Per-arm figures by time window of evaluation: grain 'minute' (kept 48 h), 'hour' (35 days),
-- 'day' (always). Evaluation-level, descriptive: the charts of the health view.
CREATE TABLE flag_arm_windows (
    environment_id   VARCHAR     NOT NULL,
    flag_key         VARCHAR     NOT NULL,
    grain            VARCHAR     NOT NULL,
    window_start     TIMESTAMPTZ NOT NULL,
    arm              VARCHAR     NOT NULL,
    evaluations      BIGINT      NOT NULL,
    users            BIGINT      NOT NULL,
    feedback_count   BIGINT      NOT NULL,
    failure_count    BIGINT      NOT NULL,
    latency_sum      DOUBLE      NOT NULL,
    latency_count    BIGINT      NOT NULL,
    PRIMARY KEY (environment_id, flag_key, grain, window_start, arm)
);

DROP TABLE IF EXISTS flag_value_comparison;
