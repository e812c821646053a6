-- Leaves a lock's queue (held or waiting), if the run's lease still holds it.
-- $1: execution id, $2: lease token, $3: the lock's name
-- Returns one row: `fenced`, whether the lease held.
WITH f AS (
\ir ../fragments/lease_fence.sql
),
gone AS (DELETE FROM harvest_mutex_queue q USING f WHERE q.execution_id = f.id
  AND q.name = $3)
SELECT EXISTS (SELECT 1 FROM f) AS fenced
