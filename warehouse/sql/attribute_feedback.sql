-- Fold newly loaded events into the counters, in one transaction (see pipelines/attribution.py).
-- Parameters: $eval_lo < load_batch <= $eval_hi (evaluations), $fb_lo < load_batch <= $fb_hi
-- (feedback). Feedback winner order: received_at, then result, then latency (NULL lowest), so the
-- winner does not depend on how files were split into runs.

-- 1. New evaluations, counted per (environment, flag, UTC date, served value).
CREATE OR REPLACE TEMP TABLE eval_delta AS
SELECT environment_id, flag_key,
       utc_date(evaluated_at) AS evaluation_date,
       value AS served_value,
       any_value(organization_id) AS organization_id,
       count(*) AS evaluations
FROM evaluation_events
WHERE load_batch > $eval_lo AND load_batch <= $eval_hi
GROUP BY ALL;

-- 2. New feedback: the latest per evaluation_id within the new files.
CREATE OR REPLACE TEMP TABLE fb_new AS
SELECT evaluation_id, organization_id, environment_id, received_at, result, latency_ms
FROM feedback_events
WHERE load_batch > $fb_lo AND load_batch <= $fb_hi
QUALIFY row_number() OVER (
    PARTITION BY evaluation_id
    ORDER BY received_at DESC, result DESC, coalesce(latency_ms, -1) DESC) = 1;

-- 3. Those that beat what is already kept for their evaluation (or are its first feedback).
CREATE OR REPLACE TEMP TABLE fb_winners AS
SELECT n.*,
       o.evaluation_id IS NOT NULL AS replaces_old,
       o.result AS old_result, o.latency_ms AS old_latency_ms,
       o.flag_environment_id AS old_flag_environment_id, o.flag_key AS old_flag_key,
       o.evaluation_date AS old_evaluation_date, o.served_value AS old_served_value,
       o.user_identifier AS old_user_identifier, o.arm AS old_arm,
       o.rollout_percentage AS old_rollout_percentage, o.evaluated_at AS old_evaluated_at
FROM fb_new n
LEFT JOIN feedback_latest o USING (evaluation_id)
WHERE o.evaluation_id IS NULL
   OR n.received_at > o.received_at
   OR (n.received_at = o.received_at AND n.result::INT > o.result::INT)
   OR (n.received_at = o.received_at AND n.result = o.result
       AND coalesce(n.latency_ms, -1) > coalesce(o.latency_ms, -1));

-- 4. Evaluations to look up: unattributed winners and pending feedback kept from earlier runs.
CREATE OR REPLACE TEMP TABLE fb_lookup AS
SELECT evaluation_id FROM fb_winners WHERE old_flag_key IS NULL
UNION
SELECT evaluation_id FROM feedback_latest WHERE flag_key IS NULL;

CREATE OR REPLACE TEMP TABLE fb_found AS
SELECT e.evaluation_id, e.environment_id AS flag_environment_id, e.flag_key,
       utc_date(e.evaluated_at) AS evaluation_date,
       e.value AS served_value, e.organization_id,
       e.user_identifier, e.arm, e.rollout_percentage, e.evaluated_at
FROM evaluation_events e
JOIN fb_lookup l USING (evaluation_id)
WHERE e.load_batch <= $eval_hi;

-- 5. Signed contributions of feedback to the counters.
CREATE OR REPLACE TEMP TABLE fb_delta AS
WITH retracted AS (   -- replaced feedback that had been counted
    SELECT old_flag_environment_id AS environment_id, old_flag_key AS flag_key,
           old_evaluation_date AS evaluation_date, old_served_value AS served_value,
           NULL::VARCHAR AS organization_id,
           -1 AS feedback_count,
           -(old_result::INT) AS success_count, -((NOT old_result)::INT) AS failure_count,
           -coalesce(old_latency_ms, 0) AS latency_sum,
           -(old_latency_ms IS NOT NULL)::INT AS latency_count,
           old_user_identifier AS user_identifier, old_arm AS arm,
           old_rollout_percentage AS rollout_percentage, old_evaluated_at AS evaluated_at
    FROM fb_winners WHERE old_flag_key IS NOT NULL
), winners AS (       -- winners, attributed as before or newly found
    SELECT coalesce(w.old_flag_environment_id, f.flag_environment_id) AS environment_id,
           coalesce(w.old_flag_key, f.flag_key) AS flag_key,
           coalesce(w.old_evaluation_date, f.evaluation_date) AS evaluation_date,
           coalesce(w.old_served_value, f.served_value) AS served_value,
           f.organization_id,
           1 AS feedback_count, w.result::INT AS success_count, (NOT w.result)::INT AS failure_count,
           coalesce(w.latency_ms, 0) AS latency_sum, (w.latency_ms IS NOT NULL)::INT AS latency_count,
           CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_user_identifier ELSE f.user_identifier END
               AS user_identifier,
           CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_arm ELSE f.arm END AS arm,
           CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_rollout_percentage
                ELSE f.rollout_percentage END AS rollout_percentage,
           CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_evaluated_at ELSE f.evaluated_at END
               AS evaluated_at
    FROM fb_winners w LEFT JOIN fb_found f USING (evaluation_id)
    WHERE w.old_flag_key IS NOT NULL OR f.flag_key IS NOT NULL
), resolved AS (      -- pending feedback from earlier runs whose evaluation is now loaded
    SELECT f.flag_environment_id AS environment_id, f.flag_key, f.evaluation_date, f.served_value,
           f.organization_id,
           1 AS feedback_count, p.result::INT AS success_count, (NOT p.result)::INT AS failure_count,
           coalesce(p.latency_ms, 0) AS latency_sum, (p.latency_ms IS NOT NULL)::INT AS latency_count,
           f.user_identifier, f.arm, f.rollout_percentage, f.evaluated_at
    FROM feedback_latest p
    JOIN fb_found f USING (evaluation_id)
    ANTI JOIN fb_winners w USING (evaluation_id)
    WHERE p.flag_key IS NULL
)
SELECT * FROM retracted UNION ALL SELECT * FROM winners UNION ALL SELECT * FROM resolved;

-- 6. Keep the winners and attribute pending feedback.
DELETE FROM feedback_latest
WHERE evaluation_id IN (SELECT evaluation_id FROM fb_winners WHERE replaces_old);

UPDATE feedback_latest AS p
SET flag_environment_id = f.flag_environment_id, flag_key = f.flag_key,
    evaluation_date = f.evaluation_date, served_value = f.served_value,
    user_identifier = f.user_identifier, arm = f.arm,
    rollout_percentage = f.rollout_percentage, evaluated_at = f.evaluated_at
FROM fb_found f
WHERE p.evaluation_id = f.evaluation_id AND p.flag_key IS NULL;

INSERT INTO feedback_latest (
    evaluation_id, organization_id, environment_id, received_at, result, latency_ms,
    flag_environment_id, flag_key, evaluation_date, served_value,
    user_identifier, arm, rollout_percentage, evaluated_at)
SELECT w.evaluation_id, w.organization_id, w.environment_id, w.received_at, w.result, w.latency_ms,
       coalesce(w.old_flag_environment_id, f.flag_environment_id),
       coalesce(w.old_flag_key, f.flag_key),
       coalesce(w.old_evaluation_date, f.evaluation_date),
       coalesce(w.old_served_value, f.served_value),
       CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_user_identifier ELSE f.user_identifier END,
       CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_arm ELSE f.arm END,
       CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_rollout_percentage
            ELSE f.rollout_percentage END,
       CASE WHEN w.old_flag_key IS NOT NULL THEN w.old_evaluated_at ELSE f.evaluated_at END
FROM fb_winners w LEFT JOIN fb_found f USING (evaluation_id);

-- 7. Apply evaluation and feedback deltas to the counters.
INSERT INTO flag_value_daily_stats
SELECT environment_id, flag_key, evaluation_date, served_value,
       any_value(organization_id), sum(evaluations), sum(feedback_count), sum(success_count),
       sum(failure_count), sum(latency_sum), sum(latency_count)
FROM (
    SELECT environment_id, flag_key, evaluation_date, served_value, organization_id, evaluations,
           0 AS feedback_count, 0 AS success_count, 0 AS failure_count,
           0.0::DOUBLE AS latency_sum, 0 AS latency_count
    FROM eval_delta
    UNION ALL
    SELECT environment_id, flag_key, evaluation_date, served_value, organization_id, 0,
           feedback_count, success_count, failure_count, latency_sum, latency_count
    FROM fb_delta
)
GROUP BY environment_id, flag_key, evaluation_date, served_value
ON CONFLICT DO UPDATE SET
    organization_id = coalesce(flag_value_daily_stats.organization_id, excluded.organization_id),
    evaluations = flag_value_daily_stats.evaluations + excluded.evaluations,
    feedback_count = flag_value_daily_stats.feedback_count + excluded.feedback_count,
    success_count = flag_value_daily_stats.success_count + excluded.success_count,
    failure_count = flag_value_daily_stats.failure_count + excluded.failure_count,
    latency_sum = flag_value_daily_stats.latency_sum + excluded.latency_sum,
    latency_count = flag_value_daily_stats.latency_count + excluded.latency_count;

-- 8. The same deltas per user of an arm (feedback of evaluations in no arm counts nowhere here):
-- each touched user's row replaced by its sum with the delta (hash joins of the small delta
-- against the table; no index to maintain, so the first run's millions of users are a plain
-- insert: an upsert or MERGE into an empty table of 3M users took 14-20 s). The joins use the
-- 128-bit user_key alone (arm_user_key): scanning one fixed-width column of millions of rows
-- instead of five strings made the join and the delete three to four times faster.
CREATE OR REPLACE TEMP TABLE arm_delta AS
SELECT environment_id, flag_key, rollout_percentage, arm, user_identifier,
       arm_user_key(environment_id, flag_key, rollout_percentage, arm, user_identifier)
           AS user_key,
       any_value(organization_id) AS organization_id, sum(evaluations) AS evaluations,
       sum(feedback_count) AS feedback_count, sum(failure_count) AS failure_count,
       sum(latency_sum) AS latency_sum, sum(latency_count) AS latency_count,
       max(last_evaluated_at) AS last_evaluated_at, min(last_evaluated_at) AS first_evaluated_at
FROM (
    SELECT environment_id, flag_key, rollout_percentage, arm, user_identifier, organization_id,
           1 AS evaluations, 0 AS feedback_count, 0 AS failure_count, 0.0::DOUBLE AS latency_sum,
           0 AS latency_count, evaluated_at AS last_evaluated_at, evaluated_at
    FROM evaluation_events
    WHERE load_batch > $eval_lo AND load_batch <= $eval_hi AND arm IS NOT NULL
    UNION ALL
    SELECT environment_id, flag_key, rollout_percentage, arm, user_identifier, organization_id,
           0, feedback_count, failure_count, latency_sum, latency_count, NULL, evaluated_at
    FROM fb_delta WHERE arm IS NOT NULL
) AS x
WHERE NOT EXISTS (  -- evaluated before its flag environment's epoch (arm_epochs.sql)
    SELECT 1 FROM arm_epochs AS e
    WHERE e.environment_id = x.environment_id AND e.flag_key = x.flag_key
      AND x.evaluated_at < e.since
)
GROUP BY environment_id, flag_key, rollout_percentage, arm, user_identifier;

CREATE OR REPLACE TEMP TABLE arm_merged AS
SELECT d.environment_id, d.flag_key, d.rollout_percentage, d.arm, d.user_identifier, d.user_key,
       coalesce(u.organization_id, d.organization_id) AS organization_id,
       d.evaluations + coalesce(u.evaluations, 0) AS evaluations,
       d.feedback_count + coalesce(u.feedback_count, 0) AS feedback_count,
       d.failure_count + coalesce(u.failure_count, 0) AS failure_count,
       d.latency_sum + coalesce(u.latency_sum, 0) AS latency_sum,
       d.latency_count + coalesce(u.latency_count, 0) AS latency_count,
       greatest(d.last_evaluated_at, u.last_evaluated_at) AS last_evaluated_at,
       least(d.first_evaluated_at, u.first_evaluated_at) AS first_evaluated_at,
       u.first_evaluated_at AS old_first_evaluated_at,
       u.user_key IS NOT NULL AS was_counted,
       coalesce(u.feedback_count, 0) > 0 AS had_feedback,
       coalesce(u.failure_count, 0) > 0 AS had_failed,
       CASE WHEN u.latency_count > 0 THEN latency_bucket(u.latency_sum / u.latency_count) END
           AS old_bucket
FROM arm_delta AS d
LEFT JOIN arm_users AS u USING (user_key);

DELETE FROM arm_users AS u USING arm_delta AS d WHERE u.user_key = d.user_key;

-- Users whose exposure may have changed (a new split row, or an earlier first evaluation), in
-- the flag environments that followed a metric at the last run of metric_users: it computes
-- them again (pipelines/metrics.py). A flag followed since is computed whole there, so the
-- users of flags nothing follows (in a full run, millions) are not marked.
INSERT INTO exposure_dirty
SELECT DISTINCT m.environment_id, m.flag_key, m.user_identifier FROM arm_merged AS m
SEMI JOIN metric_follows_state AS f USING (environment_id, flag_key)
WHERE m.old_first_evaluated_at IS NULL OR m.first_evaluated_at < m.old_first_evaluated_at;

INSERT INTO arm_users BY NAME
SELECT environment_id, flag_key, rollout_percentage, arm, user_identifier, organization_id,
       evaluations, feedback_count, failure_count, latency_sum, latency_count, last_evaluated_at,
       first_evaluated_at, user_key
FROM arm_merged;

-- 9. Each touched user's move, old state to new, in its arm's totals and latency histogram,
-- so flag_health reads a few rows per arm however many users the arm has.
CREATE OR REPLACE TEMP TABLE arm_moves AS
SELECT environment_id, flag_key, rollout_percentage, arm, organization_id, last_evaluated_at,
       1 - was_counted::INT AS users,
       (feedback_count > 0)::INT - had_feedback::INT AS users_with_feedback,
       (failure_count > 0)::INT - had_failed::INT AS failed_users,
       CASE WHEN latency_count > 0 THEN latency_bucket(latency_sum / latency_count) END
           AS new_bucket,
       old_bucket
FROM arm_merged;

INSERT INTO arm_totals
SELECT environment_id, flag_key, rollout_percentage, arm, any_value(organization_id),
       sum(users), sum(users_with_feedback), sum(failed_users), max(last_evaluated_at)
FROM arm_moves
GROUP BY environment_id, flag_key, rollout_percentage, arm
ON CONFLICT DO UPDATE SET
    organization_id = coalesce(arm_totals.organization_id, excluded.organization_id),
    users = arm_totals.users + excluded.users,
    users_with_feedback = arm_totals.users_with_feedback + excluded.users_with_feedback,
    failed_users = arm_totals.failed_users + excluded.failed_users,
    last_evaluated_at = greatest(arm_totals.last_evaluated_at, excluded.last_evaluated_at);

INSERT INTO arm_latency_buckets
SELECT environment_id, flag_key, rollout_percentage, arm, bucket, sum(move)
FROM (
    SELECT environment_id, flag_key, rollout_percentage, arm, new_bucket AS bucket, 1 AS move
    FROM arm_moves WHERE new_bucket IS NOT NULL AND new_bucket IS DISTINCT FROM old_bucket
    UNION ALL
    SELECT environment_id, flag_key, rollout_percentage, arm, old_bucket, -1
    FROM arm_moves WHERE old_bucket IS NOT NULL AND new_bucket IS DISTINCT FROM old_bucket
)
GROUP BY environment_id, flag_key, rollout_percentage, arm, bucket
HAVING sum(move) <> 0
ON CONFLICT DO UPDATE SET users = arm_latency_buckets.users + excluded.users;

DELETE FROM arm_latency_buckets WHERE users = 0;

-- 10. What the health asset must recompute, and what the window asset must add.
INSERT INTO health_dirty
SELECT DISTINCT environment_id, flag_key FROM arm_delta
ON CONFLICT DO NOTHING;

-- Per minute and arm of evaluation, what the new evaluations and the feedback deltas add to
-- the windows (flag_arm_windows.sql adds them up; windows are not epoch-bound, unlike arms).
INSERT INTO window_deltas
SELECT environment_id, flag_key, utc_floor(evaluated_at, 60000000) AS minute, arm,
       sum(evaluations), sum(feedback_count), sum(failure_count), sum(latency_sum),
       sum(latency_count)
FROM (
    SELECT environment_id, flag_key, evaluated_at, arm, 1 AS evaluations, 0 AS feedback_count,
           0 AS failure_count, 0.0::DOUBLE AS latency_sum, 0 AS latency_count
    FROM evaluation_events
    WHERE load_batch > $eval_lo AND load_batch <= $eval_hi AND arm IS NOT NULL
    UNION ALL
    SELECT environment_id, flag_key, evaluated_at, arm, 0, feedback_count, failure_count,
           latency_sum, latency_count
    FROM fb_delta WHERE arm IS NOT NULL
)
GROUP BY environment_id, flag_key, minute, arm;
