-- Terminates one chunk of the open runs matching a filter, in id order, and
-- records each; their leases go in the statement after it,
-- drop_closed_leases. The caller repeats it until a chunk comes back short,
-- so no transaction holds millions of runs.
-- $1: workflow name or null, $2: status as shown or null, $3: reason (the
-- runs' error), $4: who asked, $5: the chunk's size
-- Returns `workflow_name` and `n`, the runs changed per workflow.
WITH t AS (SELECT id FROM harvest_workflow_executions e WHERE
\ir ../fragments/open_matching_filter.sql
  ORDER BY id LIMIT $5 FOR NO KEY UPDATE),
upd AS (UPDATE harvest_workflow_executions e SET status = 'terminated', error = $3,
  completed_at = now(), updated_at = now()
  FROM t WHERE e.id = t.id RETURNING e.id, e.workflow_name),
ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload)
  SELECT id, 'WorkflowTerminated', jsonb_build_object('reason', $3::text,
  'requested_by', $4::text) FROM upd)
SELECT workflow_name, count(*) AS n FROM upd GROUP BY workflow_name
