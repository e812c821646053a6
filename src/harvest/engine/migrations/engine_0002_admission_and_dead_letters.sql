-- Engine dead letters: runs that exhausted their retries (ENG-14). The row
-- goes when the execution does (retention) and is marked when replayed.
CREATE TABLE harvest_engine_dead_letters (
  execution_id  uuid        PRIMARY KEY REFERENCES harvest_workflow_executions (id) ON DELETE CASCADE,
  workflow_name text        NOT NULL,
  workflow_id   text,
  error         text        NOT NULL,
  attempts      integer     NOT NULL,
  failed_at     timestamptz NOT NULL DEFAULT now(),
  replayed_at   timestamptz
);
CREATE INDEX harvest_engine_dead_letters_open ON harvest_engine_dead_letters (failed_at)
  WHERE replayed_at IS NULL;

-- Debounce admission: the pending start of each (workflow, workflow_id),
-- fired at fire_at with the last input received.
CREATE TABLE harvest_debounce (
  workflow_name    text        NOT NULL,
  workflow_id      text        NOT NULL,
  input            jsonb       NOT NULL,
  start_source     text        NOT NULL,
  start_source_ref text,
  fire_at          timestamptz NOT NULL,
  pending          boolean     NOT NULL DEFAULT true,
  fired_runs       integer     NOT NULL DEFAULT 0,
  PRIMARY KEY (workflow_name, workflow_id)
);
CREATE INDEX harvest_debounce_due ON harvest_debounce (fire_at) WHERE pending;

-- Batch admission: inputs waiting to be started together as one run.
CREATE TABLE harvest_batch_items (
  id               bigserial   PRIMARY KEY,
  workflow_name    text        NOT NULL,
  input            jsonb       NOT NULL,
  start_source     text        NOT NULL,
  start_source_ref text,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harvest_batch_items_order ON harvest_batch_items (workflow_name, id);
