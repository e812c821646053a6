-- The runs per workflow and status as shown. Counted by stored status, then
-- the held runs (a lease row each, few) move from pending or waiting to
-- running: one statement, one snapshot, and no lease probe per row.
-- Returns `workflow_name`, `status` and `n`, for every non-zero count.
WITH held AS (
  SELECT e.workflow_name, e.status FROM harvest_run_leases l
  JOIN harvest_workflow_executions e ON e.id = l.execution_id
  WHERE e.status IN ('pending', 'waiting'))
SELECT workflow_name, status, sum(n)::bigint AS n FROM (
  SELECT workflow_name, status, count(*) AS n FROM harvest_workflow_executions GROUP BY 1, 2
  UNION ALL SELECT workflow_name, status, -count(*) FROM held GROUP BY 1, 2
  UNION ALL SELECT workflow_name, 'running', count(*) FROM held GROUP BY 1) c
GROUP BY 1, 2 HAVING sum(n) > 0
