-- Version 11, as sqlite/0011_metrics.sql: metrics over tracked events (contract 13), an
-- organization's by key, and the metrics each flag environment follows (metric_follows).
-- Deleting a metric deletes its follows, deleting a flag drops the flag's (both done by the
-- store, in the same transaction); a metric a running or held guarded rollout guards on is
-- not deleted.
CREATE TABLE metrics (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    key             TEXT COLLATE "C" NOT NULL,
    name            TEXT NOT NULL,
    event           TEXT COLLATE "C" NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('conversion', 'count', 'sum', 'mean')),
    window_hours    INTEGER NOT NULL CHECK (window_hours BETWEEN 1 AND 720),
    better          TEXT NOT NULL CHECK (better IN ('higher', 'lower')),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (organization_id, key)
);
CREATE TABLE metric_follows (
    environment_id TEXT NOT NULL REFERENCES environments (id),
    flag_key       TEXT COLLATE "C" NOT NULL,
    metric_key     TEXT COLLATE "C" NOT NULL,
    position       INTEGER NOT NULL,  -- the order the PUT gave
    PRIMARY KEY (environment_id, flag_key, metric_key)
);
CREATE INDEX metric_follows_by_metric ON metric_follows (metric_key);
