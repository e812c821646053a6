-- A fired batch's keyed items stay, pointing at their run (the dedupe
-- record).
-- $1: the items' ids, a jsonb array of numbers, $2: the run's execution id
UPDATE harvest_batch_items SET fired_execution = $2::uuid WHERE id IN (SELECT
jsonb_array_elements_text($1::jsonb)::bigint) AND workflow_id IS NOT NULL
