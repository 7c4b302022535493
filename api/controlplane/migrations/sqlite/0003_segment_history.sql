-- Version 3: the members a segment had before each change to it, so that a segment.put or
-- segment.deleted can be restored. The audit record keeps only the segment's size (a segment
-- holds up to 1,000,000 identifiers); this table keeps the members, keyed by the record.
-- Changes recorded before this version have no row here and cannot be restored.

CREATE TABLE segment_history (
    audit_id        TEXT PRIMARY KEY,  -- audit_log.id of the change
    organization_id TEXT NOT NULL,
    key             TEXT NOT NULL,
    members         BLOB  -- as segments.members before the change; NULL when it did not exist
);
