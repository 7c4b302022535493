-- Copy the published tables into the attached snapshot database `snapshot`. Every table here is
-- sized by flag environments, days, time windows or environments, never by the number of events
-- or users (those of the metrics' users go to outcomes.duckdb: publish_outcomes.sql).
-- Parameter: $run_id.
CREATE TABLE snapshot.flag_environment_metrics AS SELECT * FROM flag_environment_metrics;
CREATE TABLE snapshot.flag_environment_daily AS SELECT * FROM flag_environment_daily;
CREATE TABLE snapshot.flag_health AS SELECT * FROM flag_health;
CREATE TABLE snapshot.health_comparisons AS
SELECT * FROM health_comparisons ORDER BY environment_id, flag_key, comparison;
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
