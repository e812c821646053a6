-- Runs in the completion's transaction, after carry_supersede.sql: starts the
-- next run of an entity run this transaction completed and superseded, with
-- the same input, and moves the signals it left unread to it, in their order.
-- $1: the superseded run's execution id
-- Returns one row when a next run started: `execution_id` (the new run's),
-- `carried` (how many signals moved); none otherwise.
WITH e AS (SELECT * FROM harvest_workflow_executions WHERE id = $1 AND superseded
  AND completed_at = now()),
n AS (INSERT INTO harvest_workflow_executions (id, workflow_name, workflow_id, status,
  input, start_source, start_source_ref, start_trace, max_attempts, run_no, entity_reuse,
  concurrency_key)
  SELECT gen_random_uuid(), e.workflow_name, e.workflow_id, 'pending', e.input,
  e.start_source, e.start_source_ref, e.start_trace, e.max_attempts, e.run_no + 1, true,
  e.concurrency_key
  FROM e
  RETURNING id, workflow_name, start_source, start_source_ref),
moved AS (UPDATE harvest_signals s SET execution_id = n.id FROM n, e
  WHERE s.id IN (
\ir ../fragments/carry_unread.sql
  ) RETURNING s.id)
INSERT INTO harvest_workflow_events (execution_id, kind, name, payload)
SELECT n.id, 'WorkflowStarted', n.workflow_name, jsonb_build_object('start_source',
  n.start_source, 'start_source_ref', n.start_source_ref, 'carried_signals',
  (SELECT count(*) FROM moved), 'previous_run', $1::text) FROM n
RETURNING execution_id::text, (payload->>'carried_signals')::int AS carried
