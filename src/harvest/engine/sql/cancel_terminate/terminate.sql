-- Terminates one open run at once and records it. The run's lease (if a
-- worker holds it) goes in the terminate's second statement,
-- drop_closed_leases; the worker's next write finds no lease.
-- $1: execution id, $2: reason (the run's error), $3: who asked
-- Returns one row if the run exists: `workflow_name`, `status` (as shown,
-- before the terminate), `was_requested` (a cancel had been requested) and
-- `changed` (this terminate took).
WITH
\ir ../fragments/target_locked.sql
,
upd AS (UPDATE harvest_workflow_executions e SET status = 'terminated', error = $2,
  completed_at = now(), updated_at = now()
  FROM t WHERE e.id = t.id AND t.status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING e.id),
ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload)
  SELECT id, 'WorkflowTerminated', jsonb_build_object('reason', $2::text,
  'requested_by', $3::text) FROM upd)
SELECT t.workflow_name, t.shown_status AS status,
  t.cancel_requested_at IS NOT NULL AS was_requested,
  EXISTS (SELECT 1 FROM upd) AS changed FROM t
