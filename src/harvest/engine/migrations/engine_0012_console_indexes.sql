-- The console's lists at a million runs: newest first, page by page, by
-- created_at with the id as the tie-break (the cursor is a row comparison on
-- both), and a run found by the broker coordinates that started it.
CREATE INDEX harvest_executions_created ON harvest_workflow_executions (created_at, id);
CREATE INDEX harvest_executions_source_ref ON harvest_workflow_executions (start_source_ref)
  WHERE start_source_ref IS NOT NULL;
