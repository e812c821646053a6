-- Locks a workflow's next batch: its oldest unfired items, skipping any
-- another firer holds.
-- $1: workflow name, $2: the batch's max size
-- Returns the items: `id`, `input` (text), `start_source`, `start_source_ref`.
SELECT id, input::text AS input, start_source, start_source_ref FROM
harvest_batch_items WHERE workflow_name = $1 AND fired_execution IS NULL ORDER BY id
LIMIT $2 FOR UPDATE SKIP LOCKED
