-- Suspends a run until a time, if its lease still holds it (ending the
-- lease). A signal staged after the run read its history bumped signal_seq:
-- the run stays runnable instead of sleeping through it.
-- $1: execution id, $2: lease token, $3: the signal_seq the run saw,
-- $4: when to wake, in epoch ms
-- Returns one row (`id`) when suspended, none otherwise.
WITH
\ir ../fragments/held_ctes.sql
UPDATE harvest_workflow_executions SET status = 'waiting', crash_count = 0,
  updated_at = now(), run_after = CASE WHEN signal_seq > $3 THEN now()
  ELSE to_timestamp($4::double precision / 1000) END FROM held
WHERE id = held.held_id AND status NOT IN
\ir ../fragments/closed_statuses.sql
RETURNING id
