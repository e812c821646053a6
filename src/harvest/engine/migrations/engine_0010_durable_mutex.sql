-- The durable mutex (ENG-20): one row per run that asked for a named lock,
-- in the order it asked. The holder of a name is its first row (by seq)
-- whose run is still open; `granted_at` is set when that run took it. A
-- run's rows go when it releases the lock or ends (the engine sweeps the
-- rows of closed runs and wakes the next in line). No foreign key: runs are
-- purged by retention, and a row whose run is gone is not a holder.
CREATE TABLE harvest_mutex_queue (
  name          text        NOT NULL,
  execution_id  uuid        NOT NULL,
  seq           bigint      GENERATED ALWAYS AS IDENTITY,
  enqueued_at   timestamptz NOT NULL DEFAULT now(),
  granted_at    timestamptz,
  PRIMARY KEY (name, execution_id)
);
CREATE INDEX harvest_mutex_queue_order ON harvest_mutex_queue (name, seq);
CREATE INDEX harvest_mutex_queue_run ON harvest_mutex_queue (execution_id);
