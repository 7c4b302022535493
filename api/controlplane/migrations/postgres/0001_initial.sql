-- The control plane's first schema, in PostgreSQL: the same tables, columns and meaning as
-- sqlite/0001_initial.sql. Keys are COLLATE "C": compared and ordered byte by byte, so every
-- key is case-sensitive and lists come in the same order as from SQLite. Tables whose lists
-- keep creation order have a generated "rowid" last (SQLite's implicit column of that name).

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE config_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);

INSERT INTO config_version (id, version) VALUES (1, 0);

CREATE TABLE organizations (
    id                       TEXT PRIMARY KEY,
    name                     TEXT NOT NULL,
    plan                     TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'team', 'enterprise')),
    monthly_evaluation_limit BIGINT NOT NULL CHECK (monthly_evaluation_limit > 0),
    created_at               TEXT NOT NULL,
    version                  BIGINT NOT NULL,
    rowid                    BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);

CREATE TABLE environments (
    id               TEXT PRIMARY KEY,
    organization_id  TEXT NOT NULL REFERENCES organizations (id),
    key              TEXT COLLATE "C" NOT NULL,
    name             TEXT NOT NULL,
    insights_enabled BOOLEAN NOT NULL,
    created_at       TEXT NOT NULL,
    version          BIGINT NOT NULL,
    rowid            BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    UNIQUE (organization_id, key)
);

CREATE TABLE api_keys (
    id             TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL REFERENCES environments (id),
    name           TEXT NOT NULL,
    key_sha256     TEXT NOT NULL UNIQUE,
    created_at     TEXT NOT NULL,
    revoked_at     TEXT,
    rowid          BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
);

CREATE INDEX api_keys_by_environment ON api_keys (environment_id);

CREATE TABLE segments (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    key             TEXT COLLATE "C" NOT NULL,
    size            INTEGER NOT NULL,
    members         BYTEA NOT NULL,  -- JSON array of the distinct identifiers, in given order
    updated_at      TEXT NOT NULL,
    version         BIGINT NOT NULL,
    PRIMARY KEY (organization_id, key)
);

CREATE TABLE flags (
    environment_id TEXT NOT NULL REFERENCES environments (id),
    key            TEXT COLLATE "C" NOT NULL,
    enabled        BOOLEAN NOT NULL,
    archived       BOOLEAN NOT NULL,
    rules          TEXT NOT NULL,  -- JSON array of rules in the contract's shape
    updated_at     TEXT NOT NULL,
    version        BIGINT NOT NULL,
    PRIMARY KEY (environment_id, key)
);
