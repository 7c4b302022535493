-- The metrics per flag environment and UTC date of the evaluation (feedback counts on the day
-- its evaluation happened, whenever it was received).
CREATE OR REPLACE TABLE flag_environment_daily AS
WITH totals AS (
    SELECT environment_id, flag_key, evaluation_date,
           any_value(organization_id) AS organization_id,
           sum(evaluations)::BIGINT AS evaluations,
           sum(feedback_count)::BIGINT AS feedback_count,
           sum(success_count)::BIGINT AS success_count,
           sum(failure_count)::BIGINT AS failure_count,
           sum(latency_sum) AS latency_sum,
           sum(latency_count)::BIGINT AS latency_count
    FROM flag_value_daily_stats
    GROUP BY environment_id, flag_key, evaluation_date
)
SELECT organization_id, environment_id, flag_key, evaluation_date,
       evaluations, feedback_count,
       CASE WHEN evaluations = 0 THEN NULL
            ELSE feedback_count::DOUBLE / evaluations * 100 END AS feedback_coverage,
       success_count, failure_count,
       CASE WHEN feedback_count = 0 THEN NULL
            ELSE success_count::DOUBLE / feedback_count * 100 END AS success_rate,
       CASE WHEN feedback_count = 0 THEN NULL
            ELSE failure_count::DOUBLE / feedback_count * 100 END AS failure_rate,
       CASE WHEN latency_count = 0 THEN NULL ELSE latency_sum / latency_count END AS avg_latency_ms,
       current_timestamp AS computed_at
FROM totals
WHERE evaluations > 0
ORDER BY environment_id, flag_key, evaluation_date;
