-- Stages a signal for a run (once per key) and, when it was staged, bumps the
-- run's signal sequence and makes a waiting run due now.
-- $1: execution id, $2: signal name, $3: payload (jsonb text), $4: idempotency
-- key (or null)
-- Returns the run's `id` when staged, no row for a repeated key.
WITH s AS (INSERT INTO harvest_signals (execution_id, name, payload, idempotency_key)
VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT (execution_id, idempotency_key) DO NOTHING
RETURNING execution_id)
UPDATE harvest_workflow_executions e SET signal_seq = signal_seq + 1,
run_after = CASE WHEN status = 'waiting' THEN now() ELSE run_after END
FROM s WHERE e.id = s.execution_id RETURNING e.id
