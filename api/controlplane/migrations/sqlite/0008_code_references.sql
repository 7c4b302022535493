-- Version 8: where source code names flags (contract section 14), as `flagsight code-refs
-- --upload` last found them. One upload per environment and repository replaces that
-- repository's references whole; a flag's lifecycle shows their count and the latest scan.
CREATE TABLE code_reference_scans (
    environment_id TEXT NOT NULL REFERENCES environments (id),
    repository     TEXT NOT NULL,
    revision       TEXT,
    scanned_at     TEXT NOT NULL,
    PRIMARY KEY (environment_id, repository)
);
CREATE TABLE code_references (
    environment_id TEXT NOT NULL,
    repository     TEXT NOT NULL,
    flag_key       TEXT NOT NULL,
    path           TEXT NOT NULL,
    line           INTEGER NOT NULL,
    PRIMARY KEY (environment_id, repository, flag_key, path, line)
);
CREATE INDEX code_references_by_flag ON code_references (environment_id, flag_key);
