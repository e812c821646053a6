-- Deletes the leases of runs this transaction closed (or any closed run):
-- a terminate runs it as its second statement, whose snapshot sees a lease a
-- claim committed while the terminate waited for the execution row. Locks in
-- execution id order, as renewals do.
WITH d AS (SELECT l.execution_id FROM harvest_run_leases l JOIN harvest_workflow_executions e
  ON e.id = l.execution_id WHERE e.status IN
\ir ../fragments/closed_statuses.sql
  ORDER BY l.execution_id FOR UPDATE OF l)
DELETE FROM harvest_run_leases l USING d WHERE l.execution_id = d.execution_id
