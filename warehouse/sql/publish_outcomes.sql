-- The analysts' per-user tables of contract section 13, copied into the attached database
-- `snapshot`, published as outcomes.duckdb beside warehouse.duckdb (pipelines/publishing.py).
-- They are sized by exposed users times followed metrics, so they are not in the snapshot every
-- run publishes (and every API host downloads): they are published at most every
-- OUTCOMES_REFRESH_S (pipelines/assets/published_warehouse.py). Parameter: $run_id.

-- Unsorted: sorting millions of rows was most of the copy's time (bench/history.md).
CREATE TABLE snapshot.metric_users AS SELECT * FROM metric_users;

-- The tracked events of those users and metrics' events (a row's window and pre-period say
-- which count), not every event ever tracked.
CREATE TABLE snapshot.track_events AS
SELECT t.organization_id, t.environment_id, t.event_name, t.user_identifier, t.value,
       t.occurred_at, t.received_at, t.source
FROM track_events AS t
SEMI JOIN (SELECT DISTINCT environment_id, event_name, user_identifier FROM metric_users) AS m
    USING (environment_id, event_name, user_identifier);

CREATE TABLE snapshot.outcomes_info AS
SELECT current_timestamp AS published_at, $run_id::VARCHAR AS run_id;
