-- Version 5: a guarded rollout's release health counts the users evaluated since it started
-- (warehouse/sql/arm_epochs.sql), so that a rollout started again, after a rollback and a fix,
-- is not judged on the users of the run before it at the same percentage.
CREATE TABLE arm_epochs (
    environment_id  VARCHAR     NOT NULL,
    flag_key        VARCHAR     NOT NULL,
    since           TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (environment_id, flag_key)
);
