-- Version 11: metrics over tracked events (contract 13). A metric is an organization's, by
-- key: what it makes of each exposed user's events named `event` from its first exposure to
-- `window_hours` after it (`kind`), and which direction is better. A flag environment follows
-- metrics (metric_follows): release health compares them between its arms. Deleting a metric
-- deletes its follows, deleting a flag drops the flag's (both done by the store, in the same
-- transaction); a metric a running or held guarded rollout guards on is not deleted.
CREATE TABLE metrics (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    key             TEXT NOT NULL,
    name            TEXT NOT NULL,
    event           TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('conversion', 'count', 'sum', 'mean')),
    window_hours    INTEGER NOT NULL CHECK (window_hours BETWEEN 1 AND 720),
    better          TEXT NOT NULL CHECK (better IN ('higher', 'lower')),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (organization_id, key)
);
CREATE TABLE metric_follows (
    environment_id TEXT NOT NULL REFERENCES environments (id),
    flag_key       TEXT NOT NULL,
    metric_key     TEXT NOT NULL,
    position       INTEGER NOT NULL,  -- the order the PUT gave
    PRIMARY KEY (environment_id, flag_key, metric_key)
);
CREATE INDEX metric_follows_by_metric ON metric_follows (metric_key);
