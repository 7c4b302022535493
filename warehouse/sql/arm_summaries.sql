-- Each dirty flag environment's current split (the percentage of its latest evaluation in an
-- arm) and the totals of that split's arms, into temp tables read by pipelines/health.py,
-- which reads the arms' latency histograms (arm_latency_buckets) itself.

CREATE OR REPLACE TEMP TABLE health_epoch AS
SELECT t.environment_id, t.flag_key,
       arg_max(t.rollout_percentage, t.last_evaluated_at) AS rollout_percentage
FROM arm_totals AS t
SEMI JOIN health_dirty AS d USING (environment_id, flag_key)
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE health_arms AS
SELECT t.environment_id, t.flag_key, t.arm, t.organization_id,
       t.users, t.users_with_feedback, t.failed_users
FROM arm_totals AS t
JOIN health_epoch AS h USING (environment_id, flag_key, rollout_percentage);
