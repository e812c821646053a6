-- The list's select list, its table (alias `e`) and its first condition,
-- the workflow name ($1, or null for every workflow). Times are ISO 8601 UTC
-- text; `created_us` (microseconds since the epoch) is the page cursor.
SELECT id, workflow_name, workflow_id,
\ir shown_status.sql
  AS status, start_source, start_source_ref,
  attempt, (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created,
  to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS completed
FROM harvest_workflow_executions e
WHERE ($1::text IS NULL OR workflow_name = $1)
