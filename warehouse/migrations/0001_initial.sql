-- Version 1 of the pipeline's working database (private to the pipeline; readers use the published
-- file). Written with IF NOT EXISTS, so that it also adopts a database made before migrations.

CREATE SEQUENCE IF NOT EXISTS load_batch_seq START 1;

-- Ledger: every Parquet file loaded, exactly once. `path` is relative to the events root.
CREATE TABLE IF NOT EXISTS loaded_files (
    event_type  VARCHAR     NOT NULL,
    path        VARCHAR     NOT NULL,
    event_date  DATE,
    size_bytes  BIGINT      NOT NULL,
    row_count   BIGINT      NOT NULL,
    load_batch  BIGINT      NOT NULL,
    loaded_at   TIMESTAMPTZ NOT NULL
);

-- One row per load: what was read and what was kept.
CREATE TABLE IF NOT EXISTS load_batches (
    load_batch     BIGINT      NOT NULL,
    event_type     VARCHAR     NOT NULL,
    file_count     BIGINT      NOT NULL,
    rows_read      BIGINT      NOT NULL,
    rows_loaded    BIGINT      NOT NULL,
    duplicate_rows BIGINT      NOT NULL,
    loaded_at      TIMESTAMPTZ NOT NULL,
    run_id         VARCHAR
);

-- Raw evaluation events, each evaluation_id once (a re-sealed copy of an event is dropped).
CREATE TABLE IF NOT EXISTS evaluation_events (
    evaluation_id     VARCHAR     NOT NULL,
    evaluated_at      TIMESTAMPTZ NOT NULL,
    organization_id   VARCHAR     NOT NULL,
    environment_id    VARCHAR     NOT NULL,
    flag_key          VARCHAR     NOT NULL,
    user_identifier   VARCHAR     NOT NULL,
    value             BOOLEAN     NOT NULL,
    matched_rule_type VARCHAR,
    error_type        VARCHAR,
    sdk               VARCHAR,
    api_key_id        VARCHAR     NOT NULL,
    source            VARCHAR     NOT NULL,
    schema_version    SMALLINT    NOT NULL,
    load_batch        BIGINT      NOT NULL
);

-- Raw feedback events, every row as received (deduplication is the metrics' job).
CREATE TABLE IF NOT EXISTS feedback_events (
    evaluation_id   VARCHAR     NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL,
    organization_id VARCHAR     NOT NULL,
    environment_id  VARCHAR     NOT NULL,
    result          BOOLEAN     NOT NULL,
    latency_ms      DOUBLE,
    error_type      VARCHAR,
    api_key_id      VARCHAR     NOT NULL,
    schema_version  SMALLINT    NOT NULL,
    load_batch      BIGINT      NOT NULL
);

-- The winning feedback per evaluation_id. Attribution columns are NULL while pending.
CREATE TABLE IF NOT EXISTS feedback_latest (
    evaluation_id       VARCHAR     NOT NULL,
    organization_id     VARCHAR     NOT NULL,
    environment_id      VARCHAR     NOT NULL,
    received_at         TIMESTAMPTZ NOT NULL,
    result              BOOLEAN     NOT NULL,
    latency_ms          DOUBLE,
    flag_environment_id VARCHAR,
    flag_key            VARCHAR,
    evaluation_date     DATE,
    served_value        BOOLEAN
);

-- Additive counters every metric derives from, maintained incrementally.
CREATE TABLE IF NOT EXISTS flag_value_daily_stats (
    environment_id  VARCHAR NOT NULL,
    flag_key        VARCHAR NOT NULL,
    evaluation_date DATE    NOT NULL,
    served_value    BOOLEAN NOT NULL,
    organization_id VARCHAR,
    evaluations     BIGINT  NOT NULL,
    feedback_count  BIGINT  NOT NULL,
    success_count   BIGINT  NOT NULL,
    failure_count   BIGINT  NOT NULL,
    latency_sum     DOUBLE  NOT NULL,
    latency_count   BIGINT  NOT NULL,
    PRIMARY KEY (environment_id, flag_key, evaluation_date, served_value)
);

-- Watermarks: the highest load batch of each event type folded into the counters.
CREATE TABLE IF NOT EXISTS fold_state (
    name  VARCHAR PRIMARY KEY,
    value BIGINT NOT NULL
);

-- Pending feedback after each attribution run, for the "not growing without bound" check.
CREATE TABLE IF NOT EXISTS pending_feedback_history (
    recorded_at            TIMESTAMPTZ NOT NULL,
    run_id                 VARCHAR,
    pending_count          BIGINT      NOT NULL,
    deduplicated_feedback  BIGINT      NOT NULL
);

-- Environment keys from the control plane (dimension, refreshed each run; never deleted).
CREATE TABLE IF NOT EXISTS environment_keys (
    environment_id  VARCHAR PRIMARY KEY,
    environment_key VARCHAR,
    refreshed_at    TIMESTAMPTZ NOT NULL
);
