-- Marks a dead letter replayed, if it is not already.
-- $1: execution id
-- Returns `execution_id` when marked, no row otherwise.
UPDATE harvest_engine_dead_letters SET replayed_at = now()
WHERE execution_id = $1::uuid AND replayed_at IS NULL RETURNING execution_id
