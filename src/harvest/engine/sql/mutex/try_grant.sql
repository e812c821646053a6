-- Grants a lock to a queued run that is first in line: no open run queued
-- before it, and none holding it (a holder is always first; the second test
-- keeps that true by construction rather than by argument).
-- $1: the lock's name, $2: execution id
-- Returns the run's queue row (`seq`) when granted, no row otherwise.
UPDATE harvest_mutex_queue q SET granted_at = COALESCE(q.granted_at, now())
WHERE q.name = $1 AND q.execution_id = $2::uuid AND NOT EXISTS (
  SELECT 1 FROM harvest_mutex_queue o JOIN harvest_workflow_executions e
  ON e.id = o.execution_id WHERE o.name = $1 AND o.execution_id <> $2::uuid
  AND e.status NOT IN
\ir ../fragments/closed_statuses.sql
  AND (o.seq < q.seq OR o.granted_at IS NOT NULL))
RETURNING q.seq
