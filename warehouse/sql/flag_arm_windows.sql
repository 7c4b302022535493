-- Bring the per-arm time windows up to date with what the folds recorded since the last run
-- (window_deltas: per minute and arm, what new evaluations and changes of kept feedback add).
-- Counters are sums, so each window adds its deltas; distinct users are counted again from the
-- events, in the windows that new evaluations fell in only (feedback never changes them). A run
-- costs what is new: no window is read back from the events for feedback, however old it is.
-- Grains: minute (kept 48 hours), hour (35 days), day (always), by UTC evaluation time
-- (utc_floor, warehouse/migrations/__init__.py).

CREATE OR REPLACE TEMP TABLE window_changes AS
SELECT environment_id, flag_key, grain, window_start, arm,
       sum(evaluations) AS evaluations, sum(feedback_count) AS feedback_count,
       sum(failure_count) AS failure_count, sum(latency_sum) AS latency_sum,
       sum(latency_count) AS latency_count
FROM (
    SELECT d.*, g.grain,
           CASE g.grain WHEN 'minute' THEN d.minute
                        WHEN 'hour' THEN utc_floor(d.minute, 3600000000)
                        ELSE utc_floor(d.minute, 86400000000) END AS window_start
    FROM window_deltas AS d, (VALUES ('minute'), ('hour'), ('day')) AS g(grain)
)
WHERE grain = 'day'
   OR (grain = 'hour' AND window_start >= now() - INTERVAL 35 DAY)
   OR (grain = 'minute' AND window_start >= now() - INTERVAL 48 HOUR)
GROUP BY environment_id, flag_key, grain, window_start, arm;

-- A new window starts with no users; they are counted below, as new evaluations made it.
INSERT INTO flag_arm_windows
SELECT environment_id, flag_key, grain, window_start, arm, evaluations, 0, feedback_count,
       failure_count, latency_sum, latency_count
FROM window_changes
ON CONFLICT DO UPDATE SET
    evaluations = flag_arm_windows.evaluations + excluded.evaluations,
    feedback_count = flag_arm_windows.feedback_count + excluded.feedback_count,
    failure_count = flag_arm_windows.failure_count + excluded.failure_count,
    latency_sum = flag_arm_windows.latency_sum + excluded.latency_sum,
    latency_count = flag_arm_windows.latency_count + excluded.latency_count;

-- The flag environments and UTC days that new evaluations fell in: their arm evaluations,
-- five narrow columns (a touched minute or hour lies in a touched day).
CREATE OR REPLACE TEMP TABLE window_user_events AS
SELECT e.environment_id, e.flag_key, e.arm, e.user_identifier,
       utc_floor(e.evaluated_at, 60000000) AS minute,
       utc_floor(e.evaluated_at, 3600000000) AS hour,
       utc_floor(e.evaluated_at, 86400000000) AS day
FROM evaluation_events AS e
SEMI JOIN (SELECT environment_id, flag_key, window_start FROM window_changes
           WHERE grain = 'day' AND evaluations > 0) AS d
  ON e.environment_id = d.environment_id AND e.flag_key = d.flag_key
 AND utc_floor(e.evaluated_at, 86400000000) = d.window_start
WHERE e.arm IS NOT NULL
  AND e.evaluated_at >= (SELECT min(window_start) FROM window_changes WHERE evaluations > 0)
  AND e.evaluated_at < (SELECT max(window_start) + INTERVAL 1 DAY FROM window_changes
                        WHERE evaluations > 0);

CREATE OR REPLACE TEMP TABLE window_users AS
SELECT u.environment_id, u.flag_key, 'day' AS grain, u.day AS window_start, u.arm,
       count(DISTINCT u.user_identifier) AS users
FROM window_user_events AS u
GROUP BY u.environment_id, u.flag_key, u.day, u.arm
UNION ALL
SELECT u.environment_id, u.flag_key, 'hour', u.hour, u.arm, count(DISTINCT u.user_identifier)
FROM window_user_events AS u
SEMI JOIN window_changes AS c
  ON c.grain = 'hour' AND c.evaluations > 0 AND c.environment_id = u.environment_id
 AND c.flag_key = u.flag_key AND c.window_start = u.hour
GROUP BY u.environment_id, u.flag_key, u.hour, u.arm
UNION ALL
SELECT u.environment_id, u.flag_key, 'minute', u.minute, u.arm, count(DISTINCT u.user_identifier)
FROM window_user_events AS u
SEMI JOIN window_changes AS c
  ON c.grain = 'minute' AND c.evaluations > 0 AND c.environment_id = u.environment_id
 AND c.flag_key = u.flag_key AND c.window_start = u.minute
GROUP BY u.environment_id, u.flag_key, u.minute, u.arm;

UPDATE flag_arm_windows AS w
SET users = u.users
FROM window_users AS u
WHERE w.environment_id = u.environment_id AND w.flag_key = u.flag_key
  AND w.grain = u.grain AND w.window_start = u.window_start AND w.arm = u.arm;

DELETE FROM flag_arm_windows
WHERE (grain = 'minute' AND window_start < now() - INTERVAL 48 HOUR)
   OR (grain = 'hour' AND window_start < now() - INTERVAL 35 DAY);

DELETE FROM window_deltas;
