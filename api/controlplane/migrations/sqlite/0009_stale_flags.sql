-- Version 9: the flags announced stale (contract section 14: the webhook event `flag.stale`,
-- once per flag and transition). The pipeline gives every flag stale now; a flag not here yet
-- is announced and added, a flag here that is no longer stale is removed, so it is announced
-- again if it turns stale again.
CREATE TABLE stale_flags (
    environment_id TEXT NOT NULL,
    flag_key       TEXT NOT NULL,
    since          TEXT NOT NULL,  -- when it was announced (ISO 8601 UTC)
    PRIMARY KEY (environment_id, flag_key)
);
