-- Version 3: arm_users joined on one 128-bit key (arm_user_key); per-arm totals and latency histograms kept by the fold, so that flag_health reads
-- a few rows per arm instead of every user of each touched arm (a run costs what is new, not
-- what the history holds). `latency_bucket` is the macro registered with every connection
-- (warehouse/statistics/histogram.py).

ALTER TABLE arm_users ADD COLUMN user_key UHUGEINT;
UPDATE arm_users
SET user_key = arm_user_key(environment_id, flag_key, rollout_percentage, arm, user_identifier);

-- Per arm of a flag environment's split at one percentage: its users and what they reported.
CREATE TABLE arm_totals (
    environment_id      VARCHAR     NOT NULL,
    flag_key            VARCHAR     NOT NULL,
    rollout_percentage  DOUBLE      NOT NULL,
    arm                 VARCHAR     NOT NULL,
    organization_id     VARCHAR,
    users               BIGINT      NOT NULL,
    users_with_feedback BIGINT      NOT NULL,
    failed_users        BIGINT      NOT NULL,
    last_evaluated_at   TIMESTAMPTZ,
    PRIMARY KEY (environment_id, flag_key, rollout_percentage, arm)
);

-- Per arm, the users whose mean latency falls in each relative-error bucket.
CREATE TABLE arm_latency_buckets (
    environment_id      VARCHAR     NOT NULL,
    flag_key            VARCHAR     NOT NULL,
    rollout_percentage  DOUBLE      NOT NULL,
    arm                 VARCHAR     NOT NULL,
    bucket              INTEGER     NOT NULL,
    users               BIGINT      NOT NULL,
    PRIMARY KEY (environment_id, flag_key, rollout_percentage, arm, bucket)
);

INSERT INTO arm_totals
SELECT environment_id, flag_key, rollout_percentage, arm, any_value(organization_id),
       count(*), count(*) FILTER (WHERE feedback_count > 0),
       count(*) FILTER (WHERE failure_count > 0), max(last_evaluated_at)
FROM arm_users
GROUP BY environment_id, flag_key, rollout_percentage, arm;

INSERT INTO arm_latency_buckets
SELECT environment_id, flag_key, rollout_percentage, arm,
       latency_bucket(latency_sum / latency_count), count(*)
FROM arm_users
WHERE latency_count > 0
GROUP BY ALL;
