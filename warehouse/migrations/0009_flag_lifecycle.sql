-- Version 9: the flag lifecycle (contract section 14; docs/lifecycle.md).

-- Per flag environment, UTC day of evaluation and `sdk` ('' for none): the evaluations and the
-- latest of them, folded from each new load batch (watermark `lifecycle_folded` in fold_state).
-- The lifecycle reads applications and the last evaluation here, never the events again.
CREATE TABLE flag_sdk_daily (
    environment_id    VARCHAR     NOT NULL,
    flag_key          VARCHAR     NOT NULL,
    evaluation_date   DATE        NOT NULL,
    sdk               VARCHAR     NOT NULL,
    evaluations       BIGINT      NOT NULL,
    last_evaluated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (environment_id, flag_key, evaluation_date, sdk)
);

-- One row per flag of the control plane and its environment: its stage, reasons and evidence,
-- replaced whole by each run of the `flag_lifecycle` asset (published as is).
CREATE TABLE flag_lifecycle (
    environment_id          VARCHAR     NOT NULL,
    flag_key                VARCHAR     NOT NULL,
    stage                   VARCHAR     NOT NULL,
    reasons                 VARCHAR[]   NOT NULL,
    last_evaluated_at       TIMESTAMPTZ,
    evaluations_30d         BIGINT      NOT NULL,
    served_true_percent_30d DOUBLE,
    launched_at             TIMESTAMPTZ,
    launched_by             VARCHAR,
    applications            VARCHAR[]   NOT NULL,
    archived_but_evaluated  BOOLEAN     NOT NULL,
    computed_at             TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (environment_id, flag_key)
);
