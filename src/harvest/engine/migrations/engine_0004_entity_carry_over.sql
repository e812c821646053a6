-- An entity run created under workflow-id reuse `allow_after_close` hands
-- the signals it never read to the next run of its workflow id when it
-- completes (a message that arrived as the run was finishing is not lost).
ALTER TABLE harvest_workflow_executions
  ADD COLUMN entity_reuse boolean NOT NULL DEFAULT false;
