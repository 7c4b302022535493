-- Every followed metric's value per exposed user (contract section 13), kept up to date: only
-- the rows a run can have changed are computed again (migration 0012). Input: temp table
-- metric_follows (organization_id, environment_id, flag_key, metric_key, event_name, kind,
-- window_hours, better), the control plane's follows (pipelines/metrics.py); parameters
-- $track_lo < load_batch <= $track_hi, the tracked events loaded since the last run, and
-- $pre_days.
--
-- A row changes only when its user's exposure changes (exposure_dirty, marked by the fold), when
-- its user has a new tracked event of the metric's event, or when its follow is new or its
-- metric changed (against metric_follows_state, the last run's follows). Nothing else moves a
-- value: an event after a window closes never counts in it.
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

-- 1. Follows new, changed (their metric's event, kind, window or direction) or gone: their rows
--    go, and a current one's are computed again for every exposed user.
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

DELETE FROM metric_users AS m USING follow_changes AS c
WHERE m.environment_id = c.environment_id AND m.flag_key = c.flag_key
  AND m.metric_key = c.metric_key;

-- 2. Exposures of an epoch that is over (a guarded rollout started again: arm_epochs.sql).
DELETE FROM metric_users AS m USING arm_epochs AS e
WHERE m.environment_id = e.environment_id AND m.flag_key = e.flag_key AND m.exposed_at < e.since;

-- 3. The (flag environment, metric, user) to compute: every user of a new or changed follow,
--    users whose exposure changed, users with new tracked events of a followed metric's event.
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
    UNION ALL
    SELECT f.environment_id, f.flag_key, f.metric_key, t.user_identifier
    FROM (SELECT DISTINCT environment_id, event_name, user_identifier FROM track_events
          WHERE load_batch > $track_lo AND load_batch <= $track_hi) AS t
    JOIN metric_follows AS f USING (environment_id, event_name)
    SEMI JOIN arm_users AS u  -- only where the user is exposed
        ON u.environment_id = f.environment_id AND u.flag_key = f.flag_key
       AND u.user_identifier = t.user_identifier
);

DELETE FROM metric_users AS m USING metric_dirty AS d
WHERE m.environment_id = d.environment_id AND m.flag_key = d.flag_key
  AND m.metric_key = d.metric_key AND m.user_identifier = d.user_identifier;

-- 4. Their exposures (every split row of the user in the flag, exposed at the earliest), windows
--    and pre-periods, and the tracked events in them.
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
INSERT INTO metric_users
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
SELECT w.metric_key, w.event_name, w.kind, w.better, w.owner, w.environment_id, w.flag_key,
       w.rollout_percentage, w.arm, w.user_identifier, w.pre_starts_at, w.exposed_at,
       w.window_ends_at, coalesce(s.events, 0),
       metric_value(w.kind, coalesce(s.events, 0), coalesce(s.total, 0)),
       metric_denominator(w.kind, coalesce(s.valued, 0)),
       coalesce(s.pre_events, 0),
       metric_value(w.kind, coalesce(s.pre_events, 0), coalesce(s.pre_total, 0)),
       metric_denominator(w.kind, coalesce(s.pre_valued, 0))
FROM metric_windows AS w
LEFT JOIN sums AS s USING (window_id);

-- 5. What the next run compares against.
DELETE FROM exposure_dirty;
DELETE FROM metric_follows_state;
INSERT INTO metric_follows_state
SELECT organization_id, environment_id, flag_key, metric_key, event_name, kind, window_hours,
       better
FROM metric_follows;
