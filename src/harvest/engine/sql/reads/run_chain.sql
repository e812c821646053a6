-- Where a run stands among the runs of its workflow id: how many there are,
-- and the runs just before and after it.
-- $1: workflow name, $2: workflow id, $3: the run's run_no
-- Returns one row: `runs`, `previous` and `next` (execution ids, or null).
SELECT count(*) AS runs,
  (SELECT id::text FROM harvest_workflow_executions WHERE workflow_name = $1 AND
    workflow_id = $2 AND run_no < $3 ORDER BY run_no DESC LIMIT 1) AS previous,
  (SELECT id::text FROM harvest_workflow_executions WHERE workflow_name = $1 AND
    workflow_id = $2 AND run_no > $3 ORDER BY run_no LIMIT 1) AS next
FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = $2
