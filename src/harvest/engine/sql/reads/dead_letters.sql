-- A page of the engine's dead letters not yet replayed, newest first, after
-- a cursor on (failed_at, execution_id).
-- $1: page size, $2: cursor's failed_at in microseconds since the epoch (or
-- null: the first page), $3: cursor's execution id
-- Returns `execution_id`, `workflow_name`, `workflow_id`, `reason`, `error`,
-- `attempts`, `failed_us` and `failed` (ISO 8601 UTC text).
SELECT execution_id, workflow_name, workflow_id, reason, error, attempts,
  (extract(epoch FROM failed_at) * 1000000)::bigint AS failed_us,
  to_char(failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS failed
FROM harvest_engine_dead_letters WHERE replayed_at IS NULL
  AND ($2::bigint IS NULL OR (failed_at, execution_id) <
       ('epoch'::timestamptz + $2::bigint * interval '1 microsecond', $3::uuid))
ORDER BY failed_at DESC, execution_id DESC LIMIT $1
