-- Version 7: flag_arm_windows kept by deltas (warehouse/sql/flag_arm_windows.sql). The fold
-- records what each new evaluation and each change of kept feedback adds to its minute and arm
-- (window_deltas); the windows asset adds those up into each grain's window and counts distinct
-- users again only in the windows that new evaluations fell in. window_dirty (minutes to
-- recompute from the events) goes: the minutes a failed run left in it are recomputed here, from
-- the events, one last time the old way, so that every window is exact before deltas apply.

CREATE TABLE window_deltas (
    environment_id VARCHAR     NOT NULL,
    flag_key       VARCHAR     NOT NULL,
    minute         TIMESTAMPTZ NOT NULL,
    arm            VARCHAR     NOT NULL,
    evaluations    BIGINT      NOT NULL,
    feedback_count BIGINT      NOT NULL,
    failure_count  BIGINT      NOT NULL,
    latency_sum    DOUBLE      NOT NULL,
    latency_count  BIGINT      NOT NULL
);

CREATE TEMP TABLE pending_windows AS
SELECT DISTINCT environment_id, flag_key, grain,
       CASE grain WHEN 'minute' THEN minute
                  WHEN 'hour' THEN utc_floor(minute, 3600000000)
                  ELSE utc_floor(minute, 86400000000) END AS window_start
FROM window_dirty, (VALUES ('minute'), ('hour'), ('day')) AS grains(grain)
WHERE grain = 'day'
   OR (grain = 'hour' AND minute >= now() - INTERVAL 35 DAY)
   OR (grain = 'minute' AND minute >= now() - INTERVAL 48 HOUR);

DELETE FROM flag_arm_windows AS w
USING pending_windows AS t
WHERE w.environment_id = t.environment_id AND w.flag_key = t.flag_key
  AND w.grain = t.grain AND w.window_start = t.window_start;

-- The arm events of every touched day (a touched minute or hour lies in a touched day), with
-- their deduplicated feedback. Windows are UTC (utc_floor, warehouse/migrations/__init__.py).
CREATE TEMP TABLE pending_window_events AS
SELECT e.environment_id, e.flag_key, e.arm, e.user_identifier,
       utc_floor(e.evaluated_at, 60000000) AS minute,
       utc_floor(e.evaluated_at, 3600000000) AS hour,
       utc_floor(e.evaluated_at, 86400000000) AS day,
       f.evaluation_id IS NOT NULL AS has_feedback, f.result, f.latency_ms
FROM evaluation_events AS e
SEMI JOIN (SELECT environment_id, flag_key, window_start FROM pending_windows
           WHERE grain = 'day') AS d
  ON e.environment_id = d.environment_id AND e.flag_key = d.flag_key
 AND utc_floor(e.evaluated_at, 86400000000) = d.window_start
LEFT JOIN feedback_latest AS f USING (evaluation_id)
WHERE e.arm IS NOT NULL
  AND e.evaluated_at >= (SELECT min(window_start) FROM pending_windows);

INSERT INTO flag_arm_windows
SELECT environment_id, flag_key, 'day', day, arm, count(*), count(DISTINCT user_identifier),
       count(*) FILTER (WHERE has_feedback), count(*) FILTER (WHERE has_feedback AND NOT result),
       coalesce(sum(latency_ms), 0), count(latency_ms)
FROM pending_window_events
GROUP BY environment_id, flag_key, day, arm;

INSERT INTO flag_arm_windows
SELECT w.environment_id, w.flag_key, 'hour', w.hour, w.arm, count(*),
       count(DISTINCT w.user_identifier), count(*) FILTER (WHERE w.has_feedback),
       count(*) FILTER (WHERE w.has_feedback AND NOT w.result),
       coalesce(sum(w.latency_ms), 0), count(w.latency_ms)
FROM pending_window_events AS w
SEMI JOIN pending_windows AS t
  ON t.grain = 'hour' AND t.environment_id = w.environment_id AND t.flag_key = w.flag_key
 AND t.window_start = w.hour
GROUP BY w.environment_id, w.flag_key, w.hour, w.arm;

INSERT INTO flag_arm_windows
SELECT w.environment_id, w.flag_key, 'minute', w.minute, w.arm, count(*),
       count(DISTINCT w.user_identifier), count(*) FILTER (WHERE w.has_feedback),
       count(*) FILTER (WHERE w.has_feedback AND NOT w.result),
       coalesce(sum(w.latency_ms), 0), count(w.latency_ms)
FROM pending_window_events AS w
SEMI JOIN pending_windows AS t
  ON t.grain = 'minute' AND t.environment_id = w.environment_id AND t.flag_key = w.flag_key
 AND t.window_start = w.minute
GROUP BY w.environment_id, w.flag_key, w.minute, w.arm;

DELETE FROM flag_arm_windows
WHERE (grain = 'minute' AND window_start < now() - INTERVAL 48 HOUR)
   OR (grain = 'hour' AND window_start < now() - INTERVAL 35 DAY);

DROP TABLE window_dirty;

DROP TABLE pending_windows;

DROP TABLE pending_window_events;
