-- Per-key concurrency (ENG-19): the key a run of a keyed workflow was
-- created with (null for every other run), and the count the claim of a
-- keyed workflow makes — its running runs per key — as an index-only read.
ALTER TABLE harvest_workflow_executions ADD COLUMN concurrency_key text;
CREATE INDEX harvest_executions_keyed_running
  ON harvest_workflow_executions (workflow_name, concurrency_key)
  WHERE concurrency_key IS NOT NULL AND status = 'running';
