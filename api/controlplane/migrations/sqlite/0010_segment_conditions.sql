-- Version 10: segments defined by conditions (contract 12). A segment keeps, beside the
-- identifiers it lists (members), the identifiers it excludes and its conditions on a user's
-- attributes: a user listed in members is in; otherwise one listed in excluded is out;
-- otherwise the user is in when conditions is not empty and every one holds. Segments made
-- before this version list members alone: no exclusion, no condition.
-- segment_history keeps both beside the members, so a restore puts the whole segment back;
-- its rows from before this version hold NULL in both (the segment had neither then).

ALTER TABLE segments ADD COLUMN excluded_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE segments ADD COLUMN excluded BLOB NOT NULL DEFAULT X'5B5D';  -- JSON array, as members
ALTER TABLE segments ADD COLUMN conditions TEXT NOT NULL DEFAULT '[]';  -- JSON array of conditions

ALTER TABLE segment_history ADD COLUMN excluded BLOB;  -- as segments.excluded before the change
ALTER TABLE segment_history ADD COLUMN conditions TEXT;  -- as segments.conditions before it
