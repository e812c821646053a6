-- A run's unread signals (at most 100, oldest first): delivered, and no
-- SignalReceived event of the run names it.
-- $1: execution id
-- Returns `id`, `name`, `payload` and `received` (ISO 8601 UTC text).
SELECT s.id, s.name, s.payload::text AS payload,
  to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS received
FROM harvest_signals s WHERE s.execution_id = $1::uuid AND NOT EXISTS (
  SELECT 1 FROM harvest_workflow_events ev WHERE ev.execution_id = s.execution_id
  AND ev.kind = 'SignalReceived' AND (ev.payload->>'signal_id')::bigint = s.id)
ORDER BY s.id LIMIT 100
