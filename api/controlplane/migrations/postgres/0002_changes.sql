-- Version 2, as sqlite/0002_changes.sql: the audit log (immutable: a trigger refuses UPDATE,
-- DELETE and TRUNCATE), guarded rollouts and their decisions, scheduled flag changes, webhooks
-- and their durable outbox, and the usage thresholds already announced.

CREATE TABLE audit_log (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    organization_id TEXT NOT NULL,
    at              TEXT NOT NULL,
    actor           TEXT NOT NULL,
    action          TEXT NOT NULL,
    target          TEXT NOT NULL,
    before          TEXT,  -- JSON of the target before the change; NULL when it did not exist
    after           TEXT,  -- JSON of the target after the change; NULL when it no longer exists
    restored_from   TEXT   -- for a restore: the id of the record whose change it undid
);

CREATE INDEX audit_log_by_organization ON audit_log (organization_id, seq);

CREATE FUNCTION audit_log_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit records are immutable';
END;
$$;

CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_immutable();

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_immutable();

CREATE TABLE rollouts (
    environment_id  TEXT NOT NULL REFERENCES environments (id),
    flag_key        TEXT COLLATE "C" NOT NULL,
    steps           TEXT NOT NULL,  -- JSON array of percentages, increasing, last 100
    step_minutes    DOUBLE PRECISION NOT NULL,
    guardrails      TEXT NOT NULL,  -- JSON array of guardrail names
    state           TEXT NOT NULL CHECK (state IN ('running', 'completed', 'rolledBack', 'held')),
    step            INTEGER NOT NULL,
    step_started_at DOUBLE PRECISION NOT NULL,  -- unix seconds
    created_at      TEXT NOT NULL,
    PRIMARY KEY (environment_id, flag_key)
);

CREATE TABLE rollout_decisions (
    seq            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    environment_id TEXT NOT NULL,
    flag_key       TEXT COLLATE "C" NOT NULL,
    at             TEXT NOT NULL,
    step           INTEGER NOT NULL,
    percentage     DOUBLE PRECISION NOT NULL,
    action         TEXT NOT NULL,
    reason         TEXT NOT NULL,
    statistics     TEXT  -- JSON: the release-health figures the decision rests on
);

CREATE INDEX rollout_decisions_by_flag ON rollout_decisions (environment_id, flag_key, seq);

CREATE TABLE schedules (
    id             TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL REFERENCES environments (id),
    flag_key       TEXT COLLATE "C" NOT NULL,
    at             DOUBLE PRECISION NOT NULL,  -- unix seconds
    flag           TEXT NOT NULL,  -- JSON {enabled, archived, rules}
    state          TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'cancelled', 'failed')),
    created_at     TEXT NOT NULL,
    applied_at     TEXT,
    error          TEXT
);

CREATE INDEX schedules_due ON schedules (state, at);

CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,  -- JSON array of event types
    secret          TEXT NOT NULL,  -- kept in clear: every delivery is signed with it
    created_at      TEXT NOT NULL,
    deleted_at      TEXT,
    rowid           BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);

-- One row per event and subscribed webhook; body is the exact JSON delivered on every attempt.
CREATE TABLE webhook_outbox (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        TEXT NOT NULL,
    webhook_id      TEXT NOT NULL REFERENCES webhooks (id),
    type            TEXT NOT NULL,
    body            BYTEA NOT NULL,
    created_at      DOUBLE PRECISION NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at DOUBLE PRECISION NOT NULL,
    delivered_at    DOUBLE PRECISION,
    failed_at       DOUBLE PRECISION,
    last_error      TEXT,
    UNIQUE (event_id, webhook_id)
);

CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;

CREATE TABLE usage_thresholds (
    organization_id TEXT NOT NULL,
    month           TEXT NOT NULL,  -- YYYY-MM (UTC)
    percent         INTEGER NOT NULL,
    at              TEXT NOT NULL,
    PRIMARY KEY (organization_id, month, percent)
);
