-- The lifecycle's evidence (contract section 14, docs/lifecycle.md) of every flag in the temp
-- table `lifecycle_flags` (environment_id, flag_key: the control plane's flags, made by
-- pipelines/lifecycle.py), all in one query over tables sized by flags x days, never the events:
-- flag_value_daily_stats (evaluations per UTC day and served value) and flag_sdk_daily.
-- Parameter: $window_start, the first UTC date of the window (that of now - stale days).
-- A flag never evaluated gets NULLs, 0 and [].
CREATE OR REPLACE TEMP TABLE lifecycle_evidence AS
WITH day_values AS (      -- per flag and day: evaluations, served true, which value(s)
    SELECT s.environment_id, s.flag_key, s.evaluation_date,
           sum(s.evaluations)::BIGINT AS evaluations,
           coalesce(sum(s.evaluations) FILTER (WHERE s.served_value), 0)::BIGINT AS served_true,
           CASE WHEN bool_and(s.served_value) THEN 1     -- only true
                WHEN NOT bool_or(s.served_value) THEN 0  -- only false
                ELSE 2 END AS served                     -- both
    FROM flag_value_daily_stats AS s
    SEMI JOIN lifecycle_flags AS f USING (environment_id, flag_key)
    WHERE s.evaluations > 0
    GROUP BY ALL
), marked AS (            -- days, newest first, after which another value (or both) was served
    SELECT *,
           sum(CASE WHEN served = 2 OR served <> last_served THEN 1 ELSE 0 END) OVER (
               PARTITION BY environment_id, flag_key ORDER BY evaluation_date DESC
               ROWS UNBOUNDED PRECEDING) AS breaks_since
    FROM (
        SELECT *, last_value(served) OVER (
                      PARTITION BY environment_id, flag_key ORDER BY evaluation_date
                      ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last_served
        FROM day_values
    )
), values_evidence AS (
    SELECT environment_id, flag_key,
           -- the first day of the trailing run of days that served one value, the latest's
           min(evaluation_date) FILTER (WHERE breaks_since = 0) AS one_value_since,
           coalesce(sum(evaluations) FILTER (WHERE evaluation_date >= $window_start), 0)::BIGINT
               AS evaluations_window,
           coalesce(sum(served_true) FILTER (WHERE evaluation_date >= $window_start), 0)::BIGINT
               AS served_true_window
    FROM marked
    GROUP BY ALL
), sdk_evidence AS (
    SELECT s.environment_id, s.flag_key,
           max(s.last_evaluated_at) AS last_evaluated_at,
           list_sort(list_distinct(
               list(s.sdk) FILTER (WHERE s.evaluation_date >= $window_start AND s.sdk <> '')
           )) AS applications
    FROM flag_sdk_daily AS s
    SEMI JOIN lifecycle_flags AS f USING (environment_id, flag_key)
    GROUP BY ALL
)
SELECT f.environment_id, f.flag_key,
       epoch_us(e.last_evaluated_at) AS last_evaluated_us,
       coalesce(v.evaluations_window, 0) AS evaluations_30d,
       CASE WHEN v.evaluations_window > 0
            THEN 100.0 * v.served_true_window / v.evaluations_window END AS served_true_percent_30d,
       v.one_value_since,
       coalesce(e.applications, []::VARCHAR[]) AS applications
FROM lifecycle_flags AS f
LEFT JOIN values_evidence AS v USING (environment_id, flag_key)
LEFT JOIN sdk_evidence AS e USING (environment_id, flag_key);
