-- Per-user figures of each arm of the dirty flag environments' current split (the percentage of
-- their latest evaluation in an arm), into temp tables read by pipelines/health.py.

CREATE OR REPLACE TEMP TABLE health_epoch AS
SELECT u.environment_id, u.flag_key,
       arg_max(u.rollout_percentage, u.last_evaluated_at) AS rollout_percentage
FROM arm_users AS u
SEMI JOIN health_dirty AS d USING (environment_id, flag_key)
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE health_users AS
SELECT u.environment_id, u.flag_key, u.arm, u.organization_id,
       u.feedback_count > 0 AS has_feedback,
       u.failure_count > 0 AS failed,
       CASE WHEN u.latency_count > 0 THEN u.latency_sum / u.latency_count END AS latency_ms
FROM arm_users AS u
JOIN health_epoch AS h USING (environment_id, flag_key, rollout_percentage);

CREATE OR REPLACE TEMP TABLE health_arms AS
SELECT environment_id, flag_key, arm,
       any_value(organization_id) AS organization_id,
       count(*) AS users,
       count(*) FILTER (WHERE has_feedback) AS users_with_feedback,
       count(*) FILTER (WHERE failed) AS failed_users,
       count(latency_ms) AS latency_users,
       quantile_cont(latency_ms, 0.50) AS latency_p50_ms,
       quantile_cont(latency_ms, 0.95) AS latency_p95_ms,
       quantile_cont(latency_ms, 0.99) AS latency_p99_ms,
       quantile_disc(latency_ms, 0.85) AS latency_tail_from
FROM health_users
GROUP BY ALL;
