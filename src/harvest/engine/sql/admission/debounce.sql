-- Trailing-edge debounce: every start of a workflow_id pushes its firing time
-- out and replaces its input (and marks it pending again).
-- $1: workflow name, $2: workflow_id, $3: input (jsonb text), $4: start
-- source, $5: start source ref, $6: the debounce window in milliseconds
INSERT INTO harvest_debounce (workflow_name, workflow_id, input, start_source,
start_source_ref, fire_at) VALUES ($1, $2, $3::jsonb, $4, $5, now() + $6 * interval
'1 millisecond') ON CONFLICT (workflow_name, workflow_id) DO UPDATE SET
input = EXCLUDED.input, start_source = EXCLUDED.start_source,
start_source_ref = EXCLUDED.start_source_ref, fire_at = EXCLUDED.fire_at, pending = true
