-- The metrics split by served value (on = true, off = false) and a two-sided two-proportion
-- z-test of the success rates. Parameters: $min_feedback (per side, below it no verdict) and
-- $alpha. Reads value_comparison_scores (flag_value_comparison_scores.sql) and
-- value_comparison_p_values (p-value of each defined z, computed by the pipeline).
CREATE OR REPLACE TABLE flag_value_comparison AS
WITH tested AS (
    SELECT s.*,
           CASE WHEN NOT s.sample_ok THEN NULL
                WHEN s.z IS NULL THEN 1.0::DOUBLE   -- both sides all success or all failure
                ELSE p.p_value END AS p_value
    FROM value_comparison_scores s
    LEFT JOIN value_comparison_p_values p USING (environment_id, flag_key)
)
SELECT organization_id, environment_id, flag_key,
       on_evaluations, on_feedback_count,
       CASE WHEN on_evaluations = 0 THEN NULL
            ELSE on_feedback_count::DOUBLE / on_evaluations * 100 END AS on_feedback_coverage,
       on_success_count, on_failure_count,
       CASE WHEN on_feedback_count = 0 THEN NULL
            ELSE on_success_count::DOUBLE / on_feedback_count * 100 END AS on_success_rate,
       CASE WHEN on_feedback_count = 0 THEN NULL
            ELSE on_failure_count::DOUBLE / on_feedback_count * 100 END AS on_failure_rate,
       CASE WHEN on_latency_count = 0 THEN NULL
            ELSE on_latency_sum / on_latency_count END AS on_avg_latency_ms,
       off_evaluations, off_feedback_count,
       CASE WHEN off_evaluations = 0 THEN NULL
            ELSE off_feedback_count::DOUBLE / off_evaluations * 100 END AS off_feedback_coverage,
       off_success_count, off_failure_count,
       CASE WHEN off_feedback_count = 0 THEN NULL
            ELSE off_success_count::DOUBLE / off_feedback_count * 100 END AS off_success_rate,
       CASE WHEN off_feedback_count = 0 THEN NULL
            ELSE off_failure_count::DOUBLE / off_feedback_count * 100 END AS off_failure_rate,
       CASE WHEN off_latency_count = 0 THEN NULL
            ELSE off_latency_sum / off_latency_count END AS off_avg_latency_ms,
       z AS z_score,
       p_value,
       CASE WHEN NOT sample_ok THEN NULL
            WHEN p_value >= $alpha THEN 'no_significant_difference'
            WHEN on_success_count::DOUBLE / on_feedback_count
                 > off_success_count::DOUBLE / off_feedback_count THEN 'on_better'
            ELSE 'off_better' END AS verdict,
       CASE WHEN sample_ok THEN NULL
            ELSE format('insufficient sample: {} on and {} off feedback events, {} per side needed',
                        on_feedback_count, off_feedback_count, $min_feedback) END AS no_verdict_reason,
       $min_feedback::BIGINT AS min_feedback_per_side,
       $alpha::DOUBLE AS alpha,
       current_timestamp AS computed_at
FROM tested
WHERE on_evaluations + off_evaluations > 0
ORDER BY environment_id, flag_key;
