-- A run's recorded history events, in order.
-- $1: execution id
-- Returns `id`, `op_seq`, `kind`, `name`, `payload` and `recorded` (ISO
-- 8601 UTC text), one row per event.
SELECT id, op_seq, kind, name, payload::text AS payload,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS recorded
FROM harvest_workflow_events WHERE execution_id = $1 ORDER BY id
