-- Every followed metric's value per exposed user (contract section 13), and its moments per arm,
-- kept up to date (migrations 0012 and 0013). Input: temp table metric_follows
-- (organization_id, environment_id, flag_key, metric_key, event_name, kind, window_hours,
-- better), the control plane's follows (pipelines/metrics.py); parameters
-- $track_lo < load_batch <= $track_hi, the tracked events loaded since the last run,
-- $pre_days, and $rebuild_all (step 6).
--
-- A row is computed again from all its events only when its user's exposure changes
-- (exposure_dirty, marked by the fold) or its follow is new or its metric changed (against
-- metric_follows_state, the last run's follows). New tracked events move the other rows by
-- what they add: an event counts in the rows whose window or pre-period holds its time, so the
-- sums of a row are its old ones plus the new events' (an event after a window closes never
-- counts in it, so nothing else moves a value). metric_moments follows every row written,
-- changed or removed by the differences of its moments.
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

-- 1. Follows new, changed (their metric's event, kind, window or direction) or gone.
CREATE OR REPLACE TEMP TABLE follow_changes AS
SELECT DISTINCT environment_id, flag_key, metric_key FROM (
    (SELECT environment_id, flag_key, metric_key, event_name, kind, window_hours, better
     FROM metric_follows
     EXCEPT
     SELECT environment_id, flag_key, metric_key, event_name, kind, window_hours, better
     FROM metric_follows_state)
    UNION ALL
    (SELECT environment_id, flag_key, metric_key, event_name, kind, window_hours, better
     FROM metric_follows_state
     EXCEPT
     SELECT environment_id, flag_key, metric_key, event_name, kind, window_hours, better
     FROM metric_follows)
);

-- 2. The rows that go: those of a follow that changed, of an exposure in an epoch that is over
--    (a guarded rollout started again: arm_epochs.sql), and of users whose exposure changed
--    (computed again in step 4, with every event of theirs).
CREATE OR REPLACE TEMP TABLE metric_gone AS
SELECT m.rowid AS row_id, m.metric_key, m.environment_id, m.flag_key, m.rollout_percentage,
       m.arm, m.value AS y, m.denominator AS d, m.pre_value AS x
FROM metric_users AS m SEMI JOIN follow_changes USING (environment_id, flag_key, metric_key)
UNION
SELECT m.rowid, m.metric_key, m.environment_id, m.flag_key, m.rollout_percentage, m.arm,
       m.value, m.denominator, m.pre_value
FROM metric_users AS m JOIN arm_epochs AS e USING (environment_id, flag_key)
WHERE m.exposed_at < e.since
UNION
SELECT m.rowid, m.metric_key, m.environment_id, m.flag_key, m.rollout_percentage, m.arm,
       m.value, m.denominator, m.pre_value
FROM metric_users AS m SEMI JOIN exposure_dirty USING (environment_id, flag_key, user_identifier);

DELETE FROM metric_users USING metric_gone AS g WHERE metric_users.rowid = g.row_id;

-- 3. The rows that stay, moved by the new tracked events in their window or pre-period: each
--    row's sums plus the new events' (a sum's and a mean's total is the row's value, a mean's
--    valued events its denominator).
CREATE OR REPLACE TEMP TABLE metric_moved AS
WITH added AS (
    SELECT m.rowid AS row_id,
           count(*) FILTER (WHERE t.occurred_at >= m.exposed_at) AS events,
           count(t.value) FILTER (WHERE t.occurred_at >= m.exposed_at) AS valued,
           coalesce(sum(t.value) FILTER (WHERE t.occurred_at >= m.exposed_at), 0) AS total,
           count(*) FILTER (WHERE t.occurred_at < m.exposed_at) AS pre_events,
           count(t.value) FILTER (WHERE t.occurred_at < m.exposed_at) AS pre_valued,
           coalesce(sum(t.value) FILTER (WHERE t.occurred_at < m.exposed_at), 0) AS pre_total
    FROM (SELECT environment_id, event_name, user_identifier, occurred_at, value
          FROM track_events WHERE load_batch > $track_lo AND load_batch <= $track_hi) AS t
    JOIN metric_users AS m
        ON m.environment_id = t.environment_id AND m.event_name = t.event_name
       AND m.user_identifier = t.user_identifier
       AND t.occurred_at >= m.pre_starts_at AND t.occurred_at < m.window_ends_at
    GROUP BY m.rowid
)
SELECT a.row_id, m.metric_key, m.environment_id, m.flag_key, m.rollout_percentage, m.arm,
       m.value AS old_y, m.denominator AS old_d, m.pre_value AS old_x,
       m.events + a.events AS events,
       metric_value(m.kind, m.events + a.events, m.value + a.total) AS y,
       metric_denominator(m.kind, m.denominator + a.valued) AS d,
       m.pre_events + a.pre_events AS pre_events,
       metric_value(m.kind, m.pre_events + a.pre_events, m.pre_value + a.pre_total) AS x,
       metric_denominator(m.kind, m.pre_denominator + a.pre_valued) AS pre_d
FROM added AS a JOIN metric_users AS m ON m.rowid = a.row_id;

UPDATE metric_users
SET events = v.events, value = v.y, denominator = v.d, pre_events = v.pre_events,
    pre_value = v.x, pre_denominator = v.pre_d
FROM metric_moved AS v
WHERE metric_users.rowid = v.row_id;

-- 4. The (flag environment, metric, user) computed again: every user of a new or changed
--    follow, and users whose exposure changed; their exposures (every split row of the user in
--    the flag, exposed at the earliest), windows and pre-periods, and the tracked events in them.
CREATE OR REPLACE TEMP TABLE metric_dirty AS
SELECT DISTINCT environment_id, flag_key, metric_key, user_identifier FROM (
    SELECT u.environment_id, u.flag_key, c.metric_key, u.user_identifier
    FROM arm_users AS u
    JOIN follow_changes AS c USING (environment_id, flag_key)
    SEMI JOIN metric_follows AS f USING (environment_id, flag_key, metric_key)
    UNION ALL
    SELECT d.environment_id, d.flag_key, f.metric_key, d.user_identifier
    FROM exposure_dirty AS d
    JOIN metric_follows AS f USING (environment_id, flag_key)
);

CREATE OR REPLACE TEMP TABLE metric_exposures AS
SELECT u.organization_id, u.environment_id, u.flag_key, u.rollout_percentage, u.arm,
       u.user_identifier,
       min(u.first_evaluated_at) OVER (
           PARTITION BY u.environment_id, u.flag_key, u.user_identifier) AS exposed_at
FROM arm_users AS u
SEMI JOIN (SELECT DISTINCT environment_id, flag_key, user_identifier FROM metric_dirty) AS d
    USING (environment_id, flag_key, user_identifier)
WHERE u.first_evaluated_at IS NOT NULL;

CREATE OR REPLACE TEMP TABLE metric_windows AS
SELECT row_number() OVER () AS window_id, e.*, f.metric_key, f.event_name, f.kind, f.better,
       coalesce(e.organization_id, f.organization_id) AS owner,
       e.exposed_at + to_hours(f.window_hours) AS window_ends_at,
       e.exposed_at - to_days($pre_days) AS pre_starts_at
FROM metric_dirty AS d
JOIN metric_follows AS f USING (environment_id, flag_key, metric_key)
JOIN metric_exposures AS e USING (environment_id, flag_key, user_identifier);

-- Each window's events, grouped by the window's number alone (grouping by its dozen columns
-- took twice as long).
CREATE OR REPLACE TEMP TABLE metric_fresh AS
WITH sums AS (
    SELECT w.window_id,
           count(t.occurred_at) FILTER (WHERE t.occurred_at >= w.exposed_at) AS events,
           count(t.value) FILTER (WHERE t.occurred_at >= w.exposed_at) AS valued,
           coalesce(sum(t.value) FILTER (WHERE t.occurred_at >= w.exposed_at), 0) AS total,
           count(t.occurred_at) FILTER (WHERE t.occurred_at < w.exposed_at) AS pre_events,
           count(t.value) FILTER (WHERE t.occurred_at < w.exposed_at) AS pre_valued,
           coalesce(sum(t.value) FILTER (WHERE t.occurred_at < w.exposed_at), 0) AS pre_total
    FROM metric_windows AS w
    JOIN track_events AS t
        ON t.environment_id = w.environment_id AND t.event_name = w.event_name
       AND t.user_identifier = w.user_identifier
       AND t.occurred_at >= w.pre_starts_at AND t.occurred_at < w.window_ends_at
    GROUP BY w.window_id
)
SELECT w.metric_key, w.event_name, w.kind, w.better, w.owner AS organization_id,
       w.environment_id, w.flag_key, w.rollout_percentage, w.arm, w.user_identifier,
       w.pre_starts_at, w.exposed_at, w.window_ends_at, coalesce(s.events, 0) AS events,
       metric_value(w.kind, coalesce(s.events, 0), coalesce(s.total, 0)) AS value,
       metric_denominator(w.kind, coalesce(s.valued, 0)) AS denominator,
       coalesce(s.pre_events, 0) AS pre_events,
       metric_value(w.kind, coalesce(s.pre_events, 0), coalesce(s.pre_total, 0)) AS pre_value,
       metric_denominator(w.kind, coalesce(s.pre_valued, 0)) AS pre_denominator
FROM metric_windows AS w
LEFT JOIN sums AS s USING (window_id);

INSERT INTO metric_users BY NAME SELECT * FROM metric_fresh;

-- 5. The moments: minus the rows gone and the moved rows' old values, plus their new values and
--    the rows computed again. A group left without a user goes.
INSERT INTO metric_moments
SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, sum(sign)::BIGINT,
       sum(sign * y), sum(sign * d), sum(sign * x), sum(sign * y * y), sum(sign * d * d),
       sum(sign * x * x), sum(sign * y * d), sum(sign * y * x), sum(sign * d * x)
FROM (
    SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, -1 AS sign, y, d, x
    FROM metric_gone
    UNION ALL
    SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, -1, old_y, old_d, old_x
    FROM metric_moved
    UNION ALL
    SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, 1, y, d, x
    FROM metric_moved
    UNION ALL
    SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, 1, value, denominator,
           pre_value
    FROM metric_fresh
)
GROUP BY ALL
ON CONFLICT DO UPDATE SET
    n = metric_moments.n + excluded.n, y = metric_moments.y + excluded.y,
    d = metric_moments.d + excluded.d, x = metric_moments.x + excluded.x,
    yy = metric_moments.yy + excluded.yy, dd = metric_moments.dd + excluded.dd,
    xx = metric_moments.xx + excluded.xx, yd = metric_moments.yd + excluded.yd,
    yx = metric_moments.yx + excluded.yx, dx = metric_moments.dx + excluded.dx;

DELETE FROM metric_moments WHERE n = 0;

-- 6. Groups summed again from their rows: differences of values far apart in size lose the
--    small ones (a user's 1e17 taken out of a sum of squares leaves nothing of the 4s beside
--    it), and an infinite square leaves NaN once taken out. So a metric whose follow changed
--    (all its rows went and came again) has its groups summed afresh, as has any group whose
--    moments are no longer finite, and every group in a run that asks it ($rebuild_all: one
--    run in sixteen on average, chosen by its id: pipelines/assets/metric_users.py), so a drift
--    lasts some sixteen runs on average.
CREATE OR REPLACE TEMP TABLE moments_rebuilt AS
SELECT DISTINCT metric_key, environment_id, flag_key FROM (
    SELECT metric_key, environment_id, flag_key FROM follow_changes
    UNION ALL
    SELECT metric_key, environment_id, flag_key FROM metric_moments
    WHERE $rebuild_all OR NOT isfinite(y + d + x + yy + dd + xx + yd + yx + dx)
);

DELETE FROM metric_moments
USING moments_rebuilt AS r
WHERE metric_moments.metric_key = r.metric_key AND metric_moments.environment_id = r.environment_id
  AND metric_moments.flag_key = r.flag_key;

INSERT INTO metric_moments
SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, count(*), sum(value),
       sum(denominator), sum(pre_value), sum(value * value), sum(denominator * denominator),
       sum(pre_value * pre_value), sum(value * denominator), sum(value * pre_value),
       sum(denominator * pre_value)
FROM metric_users SEMI JOIN moments_rebuilt USING (metric_key, environment_id, flag_key)
GROUP BY ALL;

-- 7. What the next run compares against.
DELETE FROM exposure_dirty;
DELETE FROM metric_follows_state;
INSERT INTO metric_follows_state
SELECT organization_id, environment_id, flag_key, metric_key, event_name, kind, window_hours,
       better
FROM metric_follows;
