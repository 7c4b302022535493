-- Every followed metric's value per exposed user (contract section 13), replaced whole.
-- Input: temp table metric_follows (organization_id, environment_id, flag_key, metric_key,
-- event_name, kind, window_hours), the control plane's follows (pipelines/metrics.py).
--
-- A user's exposure is its first evaluation in an arm of the flag (arm_users, since the flag
-- environment's epoch); its window runs from there for the metric's window_hours, and its
-- pre-period is the 7 days before. Events outside both count nowhere; a user never exposed has
-- no row. An event without a value adds nothing to a sum and is not in a mean's denominator.

-- A user's value and the ratio's denominator by the metric's kind (docs/warehouse.md).
CREATE OR REPLACE TEMP MACRO metric_value(kind, events, total) AS
    CASE kind WHEN 'conversion' THEN (events > 0)::DOUBLE WHEN 'count' THEN events::DOUBLE
              ELSE total::DOUBLE END;
CREATE OR REPLACE TEMP MACRO metric_denominator(kind, valued) AS
    CASE kind WHEN 'mean' THEN valued::DOUBLE ELSE 1.0 END;

CREATE OR REPLACE TEMP TABLE metric_exposures AS
SELECT u.organization_id, u.environment_id, u.flag_key, u.rollout_percentage, u.arm,
       u.user_identifier,
       min(u.first_evaluated_at) OVER (
           PARTITION BY u.environment_id, u.flag_key, u.user_identifier) AS exposed_at
FROM arm_users AS u
SEMI JOIN (SELECT DISTINCT environment_id, flag_key FROM metric_follows) AS f
    USING (environment_id, flag_key)
WHERE u.first_evaluated_at IS NOT NULL;

CREATE OR REPLACE TEMP TABLE metric_windows AS
SELECT e.*, f.metric_key, f.event_name, f.kind, f.better,
       coalesce(e.organization_id, f.organization_id) AS owner,
       e.exposed_at + to_hours(f.window_hours) AS window_ends_at,
       e.exposed_at - to_days($pre_days) AS pre_starts_at
FROM metric_exposures AS e
JOIN metric_follows AS f USING (environment_id, flag_key);

CREATE OR REPLACE TEMP TABLE metric_sums AS
SELECT w.metric_key, w.event_name, w.owner AS organization_id, w.environment_id, w.flag_key,
       w.rollout_percentage, w.arm, w.user_identifier, w.pre_starts_at, w.exposed_at,
       w.window_ends_at,
       any_value(w.kind) AS kind, any_value(w.better) AS better,
       count(t.occurred_at) FILTER (WHERE t.occurred_at >= w.exposed_at) AS events,
       count(t.value) FILTER (WHERE t.occurred_at >= w.exposed_at) AS valued,
       coalesce(sum(t.value) FILTER (WHERE t.occurred_at >= w.exposed_at), 0) AS total,
       count(t.occurred_at) FILTER (WHERE t.occurred_at < w.exposed_at) AS pre_events,
       count(t.value) FILTER (WHERE t.occurred_at < w.exposed_at) AS pre_valued,
       coalesce(sum(t.value) FILTER (WHERE t.occurred_at < w.exposed_at), 0) AS pre_total
FROM metric_windows AS w
LEFT JOIN track_events AS t
    ON t.environment_id = w.environment_id AND t.event_name = w.event_name
   AND t.user_identifier = w.user_identifier
   AND t.occurred_at >= w.pre_starts_at AND t.occurred_at < w.window_ends_at
GROUP BY ALL;

DELETE FROM metric_users;

INSERT INTO metric_users
SELECT metric_key, event_name, kind, better, organization_id, environment_id, flag_key,
       rollout_percentage, arm, user_identifier, pre_starts_at, exposed_at, window_ends_at, events,
       metric_value(kind, events, total), metric_denominator(kind, valued),
       pre_events,
       metric_value(kind, pre_events, pre_total), metric_denominator(kind, pre_valued)
FROM metric_sums;
