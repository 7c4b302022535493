-- Version 6: the ledger of local grants (contract section 4). One row per grant a local SDK
-- reported under or gave back: how far its ids were reported (the highest index + 1) and what
-- was given back (NULL: nothing yet). A grant is given back at most once, never more than
-- granted - reported_through, and no id given back is reported afterwards. Rows older than
-- the give-back window (api.controlplane.sql_grants.GIVE_BACK_WINDOW_S) are deleted.
CREATE TABLE local_grants (
    id_prefix TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    granted INTEGER NOT NULL,
    granted_at BIGINT NOT NULL,
    reported_through INTEGER NOT NULL DEFAULT 0,
    returned INTEGER
);
CREATE INDEX local_grants_by_age ON local_grants (granted_at);
