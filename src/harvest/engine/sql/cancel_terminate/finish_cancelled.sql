-- Ends a run that saw its cancellation as cancelled, with its output and
-- error, if its lease still holds it, and records it.
-- $1: execution id, $2: lease token, $3: output (JSON), $4: error or null
-- Returns `execution_id` when the lease held and the run was open, no row
-- otherwise.
WITH
\ir ../fragments/held_ctes.sql
,
done AS (UPDATE harvest_workflow_executions SET status = 'cancelled',
  output = $3::jsonb, error = $4, completed_at = now(), updated_at = now() FROM held
  WHERE id = held.held_id AND status NOT IN
\ir ../fragments/closed_statuses.sql
  RETURNING id, cancel_reason)
INSERT INTO harvest_workflow_events (execution_id, kind, payload)
SELECT id, 'WorkflowCancelled', jsonb_strip_nulls(jsonb_build_object('reason',
  cancel_reason, 'output', $3::jsonb, 'error', $4::text)) FROM done RETURNING execution_id
