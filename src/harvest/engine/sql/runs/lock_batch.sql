-- Locks the execution rows of a batch of writes, in id order, so no takeover
-- or terminate can change their leases before the transaction ends.
-- $1: execution ids (uuid array)
-- Returns a row (`id`) per row locked.
SELECT id FROM harvest_workflow_executions WHERE id = ANY($1::uuid[]) ORDER BY id
FOR NO KEY UPDATE
