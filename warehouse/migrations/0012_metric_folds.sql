-- Version 12: metric_users kept up to date instead of recomputed whole (pipelines/metrics.py).
-- A run recomputes only the rows of users whose exposure changed (marked by the fold, as
-- health_dirty marks flag environments), of users with new tracked events of a followed
-- metric's event (the `metrics_folded` watermark in fold_state), and of follows that are new
-- or whose metric changed (against the follows of the last run, kept here).

-- No primary key: a key's index cost the fold more than the duplicates it saves (metric_users
-- reads the marks with DISTINCT).
CREATE TABLE exposure_dirty (
    environment_id  VARCHAR NOT NULL,
    flag_key        VARCHAR NOT NULL,
    user_identifier VARCHAR NOT NULL
);

CREATE TABLE metric_follows_state (
    organization_id VARCHAR,
    environment_id  VARCHAR NOT NULL,
    flag_key        VARCHAR NOT NULL,
    metric_key      VARCHAR NOT NULL,
    event_name      VARCHAR NOT NULL,
    kind            VARCHAR NOT NULL,
    window_hours    INTEGER NOT NULL,
    better          VARCHAR NOT NULL
);
