-- Takes a workflow's oldest deferred starts off the queue, skipping any
-- another firer holds.
-- $1: workflow name, $2: how many at most (the tokens available)
-- Returns the starts taken, in no order (RETURNING has none): `id`,
-- `workflow_id`, `input` (text), `start_source`, `start_source_ref`.
DELETE FROM harvest_deferred_starts WHERE id IN (SELECT id FROM harvest_deferred_starts
WHERE workflow_name = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING id, workflow_id, input::text AS input, start_source, start_source_ref
