-- Adds a start to its workflow's batch. A start with a workflow id joins
-- once: a repeat (a redelivery) while the item waits, or after its batch
-- fired, is a no-op.
-- $1: workflow name, $2: workflow_id (or null), $3: input (jsonb text),
-- $4: start source, $5: start source ref
INSERT INTO harvest_batch_items (workflow_name, workflow_id, input, start_source,
start_source_ref) VALUES ($1, $2, $3::jsonb, $4, $5)
ON CONFLICT (workflow_name, workflow_id) WHERE workflow_id IS NOT NULL DO NOTHING
