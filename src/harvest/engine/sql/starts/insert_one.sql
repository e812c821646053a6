-- Creates one execution, unless a live run already has its workflow_id.
-- $1: execution id, $2: workflow name, $3: workflow_id (or null), $4: input
-- (json text), $5: start source, $6: start source ref, $7: max attempts,
-- $8: start trace (jsonb text, or null), $9: concurrency key (or null)
-- Returns one row (`id`) when created, none otherwise.
INSERT INTO harvest_workflow_executions
(id, workflow_name, workflow_id, status, input, start_source, start_source_ref,
max_attempts, start_trace, concurrency_key)
VALUES ($1, $2, $3, 'pending', $4::json, $5, $6, $7, $8::jsonb, $9)
ON CONFLICT (workflow_name, workflow_id) WHERE NOT superseded AND workflow_id IS NOT NULL
DO NOTHING RETURNING id
