-- Fold newly loaded evaluations into flag_sdk_daily (pipelines/lifecycle.py): per flag
-- environment, UTC day and sdk ('' for none), the evaluations and the latest of them.
-- Parameters: $lo < load_batch <= $hi. Evaluations are each evaluation_id once, so a batch adds.
INSERT INTO flag_sdk_daily
SELECT environment_id, flag_key, utc_date(evaluated_at) AS evaluation_date,
       coalesce(sdk, '') AS sdk, count(*) AS evaluations, max(evaluated_at) AS last_evaluated_at
FROM evaluation_events
WHERE load_batch > $lo AND load_batch <= $hi
GROUP BY ALL
ON CONFLICT DO UPDATE SET
    evaluations = flag_sdk_daily.evaluations + excluded.evaluations,
    last_evaluated_at = greatest(flag_sdk_daily.last_evaluated_at, excluded.last_evaluated_at);
