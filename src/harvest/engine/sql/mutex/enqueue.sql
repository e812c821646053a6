-- Queues a run for a lock (once), if its lease still holds it.
-- $1: execution id, $2: lease token, $3: the lock's name
-- Returns one row: `fenced`, whether the lease held.
WITH f AS (
\ir ../fragments/lease_fence.sql
),
ins AS (INSERT INTO harvest_mutex_queue (name, execution_id) SELECT $3, id FROM f
  ON CONFLICT (name, execution_id) DO NOTHING)
SELECT EXISTS (SELECT 1 FROM f) AS fenced
