-- Version 13: each followed metric's per-arm moments kept beside metric_users
-- (pipelines/metrics.py). A run adds the moments of the rows it writes and takes away those of
-- the rows it removes or changes, instead of aggregating every row again: the comparisons and
-- a metric guardrail's strata read one row per (metric, flag environment, split, arm).
--   n   users; y, d, x  the sums of value, denominator and pre_value; yy, dd, xx, yd, yx, dx
--   the sums of their squares and products (warehouse/statistics/means.py: MeanMoments)
CREATE TABLE metric_moments (
    metric_key          VARCHAR NOT NULL,
    environment_id      VARCHAR NOT NULL,
    flag_key            VARCHAR NOT NULL,
    rollout_percentage  DOUBLE  NOT NULL,
    arm                 VARCHAR NOT NULL,
    n   BIGINT NOT NULL,
    y   DOUBLE NOT NULL,
    d   DOUBLE NOT NULL,
    x   DOUBLE NOT NULL,
    yy  DOUBLE NOT NULL,
    dd  DOUBLE NOT NULL,
    xx  DOUBLE NOT NULL,
    yd  DOUBLE NOT NULL,
    yx  DOUBLE NOT NULL,
    dx  DOUBLE NOT NULL,
    PRIMARY KEY (metric_key, environment_id, flag_key, rollout_percentage, arm)
);

INSERT INTO metric_moments
SELECT metric_key, environment_id, flag_key, rollout_percentage, arm, count(*),
       sum(value), sum(denominator), sum(pre_value), sum(value * value),
       sum(denominator * denominator), sum(pre_value * pre_value), sum(value * denominator),
       sum(value * pre_value), sum(denominator * pre_value)
FROM metric_users
GROUP BY ALL;
