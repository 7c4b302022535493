-- The control plane's first schema. Keys are TEXT with the default BINARY collation, so every
-- key (flag, segment, environment) is case-sensitive. Each row that evaluation reads carries
-- the config version that last changed it; config_version.version only ever increases.

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE config_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);

INSERT INTO config_version (id, version) VALUES (1, 0);

CREATE TABLE organizations (
    id                       TEXT PRIMARY KEY,
    name                     TEXT NOT NULL,
    plan                     TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'team', 'enterprise')),
    monthly_evaluation_limit INTEGER NOT NULL CHECK (monthly_evaluation_limit > 0),
    created_at               TEXT NOT NULL,
    version                  INTEGER NOT NULL
);

CREATE TABLE environments (
    id               TEXT PRIMARY KEY,
    organization_id  TEXT NOT NULL REFERENCES organizations (id),
    key              TEXT NOT NULL,
    name             TEXT NOT NULL,
    insights_enabled INTEGER NOT NULL,
    created_at       TEXT NOT NULL,
    version          INTEGER NOT NULL,
    UNIQUE (organization_id, key)
);

CREATE TABLE api_keys (
    id             TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL REFERENCES environments (id),
    name           TEXT NOT NULL,
    key_sha256     TEXT NOT NULL UNIQUE,
    created_at     TEXT NOT NULL,
    revoked_at     TEXT
);

CREATE INDEX api_keys_by_environment ON api_keys (environment_id);

CREATE TABLE segments (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    key             TEXT NOT NULL,
    size            INTEGER NOT NULL,
    members         BLOB NOT NULL,  -- JSON array of the distinct identifiers, in given order
    updated_at      TEXT NOT NULL,
    version         INTEGER NOT NULL,
    PRIMARY KEY (organization_id, key)
);

CREATE TABLE flags (
    environment_id TEXT NOT NULL REFERENCES environments (id),
    key            TEXT NOT NULL,
    enabled        INTEGER NOT NULL,
    archived       INTEGER NOT NULL,
    rules          TEXT NOT NULL,  -- JSON array of rules in the contract's shape
    updated_at     TEXT NOT NULL,
    version        INTEGER NOT NULL,
    PRIMARY KEY (environment_id, key)
);
