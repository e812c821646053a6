-- Gives a run back, if its lease still holds it (ending the lease): it is
-- pending again after a delay, with no attempt counted.
-- $1: execution id, $2: lease token, $3: delay in ms
-- Returns one row (`id`) when released, none otherwise.
WITH
\ir ../fragments/held_ctes.sql
UPDATE harvest_workflow_executions SET status = 'pending',
  run_after = now() + $3 * interval '1 millisecond' FROM held
WHERE id = held.held_id AND status NOT IN
\ir ../fragments/closed_statuses.sql
RETURNING id
