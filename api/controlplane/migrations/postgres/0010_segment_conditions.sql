-- Version 10, as sqlite/0010_segment_conditions.sql: segments defined by conditions
-- (contract 12). Beside the identifiers a segment lists (members), the identifiers it excludes
-- and its conditions on a user's attributes; segments made before this version list members
-- alone. segment_history keeps both beside the members, so a restore puts the whole segment
-- back; its rows from before this version hold NULL in both (the segment had neither then).

ALTER TABLE segments ADD COLUMN excluded_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE segments ADD COLUMN excluded BYTEA NOT NULL DEFAULT '\x5b5d';  -- JSON array, as members
ALTER TABLE segments ADD COLUMN conditions TEXT NOT NULL DEFAULT '[]';  -- JSON array of conditions

ALTER TABLE segment_history ADD COLUMN excluded BYTEA;  -- as segments.excluded before the change
ALTER TABLE segment_history ADD COLUMN conditions TEXT;  -- as segments.conditions before it
