-- Schema v2: a start without a workflow id (most connector starts, most API
-- starts) adds no entry to the two workflow-id indexes. Both were unique
-- indexes over every row, NULL ids included, where a NULL never conflicts:
-- two index insertions per start that no lookup could use. Each lookup
-- compares workflow_id with `=`, which already implies it is not null, so
-- the partial indexes serve every query the full ones did.
CREATE UNIQUE INDEX harvest_executions_current_named
  ON harvest_workflow_executions (workflow_name, workflow_id)
  WHERE NOT superseded AND workflow_id IS NOT NULL;
DROP INDEX harvest_executions_current;
ALTER INDEX harvest_executions_current_named RENAME TO harvest_executions_current;
CREATE UNIQUE INDEX harvest_executions_runs_named
  ON harvest_workflow_executions (workflow_name, workflow_id, run_no)
  WHERE workflow_id IS NOT NULL;
DROP INDEX harvest_executions_runs;
ALTER INDEX harvest_executions_runs_named RENAME TO harvest_executions_runs;
