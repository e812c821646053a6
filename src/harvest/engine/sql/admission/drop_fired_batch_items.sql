-- A fired batch's items without a workflow id go.
-- $1: the items' ids, a jsonb array of numbers
DELETE FROM harvest_batch_items WHERE id IN (SELECT
jsonb_array_elements_text($1::jsonb)::bigint) AND workflow_id IS NULL
