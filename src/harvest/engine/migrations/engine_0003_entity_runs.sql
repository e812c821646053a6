-- Entities outlive their runs: one workflow id may have several runs, one
-- after another. `run_no` numbers them from 1; `superseded` marks every run
-- but the current one. Only the current run of a workflow id is unique, so a
-- closed entity run can be followed by a new one while starts keep their
-- one-run-per-workflow_id dedupe (they never supersede).
ALTER TABLE harvest_workflow_executions ADD COLUMN run_no integer NOT NULL DEFAULT 1;
ALTER TABLE harvest_workflow_executions ADD COLUMN superseded boolean NOT NULL DEFAULT false;
ALTER TABLE harvest_workflow_executions
  DROP CONSTRAINT harvest_workflow_executions_workflow_name_workflow_id_key;
CREATE UNIQUE INDEX harvest_executions_current
  ON harvest_workflow_executions (workflow_name, workflow_id) WHERE NOT superseded;
CREATE UNIQUE INDEX harvest_executions_runs
  ON harvest_workflow_executions (workflow_name, workflow_id, run_no);
