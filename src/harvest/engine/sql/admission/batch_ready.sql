-- Whether a workflow's next batch is due: full, or its oldest unfired item
-- waited max_wait.
-- $1: workflow name, $2: the batch's max size, $3: max wait in milliseconds
-- Returns one row: `ready` (null when no item waits).
SELECT count(*) >= $2 OR min(created_at) <= now() - $3 * interval '1 millisecond'
AS ready FROM (SELECT created_at FROM harvest_batch_items WHERE workflow_name = $1
AND fired_execution IS NULL ORDER BY id LIMIT $2) b
