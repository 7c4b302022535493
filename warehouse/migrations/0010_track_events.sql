-- Version 10: tracked events (contract section 13; docs/events.md, `track`), loaded from the
-- lake's event_type=track files by the `raw_track_events` asset, every row as received (a
-- tracked event has no id: the warehouse keeps what the lake holds).
--
-- Metrics read them by (environment_id, event_name, user_identifier, occurred_at): each load
-- inserts its rows sorted so, which keeps a row group's min-max ranges (DuckDB's zonemaps)
-- narrow on those columns, so a scan filtered on them skips most row groups. No ART index:
-- DuckDB uses one only for point lookups of a constant, never for the metrics' joins, and it
-- would be rebuilt in memory and slow every load.
CREATE TABLE track_events (
    organization_id VARCHAR     NOT NULL,
    environment_id  VARCHAR     NOT NULL,
    event_name      VARCHAR     NOT NULL,
    user_identifier VARCHAR     NOT NULL,
    value           DOUBLE,
    occurred_at     TIMESTAMPTZ NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL,
    source          VARCHAR     NOT NULL,
    api_key_id      VARCHAR     NOT NULL,
    schema_version  SMALLINT    NOT NULL,
    load_batch      BIGINT      NOT NULL
);
