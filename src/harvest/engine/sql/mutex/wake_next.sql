-- Wakes the first open run in line for a lock unless it already holds it:
-- its wake counter moves (a suspend racing with this stays runnable) and a
-- waiting run becomes due now; idle workers are told.
-- $1: the lock's name
WITH head AS (SELECT q.execution_id, q.granted_at FROM harvest_mutex_queue q
  JOIN harvest_workflow_executions e ON e.id = q.execution_id
  WHERE q.name = $1 AND e.status NOT IN
\ir ../fragments/closed_statuses.sql
  ORDER BY q.seq LIMIT 1),
woken AS (UPDATE harvest_workflow_executions e SET signal_seq = e.signal_seq + 1,
  run_after = CASE WHEN e.status = 'waiting' THEN LEAST(e.run_after, now())
  ELSE e.run_after END, updated_at = now()
  FROM head WHERE e.id = head.execution_id AND head.granted_at IS NULL RETURNING e.id)
SELECT
\ir ../fragments/notify_work.sql
FROM woken
