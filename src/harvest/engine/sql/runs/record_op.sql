-- Records a run's operation at its position, if the run's lease still holds
-- it. The fence's FOR KEY SHARE holds off a takeover or terminate (each
-- changes the lease row) until this commits: no lease, no event.
-- $1: execution id, $2: lease token, $3: op_seq, $4: kind, $5: name,
-- $6: payload (json text)
-- Returns one row (`id`) when recorded, none when the lease did not hold; a
-- unique violation when another holder wrote that position.
WITH f AS (
\ir ../fragments/lease_fence.sql
)
INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload)
SELECT id, $3, $4, $5, $6::jsonb FROM f RETURNING id
