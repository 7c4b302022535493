-- Copy the published tables into the attached snapshot database `snapshot`. Every table here is
-- sized by flag environments, days, time windows or environments, never by the number of events,
-- but the two that analysts reproduce a metric's comparison from: metric_users (exposed users)
-- and track_events (the tracked events that count in them).
-- Parameter: $run_id.
CREATE TABLE snapshot.flag_environment_metrics AS SELECT * FROM flag_environment_metrics;
CREATE TABLE snapshot.flag_environment_daily AS SELECT * FROM flag_environment_daily;
CREATE TABLE snapshot.flag_health AS SELECT * FROM flag_health;
CREATE TABLE snapshot.health_comparisons AS
SELECT * FROM health_comparisons ORDER BY environment_id, flag_key, comparison;
-- For analysts (contract section 13): each followed metric per exposed user, and the tracked
-- events that count in one of their windows or pre-periods (sized by metric_users, not by every
-- event ever tracked).
CREATE TABLE snapshot.metric_users AS
SELECT * FROM metric_users ORDER BY metric_key, environment_id, flag_key, arm, user_identifier;
CREATE TABLE snapshot.track_events AS
SELECT t.organization_id, t.environment_id, t.event_name, t.user_identifier, t.value,
       t.occurred_at, t.received_at, t.source
FROM track_events AS t
WHERE EXISTS (
    SELECT 1 FROM metric_users AS m
    WHERE m.environment_id = t.environment_id AND m.event_name = t.event_name
      AND m.user_identifier = t.user_identifier
      AND t.occurred_at >= m.pre_starts_at AND t.occurred_at < m.window_ends_at)
ORDER BY t.environment_id, t.event_name, t.occurred_at;
CREATE TABLE snapshot.flag_arm_windows AS SELECT * FROM flag_arm_windows;
CREATE TABLE snapshot.flag_lifecycle AS
SELECT * FROM flag_lifecycle ORDER BY environment_id, flag_key;
CREATE TABLE snapshot.environments AS
SELECT environment_id, environment_key, refreshed_at FROM environment_keys ORDER BY environment_id;
CREATE TABLE snapshot.pending_feedback AS
SELECT environment_id, count(*) AS pending_count,
       min(received_at) AS oldest_received_at, max(received_at) AS newest_received_at
FROM feedback_latest WHERE flag_key IS NULL
GROUP BY environment_id ORDER BY environment_id;
CREATE TABLE snapshot.load_summary AS
SELECT event_type, event_date, count(*) AS file_count, sum(row_count)::BIGINT AS row_count,
       max(loaded_at) AS last_loaded_at
FROM loaded_files GROUP BY event_type, event_date ORDER BY event_type, event_date;
CREATE TABLE snapshot.warehouse_info AS
SELECT current_timestamp AS published_at,
       $run_id::VARCHAR AS run_id,
       (SELECT count(*) FROM feedback_latest WHERE flag_key IS NULL) AS pending_feedback_count,
       (SELECT count(*) FROM feedback_latest) AS deduplicated_feedback_count,
       (SELECT max(load_batch) FROM load_batches) AS last_load_batch;
