-- Recompute the per-arm time windows touched since the last run: delete each touched window and
-- insert it again from the events (idempotent; the windows are the table's partitions).
-- Grains: minute (kept 48 hours), hour (35 days), day (always), by UTC evaluation time.

CREATE OR REPLACE TEMP TABLE windows_touched AS
SELECT DISTINCT environment_id, flag_key, grain,
       CASE grain WHEN 'minute' THEN minute
                  WHEN 'hour' THEN date_trunc('hour', minute)
                  ELSE date_trunc('day', timezone('UTC', minute)) AT TIME ZONE 'UTC' END
           AS window_start
FROM window_dirty, (VALUES ('minute'), ('hour'), ('day')) AS grains(grain)
WHERE grain = 'day'
   OR (grain = 'hour' AND minute >= now() - INTERVAL 35 DAY)
   OR (grain = 'minute' AND minute >= now() - INTERVAL 48 HOUR);

DELETE FROM flag_arm_windows AS w
USING windows_touched AS t
WHERE w.environment_id = t.environment_id AND w.flag_key = t.flag_key
  AND w.grain = t.grain AND w.window_start = t.window_start;

CREATE OR REPLACE TEMP TABLE window_events AS
SELECT e.environment_id, e.flag_key, e.arm, e.user_identifier, e.evaluated_at,
       f.evaluation_id IS NOT NULL AS has_feedback, f.result, f.latency_ms
FROM evaluation_events AS e
SEMI JOIN (SELECT DISTINCT environment_id, flag_key, window_start FROM windows_touched
           WHERE grain = 'day') AS d
  ON e.environment_id = d.environment_id AND e.flag_key = d.flag_key
 AND e.evaluated_at >= d.window_start AND e.evaluated_at < d.window_start + INTERVAL 1 DAY
LEFT JOIN feedback_latest AS f USING (evaluation_id)
WHERE e.arm IS NOT NULL
  AND e.evaluated_at >= (SELECT min(window_start) FROM windows_touched);

INSERT INTO flag_arm_windows
SELECT t.environment_id, t.flag_key, t.grain, t.window_start, e.arm,
       count(*) AS evaluations,
       count(DISTINCT e.user_identifier) AS users,
       count(*) FILTER (WHERE e.has_feedback) AS feedback_count,
       count(*) FILTER (WHERE e.has_feedback AND NOT e.result) AS failure_count,
       coalesce(sum(e.latency_ms), 0) AS latency_sum,
       count(e.latency_ms) AS latency_count
FROM window_events AS e
JOIN windows_touched AS t
  ON e.environment_id = t.environment_id AND e.flag_key = t.flag_key
 AND t.window_start = CASE t.grain
        WHEN 'minute' THEN date_trunc('minute', e.evaluated_at)
        WHEN 'hour' THEN date_trunc('hour', e.evaluated_at)
        ELSE date_trunc('day', timezone('UTC', e.evaluated_at)) AT TIME ZONE 'UTC' END
GROUP BY ALL;

DELETE FROM flag_arm_windows
WHERE (grain = 'minute' AND window_start < now() - INTERVAL 48 HOUR)
   OR (grain = 'hour' AND window_start < now() - INTERVAL 35 DAY);

DELETE FROM window_dirty;
