-- Schema v2, last step: the narrow run queue. A worker's hold on a run is a
-- small row of its own, not a rewrite of the wide execution row.
--
-- * Claiming a run inserts a lease row (execution id, token, expiry, and the
--   workflow and concurrency key that per-key limits count); renewing it
--   updates that row; the outcome (completion, failure, retry, suspension,
--   release) deletes it in the transaction that writes the execution row.
--   The execution row is written at start and at each outcome, never at a
--   claim or a renewal: a claim is ~200 bytes of WAL instead of a second
--   copy of the run's input and seven index entries.
-- * The execution row keeps the status the run was claimed in (pending or
--   waiting) while a lease is held; readers show such a run as running.
--   Only a lease row's existence means held: its token is the fence every
--   write of the run checks.
-- * Runs that were running when this migration ran keep their lease: its
--   row moves here and the execution row goes back to pending, which is
--   what it is once the lease lapses.
CREATE TABLE harvest_run_leases (
  execution_id     uuid        PRIMARY KEY,
  workflow_name    text        NOT NULL,
  concurrency_key  text,
  lease_owner      text        NOT NULL,
  lease_expires_at timestamptz NOT NULL,
  claimed_at       timestamptz NOT NULL DEFAULT now()
);
-- Takeover of lapsed leases, oldest first.
CREATE INDEX harvest_run_leases_expiry ON harvest_run_leases (lease_expires_at);
-- Renewals name the tokens a worker holds.
CREATE UNIQUE INDEX harvest_run_leases_owner ON harvest_run_leases (lease_owner);
-- Per-key concurrency (ENG-19): the held runs of a keyed workflow, per key.
CREATE INDEX harvest_run_leases_keyed ON harvest_run_leases (workflow_name, concurrency_key)
  WHERE concurrency_key IS NOT NULL;

INSERT INTO harvest_run_leases
  (execution_id, workflow_name, concurrency_key, lease_owner, lease_expires_at)
SELECT id, workflow_name, concurrency_key, COALESCE(lease_owner, 'migrated/' || id::text),
  COALESCE(lease_expires_at, now())
FROM harvest_workflow_executions WHERE status = 'running';

UPDATE harvest_workflow_executions SET status = 'pending', updated_at = now()
WHERE status = 'running';

DROP INDEX harvest_executions_leased;
DROP INDEX harvest_executions_keyed_running;
ALTER TABLE harvest_workflow_executions
  DROP CONSTRAINT harvest_workflow_executions_status_check;
ALTER TABLE harvest_workflow_executions
  ADD CONSTRAINT harvest_workflow_executions_status_check CHECK (status IN
    ('pending', 'waiting', 'completed', 'failed', 'cancelled', 'terminated'));
ALTER TABLE harvest_workflow_executions DROP COLUMN lease_owner, DROP COLUMN lease_expires_at;

