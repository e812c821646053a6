-- A batch item started with a workflow id (a connector's fallback dedupe
-- unit on a batched workflow) is kept after its batch fires, pointing at the
-- run that took it, so a redelivery of the same message is recognised as a
-- replay instead of joining a later batch. The keyed items go with their run
-- when retention purges it.
ALTER TABLE harvest_batch_items ADD COLUMN workflow_id text;
ALTER TABLE harvest_batch_items
  ADD COLUMN fired_execution uuid REFERENCES harvest_workflow_executions (id) ON DELETE CASCADE;
CREATE UNIQUE INDEX harvest_batch_items_key
  ON harvest_batch_items (workflow_name, workflow_id) WHERE workflow_id IS NOT NULL;
DROP INDEX harvest_batch_items_order;
CREATE INDEX harvest_batch_items_pending
  ON harvest_batch_items (workflow_name, id) WHERE fired_execution IS NULL;
