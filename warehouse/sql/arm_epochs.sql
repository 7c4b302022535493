-- Running guarded rollouts (temp table rollout_starts, from the control plane) that started
-- after the epoch recorded for their flag environment: its arms start again from nothing.
-- Their users, totals and latency histograms are forgotten, empty totals at the rollout's
-- percentage stand for the new epoch (so its health says "too few users", not the old figures),
-- and the fold (attribute_feedback.sql) counts no evaluation from before `since` in an arm.

CREATE OR REPLACE TEMP TABLE new_epochs AS
SELECT s.environment_id, s.flag_key, s.since, s.rollout_percentage
FROM rollout_starts AS s
LEFT JOIN arm_epochs AS e USING (environment_id, flag_key)
WHERE e.since IS NULL OR s.since > e.since;

DELETE FROM arm_users
WHERE (environment_id, flag_key) IN (SELECT (environment_id, flag_key) FROM new_epochs);

DELETE FROM arm_totals
WHERE (environment_id, flag_key) IN (SELECT (environment_id, flag_key) FROM new_epochs);

DELETE FROM arm_latency_buckets
WHERE (environment_id, flag_key) IN (SELECT (environment_id, flag_key) FROM new_epochs);

INSERT INTO arm_totals
SELECT environment_id, flag_key, rollout_percentage, arm, NULL, 0, 0, 0, since
FROM new_epochs CROSS JOIN (VALUES ('treatment'), ('control')) AS arms (arm);

INSERT INTO arm_epochs
SELECT environment_id, flag_key, since FROM new_epochs
ON CONFLICT DO UPDATE SET since = excluded.since;

INSERT INTO health_dirty
SELECT environment_id, flag_key FROM new_epochs
ON CONFLICT DO NOTHING;
