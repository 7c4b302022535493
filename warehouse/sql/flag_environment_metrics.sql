-- Contract section 6: one row per (environment, flag key) seen in evaluation events.
-- Rates are percentages 0..100, unrounded, NULL where the denominator is zero.
CREATE OR REPLACE TABLE flag_environment_metrics AS
WITH totals AS (
    SELECT environment_id, flag_key,
           any_value(organization_id) AS organization_id,
           sum(evaluations)::BIGINT AS evaluations,
           sum(feedback_count)::BIGINT AS feedback_count,
           sum(success_count)::BIGINT AS success_count,
           sum(failure_count)::BIGINT AS failure_count,
           sum(latency_sum) AS latency_sum,
           sum(latency_count)::BIGINT AS latency_count
    FROM flag_value_daily_stats
    GROUP BY environment_id, flag_key
)
SELECT t.organization_id,
       t.environment_id,
       k.environment_key,
       t.flag_key,
       t.evaluations,
       t.feedback_count,
       CASE WHEN t.evaluations = 0 THEN NULL
            ELSE t.feedback_count::DOUBLE / t.evaluations * 100 END AS feedback_coverage,
       t.success_count,
       t.failure_count,
       CASE WHEN t.feedback_count = 0 THEN NULL
            ELSE t.success_count::DOUBLE / t.feedback_count * 100 END AS success_rate,
       CASE WHEN t.feedback_count = 0 THEN NULL
            ELSE t.failure_count::DOUBLE / t.feedback_count * 100 END AS failure_rate,
       CASE WHEN t.latency_count = 0 THEN NULL
            ELSE t.latency_sum / t.latency_count END AS avg_latency_ms,
       current_timestamp AS computed_at
FROM totals t
LEFT JOIN environment_keys k USING (environment_id)
WHERE t.evaluations > 0
ORDER BY t.environment_id, t.flag_key;
