-- First half of flag_value_comparison (see flag_value_comparison.sql): the figures split by
-- served value (on = true, off = false) and the z-score of a two-sided two-proportion z-test of
-- the success rates. Parameter: $min_feedback (per side, below it no verdict). The pipeline then
-- computes the p-value of each z in Python (pipelines/derived.py) into value_comparison_p_values.
CREATE OR REPLACE TEMP TABLE value_comparison_scores AS
WITH sides AS (
    SELECT environment_id, flag_key,
           any_value(organization_id) AS organization_id,
           coalesce(sum(evaluations) FILTER (WHERE served_value), 0)::BIGINT AS on_evaluations,
           coalesce(sum(feedback_count) FILTER (WHERE served_value), 0)::BIGINT AS on_feedback_count,
           coalesce(sum(success_count) FILTER (WHERE served_value), 0)::BIGINT AS on_success_count,
           coalesce(sum(failure_count) FILTER (WHERE served_value), 0)::BIGINT AS on_failure_count,
           coalesce(sum(latency_sum) FILTER (WHERE served_value), 0) AS on_latency_sum,
           coalesce(sum(latency_count) FILTER (WHERE served_value), 0)::BIGINT AS on_latency_count,
           coalesce(sum(evaluations) FILTER (WHERE NOT served_value), 0)::BIGINT AS off_evaluations,
           coalesce(sum(feedback_count) FILTER (WHERE NOT served_value), 0)::BIGINT AS off_feedback_count,
           coalesce(sum(success_count) FILTER (WHERE NOT served_value), 0)::BIGINT AS off_success_count,
           coalesce(sum(failure_count) FILTER (WHERE NOT served_value), 0)::BIGINT AS off_failure_count,
           coalesce(sum(latency_sum) FILTER (WHERE NOT served_value), 0) AS off_latency_sum,
           coalesce(sum(latency_count) FILTER (WHERE NOT served_value), 0)::BIGINT AS off_latency_count
    FROM flag_value_daily_stats
    GROUP BY environment_id, flag_key
), test AS (
    SELECT *,
           on_feedback_count >= $min_feedback AND off_feedback_count >= $min_feedback AS sample_ok,
           CASE WHEN on_feedback_count + off_feedback_count > 0
                THEN (on_success_count + off_success_count)::DOUBLE
                     / (on_feedback_count + off_feedback_count) END AS pooled
    FROM sides
), scored AS (
    SELECT *,
           CASE WHEN sample_ok AND pooled > 0 AND pooled < 1 THEN
                (on_success_count::DOUBLE / on_feedback_count - off_success_count::DOUBLE / off_feedback_count)
                / sqrt(pooled * (1 - pooled) * (1.0::DOUBLE / on_feedback_count + 1.0::DOUBLE / off_feedback_count))
           END AS z
    FROM test
)
SELECT * FROM scored;
