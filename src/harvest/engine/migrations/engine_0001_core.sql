-- The durable workflow engine's core schema.

CREATE TABLE harvest_workflow_executions (
  id               uuid        PRIMARY KEY,
  workflow_name    text        NOT NULL,
  workflow_id      text,
  -- pending: runnable at run_after; running: leased by a worker;
  -- waiting: suspended on a signal or timer until run_after (or a signal);
  -- completed / failed: terminal.
  status           text        NOT NULL CHECK (status IN ('pending','running','waiting','completed','failed')),
  input            jsonb       NOT NULL,
  output           jsonb,
  error            text,
  start_source     text        NOT NULL,
  start_source_ref text,
  attempt          integer     NOT NULL DEFAULT 1,
  max_attempts     integer     NOT NULL DEFAULT 3,
  run_after        timestamptz NOT NULL DEFAULT now(),
  lease_owner      text,
  lease_expires_at timestamptz,
  -- Bumped by every staged signal; a worker suspending the run compares it
  -- with what it read so a signal racing the suspension is never missed.
  signal_seq       bigint      NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  UNIQUE (workflow_name, workflow_id)
);
CREATE INDEX harvest_executions_runnable ON harvest_workflow_executions (run_after)
  WHERE status IN ('pending', 'waiting');
CREATE INDEX harvest_executions_leased ON harvest_workflow_executions (lease_expires_at)
  WHERE status = 'running';
CREATE INDEX harvest_executions_terminal ON harvest_workflow_executions (completed_at)
  WHERE status IN ('completed', 'failed');
CREATE INDEX harvest_executions_source ON harvest_workflow_executions (start_source)
  WHERE start_source <> 'client';

-- The durable history. Events with an op_seq are the results of the
-- workflow's durable operations in call order (steps, signals received,
-- timers, child starts): a resumed run replays them instead of re-executing.
CREATE TABLE harvest_workflow_events (
  id           bigserial   PRIMARY KEY,
  execution_id uuid        NOT NULL REFERENCES harvest_workflow_executions (id) ON DELETE CASCADE,
  op_seq       integer,
  kind         text        NOT NULL,
  name         text,
  payload      jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (execution_id, op_seq)
);
CREATE INDEX harvest_events_execution ON harvest_workflow_events (execution_id, id);

-- Signals staged for an execution, consumed in id order, which is the order
-- they committed in (writers serialise on the execution row).
CREATE TABLE harvest_signals (
  id              bigserial   PRIMARY KEY,
  execution_id    uuid        NOT NULL REFERENCES harvest_workflow_executions (id) ON DELETE CASCADE,
  name            text        NOT NULL,
  payload         jsonb       NOT NULL,
  idempotency_key text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (execution_id, idempotency_key)
);
CREATE INDEX harvest_signals_execution ON harvest_signals (execution_id, name, id);

-- Start idempotency claims: a keyed start owns its key until expires_at.
CREATE TABLE harvest_start_idempotency (
  workflow_name   text        NOT NULL,
  idempotency_key text        NOT NULL,
  execution_id    uuid        NOT NULL,
  expires_at      timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_name, idempotency_key)
);
CREATE INDEX harvest_start_idempotency_expiry ON harvest_start_idempotency (expires_at);

-- Throttle admission: the current window of each throttled workflow type.
CREATE TABLE harvest_admission_throttle (
  workflow_name     text        PRIMARY KEY,
  window_started_at timestamptz NOT NULL,
  used              integer     NOT NULL
);

-- Starts deferred by admission control, fired in id order as tokens free.
CREATE TABLE harvest_deferred_starts (
  id               bigserial   PRIMARY KEY,
  workflow_name    text        NOT NULL,
  workflow_id      text,
  input            jsonb       NOT NULL,
  start_source     text        NOT NULL,
  start_source_ref text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workflow_name, workflow_id)
);
CREATE INDEX harvest_deferred_starts_order ON harvest_deferred_starts (workflow_name, id);
