-- Makes a failed run pending again, from its first attempt, and records the
-- replay. Recorded steps stay: the replayed run resumes after the last one.
-- $1: execution id
-- Returns `execution_id` when the run was failed, no row otherwise.
WITH r AS (UPDATE harvest_workflow_executions SET status = 'pending', attempt = 1,
  error = NULL, output = NULL, completed_at = NULL, crash_count = 0, run_after = now(),
  updated_at = now()
  WHERE id = $1::uuid AND status = 'failed' RETURNING id)
INSERT INTO harvest_workflow_events (execution_id, kind) SELECT id, 'Replayed' FROM r
RETURNING execution_id
