-- Version 3, as sqlite/0003_segment_history.sql: the members a segment had before each change
-- to it, keyed by the change's audit record, so that a segment.put or segment.deleted can be
-- restored (the record keeps only the size). Older changes have no row and cannot be restored.

CREATE TABLE segment_history (
    audit_id        TEXT PRIMARY KEY,  -- audit_log.id of the change
    organization_id TEXT NOT NULL,
    key             TEXT COLLATE "C" NOT NULL,
    members         BYTEA  -- as segments.members before the change; NULL when it did not exist
);
