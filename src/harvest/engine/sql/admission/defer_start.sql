-- Queues a start that is over the rate (or behind earlier deferred starts,
-- to stay FIFO). A second deferral of the same workflow_id collapses into the
-- queued one, which is what lets the connector's WorkflowId fallback dedupe
-- it.
-- $1: workflow name, $2: workflow_id (or null), $3: input (jsonb text),
-- $4: start source, $5: start source ref
INSERT INTO harvest_deferred_starts
(workflow_name, workflow_id, input, start_source, start_source_ref)
VALUES ($1, $2, $3::jsonb, $4, $5) ON CONFLICT (workflow_name, workflow_id) DO NOTHING
