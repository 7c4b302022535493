-- Version 7: a flag's lifecycle metadata (contract section 14). It never changes evaluation:
-- whether the flag is meant to go away (kind), who answers for it, and when it should have.
ALTER TABLE flags ADD COLUMN kind TEXT NOT NULL DEFAULT 'temporary';  -- temporary | permanent
ALTER TABLE flags ADD COLUMN owner TEXT;  -- free text, at most 128 characters
ALTER TABLE flags ADD COLUMN expires_at TEXT;  -- RFC 3339 UTC (..Z), or NULL
