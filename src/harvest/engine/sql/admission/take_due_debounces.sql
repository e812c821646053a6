-- Takes a workflow's debounced starts that have been quiet until their
-- firing time (skipping any another firer holds): each stops pending and
-- counts one more fired run.
-- $1: workflow name
-- Returns the starts taken: `workflow_id`, `input` (text), `start_source`,
-- `start_source_ref`, `fired_runs` (including this one).
UPDATE harvest_debounce SET pending = false, fired_runs = fired_runs + 1
WHERE (workflow_name, workflow_id) IN (SELECT workflow_name, workflow_id FROM
harvest_debounce WHERE workflow_name = $1 AND pending AND fire_at <= now()
FOR UPDATE SKIP LOCKED) RETURNING workflow_id, input::text AS input, start_source,
start_source_ref, fired_runs
