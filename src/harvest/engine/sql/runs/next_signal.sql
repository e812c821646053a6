-- The first signal of a name staged for a run after a given signal.
-- $1: execution id, $2: the signal's name, $3: the signal id to read after
-- Returns at most one row: `id`, `payload`.
SELECT id, payload::text AS payload FROM harvest_signals
WHERE execution_id = $1 AND name = $2 AND id > $3 ORDER BY id LIMIT 1
